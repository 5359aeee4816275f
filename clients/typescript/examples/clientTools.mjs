// @ts-check
// Answers the painter's client tool, `pick_color`, while it paints. The painter is
// examples/client-tools/agent.yaml:
//   infinity serve --agent clients/typescript/examples/client-tools/agent.yaml
//   INFINITY_URL=http://127.0.0.1:8700 node examples/clientTools.mjs "Paint the sky"
import { InfinityClient } from "@infinity-runtime/client";

const client = new InfinityClient({
  baseUrl: process.env.INFINITY_URL ?? "http://127.0.0.1:8700",
  token: process.env.INFINITY_SERVE_TOKEN, // not needed on loopback
});

const thread = `tools-${Date.now()}`;
await client.sendMessage(thread, process.argv[2] ?? "Paint the sky"); // the model calls pick_color

// Answers the thread's calls of pick_color until the thread closes (or `signal` aborts): a
// string goes as it is, any other value as JSON, a thrown error as an error result.
const running = client.runTools(thread, {
  pick_color: ({ for: what }) => (what === "sky" ? "teal" : "ochre"),
});

for await (const event of client.streamEvents(thread, { after: 0 })) {
  if (event.type === "assistant_text") {
    console.log(event.text); // Painting it teal.
    break;
  }
}
await client.closeThread(thread); // runTools resolves with the results it posted
console.log(`${(await running).length} call(s) answered`);

// @ts-check
// Starts a conversation with the server's default agent and prints its reply as it streams in.
//   INFINITY_URL=http://127.0.0.1:8700 node examples/quickstart.mjs "Plan the launch party"
import { InfinityClient } from "@infinity-runtime/client";

const client = new InfinityClient({
  baseUrl: process.env.INFINITY_URL ?? "http://127.0.0.1:8700",
  token: process.env.INFINITY_SERVE_TOKEN, // not needed on loopback
});

const thread = `quickstart-${Date.now()}`;
await client.sendMessage(thread, process.argv[2] ?? "Hello!");

// `after: 0`: the new thread's events from its first one, so nothing is missed however fast
// the agent answers. The stream reconnects by itself if the connection drops.
for await (const event of client.streamEvents(thread, { after: 0 })) {
  // The reply as the model writes it (shown live only: a reply that ended before the stream
  // connected comes as its `assistant_text` alone).
  if (event.type === "assistant_delta") process.stdout.write(event.text);
  // The whole reply, once the thread has kept it.
  if (event.type === "assistant_text") {
    console.log(`\n${thread}: ${event.text}`);
    break; // leaving the loop closes the stream
  }
}

/**
 * `runTools` keeps its promise through outages: a server killed (SIGKILL) and started again on
 * the same port and store, and connections cut at random or at the requests a test names. A
 * handler's result reaches the thread once, and `runTools` does not reject.
 *
 * The random cuts are seeded: `PROXY_SEED=N` replays a run whose seed the failure printed.
 */
import assert from "node:assert/strict";
import { setMaxListeners } from "node:events";
import { after, before, test } from "node:test";

import { InfinityClient, type ToolAnswer, type ToolHandler } from "../src/index.js";
import { startFlakyProxy, type FlakyProxy } from "./support/flakyProxy.js";
import { startRestartable, type Restartable } from "./support/server.js";

/** `color X` calls the client tool `pick_color {for: X}`; its result comes back as `colored RESULT`. */
const SCRIPT = String.raw`rules:
  - when: "(?m)^color (\\w+)$"
    reply:
      tool_calls: [{name: pick_color, args: {for: "$1"}}]
  - when: "pick_color \\{.*?\\} -> (.*)"
    reply: {text: "colored $1"}
  - reply: {text: "ok"}
`;

const CLIENT_TOOLS = `client_tools:
  - name: pick_color
    description: Asks the user for a colour.
    input_schema: {type: object, properties: {for: {type: string}}, required: [for]}
    deadline: 10m
`;

let server: Restartable;
let client: InfinityClient;
const ended = new AbortController();
setMaxListeners(100, ended.signal);
const run = Math.random().toString(36).slice(2, 8);
const threadId = (name: string): string => `${name}-${run}`;

before(async () => {
  server = await startRestartable({ name: "painter", script: SCRIPT, extra: CLIENT_TOOLS });
  client = new InfinityClient({ baseUrl: server.url });
});

after(async () => {
  ended.abort();
  await server?.stop();
});

/** The text of the thread's last entry, when it is the model's words. */
async function reply(id: string): Promise<string | undefined> {
  const item = (await client.getHistory(id)).entries.at(-1)?.item;
  return item?.type === "assistant" ? (item.text ?? undefined) : undefined;
}

/** The history's results of `pick_color`. */
async function results(id: string): Promise<{ call_id: string; text: string }[]> {
  const { entries } = await client.getHistory(id);
  return entries.flatMap((e) => (e.item.type === "tool_result" && e.item.name === "pick_color" ? [e.item] : []));
}

/**
 * Polls `check` until it is true, as `until` does, but fails at once when a runner rejected:
 * a test waiting for an outcome sees why it will not come.
 */
async function answered(what: string, runners: { check(): void }[], check: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    for (const r of runners) r.check();
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Runs `runTools` with `through` beside the test; `stop()` aborts it and gives what it resolved to. */
function runner(through: InfinityClient, id: string, handlers: Record<string, ToolHandler>) {
  const controller = new AbortController();
  ended.signal.addEventListener("abort", () => controller.abort(), { once: true });
  let failure: { error: unknown } | undefined;
  const done = through.runTools(id, handlers, { signal: controller.signal });
  done.catch((error: unknown) => (failure = { error }));
  return {
    /** Throws what `runTools` rejected with, if it has. */
    check: (): void => {
      if (failure !== undefined) throw failure.error;
    },
    stop: async (): Promise<ToolAnswer[]> => {
      controller.abort();
      return done;
    },
  };
}

/** A handler that waits for `release()` before it answers `teal`; `called` resolves when it is called. */
function heldHandler(): { handler: ToolHandler; called: Promise<void>; release: () => void } {
  let called!: () => void;
  let release!: () => void;
  const calledPromise = new Promise<void>((resolve) => (called = resolve));
  const released = new Promise<void>((resolve) => (release = resolve));
  return {
    handler: async () => {
      called();
      await released;
      return "teal";
    },
    called: calledPromise,
    release,
  };
}

/** A server outage of `seconds` while a handler runs: its result reaches the thread once the server is back. */
async function outage(name: string, seconds: number): Promise<void> {
  const id = threadId(name);
  const held = heldHandler();
  const tools = runner(client, id, { pick_color: held.handler });
  await client.sendMessage(id, "color sky");
  await held.called;
  await server.kill();
  held.release(); // the handler answers while the server is down: its post fails
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000)); // the outage itself
  await server.restart();
  await answered("the reply with the result", [tools], async () => (await reply(id)) === "colored teal", 60_000);
  const [result] = await results(id);
  const answers = await tools.stop();
  assert.deepEqual(
    answers.map((a) => [a.callId, a.text, a.accepted]),
    [[result?.call_id, "teal", true]],
  );
}

test("a result given while the server is down for 3 s reaches the thread", async () => {
  await outage("down-3s", 3);
});

test("a result given while the server is down for 10 s reaches the thread", async () => {
  await outage("down-10s", 10);
});

/** Runs `body` with a proxy to the server, stopped after. */
async function withProxy(options: Parameters<typeof startFlakyProxy>[1], body: (proxy: FlakyProxy, through: InfinityClient) => Promise<void>): Promise<void> {
  const proxy = await startFlakyProxy(Number(new URL(server.url).port), options);
  try {
    await body(proxy, new InfinityClient({ baseUrl: proxy.url }));
  } finally {
    await proxy.stop();
  }
}

test("a thread lookup cut while runTools attaches is made again", async () => {
  const id = threadId("lookup-cut");
  await withProxy({}, async (proxy, through) => {
    proxy.cutAt(new RegExp(`^GET /threads/${id} `), "before");
    const tools = runner(through, id, { pick_color: () => "teal" });
    await client.sendMessage(id, "color sky");
    await answered("the reply with the result", [tools], async () => (await reply(id)) === "colored teal");
    const [answer] = await tools.stop();
    assert.equal(answer?.accepted, true);
    assert.deepEqual(proxy.cuts, [`before GET /threads/${id} HTTP/1.1`]);
  });
});

test("a result whose answer was lost is posted again and stands once", async () => {
  const id = threadId("answer-lost");
  const ran: string[] = [];
  await withProxy({}, async (proxy, through) => {
    // The server keeps the result; its 202 never reaches the runner, which posts again.
    proxy.cutAt(new RegExp(`^POST /threads/${id}/tool_results/`), "after");
    const tools = runner(through, id, {
      pick_color: (_args, call) => {
        ran.push(call.call_id);
        return "teal";
      },
    });
    await client.sendMessage(id, "color sky");
    await answered("the reply with the result", [tools], async () => (await reply(id)) === "colored teal");
    const answers = await tools.stop();
    const [result, ...more] = await results(id);
    assert.deepEqual(more, []);
    assert.deepEqual(ran, [result?.call_id]);
    // Posted again, the result was the same input (202), or refused as answered (409).
    assert.deepEqual(answers.map((a) => a.callId), [result?.call_id]);
    assert.equal(proxy.cuts.length, 1);
  });
});

/** How many calls each thread of the random test makes, one after the other. */
const ROUNDS = 4;

test("every call is answered once through connections cut at random", async (t) => {
  const seed = process.env.PROXY_SEED === undefined ? Math.floor(Math.random() * 2 ** 32) : Number(process.env.PROXY_SEED);
  const threads = [0, 1, 2].map((n) => threadId(`random-${n}`));
  const ran: [string, string][] = [];
  await withProxy({ seed }, async (proxy, through) => {
    try {
      const tools = threads.map((id) =>
        runner(through, id, {
          pick_color: (args: { for: string }, call) => {
            ran.push([call.thread_id, call.call_id]);
            return `teal for the ${args.for}`;
          },
        }),
      );
      for (let round = 0; round < ROUNDS; round++) {
        for (const id of threads) await client.sendMessage(id, `color r${round}`);
        for (const id of threads) {
          await answered(`${id}'s reply in round ${round}`, tools, async () => (await reply(id)) === `colored teal for the r${round}`);
        }
      }
      const answers = (await Promise.all(tools.map((t) => t.stop()))).flat();
      for (const id of threads) {
        const found = await results(id);
        assert.deepEqual(
          found.map((r) => r.text),
          Array.from({ length: ROUNDS }, (_, n) => `teal for the r${n}`),
          id,
        );
        const calls = new Set(found.map((r) => r.call_id));
        assert.equal(calls.size, ROUNDS, "each call has one result");
        assert.deepEqual(ran.filter(([t]) => t === id).map(([, c]) => c).sort(), [...calls].sort(), "each handler ran once");
        // A result whose answer was lost may still be on its way when the runner stops (the
        // thread has it): `answers` lists the posts that ended, each once.
        const posted = answers.filter((a) => a.threadId === id).map((a) => a.callId);
        assert.equal(new Set(posted).size, posted.length);
        assert.ok(posted.every((c) => calls.has(c)));
      }
      assert.ok(proxy.cuts.length > 0, `seed ${seed} cut nothing in ${proxy.connections()} connections`);
      t.diagnostic(`PROXY_SEED=${seed}: ${proxy.cuts.length} cuts in ${proxy.connections()} connections`);
    } catch (error) {
      throw new Error(`PROXY_SEED=${seed} (cuts: ${proxy.cuts.join("; ")}): ${String(error)}`, { cause: error });
    }
  });
});

/**
 * The client against a real `infinity serve` (checking itself against the OpenAPI document), an
 * agent on the scripted model, and a tiny RAP tool server that asks questions and hangs.
 */
import assert from "node:assert/strict";
import { setMaxListeners } from "node:events";
import { after, before, test } from "node:test";

import { InfinityClient, InfinityError, type EventStream, type ThreadSummary, type ToolAnswer, type ToolHandler } from "../src/index.js";
import { Collector, document, is } from "./support/contract.js";
import { startProxy } from "./support/proxy.js";
import { INFINITY_BIN, OPENAPI_DOCUMENT, startServer, until, type Served } from "./support/server.js";
import { startToolServer, type ToolServer } from "./support/toolServer.js";

/**
 * The painter: picks a colour by asking (`pick`), hangs on request, and answers the rest. Its
 * client tools, which the tests answer: `color X` calls `pick_color {for: X}` and replies
 * `colored RESULT`; `both` calls `measure` and `pick_color` at once and replies `measured RESULT`
 * once both have answered; `spawn color` spawns a child that calls `pick_color {for: kid}`.
 * `retitle X` calls `set_title`, which waits for a person's approval. A tool result reaches a
 * rule as `NAME ARGS -> TEXT`.
 */
const SCRIPT = String.raw`rules:
  - when: "(?m)^color (\\w+)$"
    reply:
      tool_calls: [{name: pick_color, args: {for: "$1"}}]
  - when: "(?m)^both$"
    reply:
      tool_calls: [{name: measure, args: {}}, {name: pick_color, args: {for: "both"}}]
  - when: "(?m)^spawn color$"
    reply:
      tool_calls: [{name: spawn_thread, args: {instructions: "color kid", child_of: "${"$"}{stack}"}}]
  - thread: child
    when: "Your task: color (\\w+)"
    reply:
      tool_calls: [{name: pick_color, args: {for: "$1"}}]
  - when: "(?m)^retitle (.+)$"
    reply:
      tool_calls: [{name: set_title, args: {title: "$1"}}]
  - when: "measure \\{\\} -> (.*)"
    reply: {text: "measured $1"}
  - when: "pick_color \\{.*?\\} -> (.*)"
    reply: {text: "colored $1"}
  - when: "set_title \\{.*?\\} -> (.*)"
    reply: {text: "titled: $1"}
  - when: "^pick$"
    reply:
      tool_calls: [{name: pick, args: {}}]
  - when: "picked (\\w+)"
    reply: {text: "you picked $1"}
  - when: "^hang$"
    reply:
      tool_calls: [{name: hang, args: {}}]
  - when: "(?m)^say (.+)$"
    reply: {text: "you said $1"}
  - when: "^stream$"
    reply: {text: "Streaming this reply word by word."}
  - reply: {text: "ok"}
`;

/** The painter's client tools (the tests answer their calls) and its approval rule. */
const CLIENT_TOOLS = `client_tools:
  - name: pick_color
    description: Asks the user for a colour.
    input_schema: {type: object, properties: {for: {type: string}}, required: [for]}
    deadline: 10m
  - name: measure
    description: Measures the canvas.
    input_schema: {type: object}
approvals:
  - tools: [set_title]
    deadline: 1h
`;

let server: Served;
let tools: ToolServer;
let client: InfinityClient;
/** Stops every stream a test opened, and every `runTools`, when the tests end. */
const streams = new AbortController();
// Each stream and runner listens to it until the end: more than the default ten.
setMaxListeners(100, streams.signal);

/** Thread ids unique to this run, so that nothing depends on what else the server holds. */
const run = Math.random().toString(36).slice(2, 8);
const threadId = (name: string): string => `${name}-${run}`;

before(async () => {
  tools = await startToolServer();
  server = await startServer({ name: "painter", script: SCRIPT, toolServers: [tools.url], extra: CLIENT_TOOLS });
  client = new InfinityClient({ baseUrl: server.url });
});

after(async () => {
  streams.abort();
  await server?.stop();
  await tools?.stop();
});

/** Follows a thread's events in the background (stopped when the tests end). */
function follow(id: string, after?: number): { stream: EventStream; events: Collector } {
  const stream = client.streamEvents(id, { after, signal: streams.signal, retryMs: 50 });
  return { stream, events: new Collector(stream) };
}

/** Rejects with an `InfinityError` of `status` whose message matches `message`. */
async function refused(call: Promise<unknown>, status: number, message: RegExp): Promise<void> {
  await assert.rejects(call, (error: unknown) => {
    assert.ok(error instanceof InfinityError, `not an InfinityError: ${String(error)}`);
    assert.equal(error.status, status, error.message);
    assert.match(error.message, message);
    return true;
  });
}

/** Sends a first message and waits until the thread exists and is idle again. */
async function started(id: string): Promise<void> {
  await client.sendMessage(id, "hello");
  await until(`${id} to be idle`, async () => {
    const page = await client.listThreads({ title: id });
    return page.threads.some((t) => t.id === id && t.activity.state === "idle");
  });
}

test("the server serves the document the types were generated from", async () => {
  const served: unknown = await (await fetch(`${server.url}/openapi.json`)).json();
  const differences = differ(served, document);
  assert.equal(
    differences.length,
    0,
    `${INFINITY_BIN} serves another document than ${OPENAPI_DOCUMENT} (the types' source); ` +
      `rebuild the one or regenerate the other. Where they differ:\n${differences.slice(0, 10).join("\n")}`,
  );
});

/** The JSON pointers where `a` and `b` differ. */
function differ(a: unknown, b: unknown, at = ""): string[] {
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null || Array.isArray(a) !== Array.isArray(b)) {
    return Object.is(a, b) ? [] : [at || "/"];
  }
  const left = a as Record<string, unknown>;
  const right = b as Record<string, unknown>;
  const keys = new Set([...Object.keys(left), ...Object.keys(right)]);
  return [...keys].flatMap((key) => differ(left[key], right[key], `${at}/${key.replaceAll("~", "~0").replaceAll("/", "~1")}`));
}

test("a message's reply streams in, and the history ends where the stream is", async () => {
  const id = threadId("hello");
  const { stream, events } = follow(id, 0);
  await until("the stream to connect", () => stream.connections > 0);
  const accepted = await client.sendMessage(id, "stream");
  assert.equal(accepted.thread_id, id);
  assert.match(accepted.input_id, /^[A-Za-z0-9_-]+$/);

  const reply = await events.waitFor("the reply", is("assistant_text"));
  assert.equal(reply.text, "Streaming this reply word by word.");
  assert.deepEqual(events.events[0], { ...events.events[0], type: "user_message", text: "stream", seq: 1 });
  const streamed = events.events.filter(is("assistant_delta")).map((e) => e.text);
  assert.ok(streamed.length > 1, "the text streams in pieces");
  assert.equal(streamed.join(""), reply.text);
  assert.deepEqual(events.numbers, [1, 2]);

  const history = await client.getHistory(id);
  assert.equal(history.lastEventId, 2);
  // Shown before its slice committed, the stream's last event has the id `2.B.D`.
  assert.equal(String(stream.lastEventId).split(".")[0], "2");
  assert.deepEqual(
    history.entries.map((e) => e.item),
    [
      { type: "message", text: "stream", from: { kind: "user" } },
      { type: "assistant", text: "Streaming this reply word by word." },
    ],
  );

  // Following from the history's position gives the later events, each once.
  const later = follow(id, history.lastEventId);
  await client.sendMessage(id, "say again");
  await later.events.waitFor("the second reply", is("assistant_text", (e) => e.text === "you said again"));
  assert.deepEqual(later.events.numbers, [3, 4]);
  assert.equal(String(later.stream.lastEventId).split(".")[0], "4");

  const record = await client.getThread(id);
  assert.equal(record.id, id);
  assert.equal(record.agent, "painter");
  assert.equal(record.events, 4);
});

test("a tool server's question: replayed on attach, refused out of range, answered", async () => {
  const id = threadId("pick");
  await client.sendMessage(id, "pick");
  const record = await until("the open question", async () => {
    const record = await client.getThread(id);
    return record.open_choices?.length ? record : undefined;
  });
  const call = record.open_choices?.[0]?.call_id ?? assert.fail("no call");

  // Attaching without a position sends the open question, then `attached`.
  const { events } = follow(id);
  const asked = await events.waitFor("the question", is("choice_requested"));
  assert.equal(asked.call_id, call);
  assert.equal(asked.prompt, "Which colour?");
  assert.deepEqual(asked.choices, ["red", "blue"]);
  const attached = await events.waitFor("attached", is("attached"));
  assert.equal(attached.after, record.events);
  assert.ok(events.events.indexOf(asked) < events.events.indexOf(attached));

  await refused(client.answerChoice(id, call, { selected: 5 }), 400, /\S/);
  assert.deepEqual(tools.answers.filter((a) => a.id === call), [], "a refused answer reaches no tool server");

  const chosen = await client.answerChoice(id, call, { selected: 1 });
  assert.deepEqual(chosen, { call_id: call, selected: 1, choice: "blue" });
  await events.waitFor("the tool's result", is("tool_result", (e) => e.call_id === call && e.text === "picked blue"));
  await events.waitFor("the reply", is("assistant_text", (e) => e.text === "you picked blue"));
  assert.deepEqual(tools.answers.filter((a) => a.id === call), [{ id: call, selected: 1 }]);
  assert.deepEqual((await client.getThread(id)).open_choices ?? [], []);
  await refused(client.answerChoice(id, call, { selected: 0 }), 409, /"blue" \(option 1\); this answer was not taken/);
});

test("dismissing a question sends its default", async () => {
  const id = threadId("dismiss");
  const { events } = follow(id, 0);
  await client.sendMessage(id, "pick");
  const asked = await events.waitFor("the question", is("choice_requested"));
  const chosen = await client.answerChoice(id, asked.call_id, { dismiss: true });
  assert.deepEqual(chosen, { call_id: asked.call_id, selected: 0, choice: "red" });
  await events.waitFor("the reply", is("assistant_text", (e) => e.text === "you picked red"));
});

test("interrupting cancels the call in flight and tells its tool server", async () => {
  const id = threadId("hang");
  const { events } = follow(id, 0);
  await client.sendMessage(id, "hang");
  const call = await events.waitFor("the call", is("tool_call", (e) => e.name === "hang"));
  await until("the tool server to get the call", () => tools.invocations.some((c) => c.id === call.call_id));
  const waiting = await client.getWaiting(id);
  assert.equal(waiting.thread_id, id);
  assert.deepEqual(
    waiting.threads.flatMap((t) => t.calls.map((c) => [c.call_id, c.tool])),
    [[call.call_id, "hang"]],
  );

  const accepted = await client.interrupt(id);
  assert.equal(accepted.thread_id, id);
  const result = await events.waitFor("the call's result", is("tool_result", (e) => e.call_id === call.call_id));
  assert.equal(result.is_error, true);
  assert.match(result.text, /Interrupted by the user/);
  const interrupted = await events.waitFor("interrupted", is("interrupted"));
  assert.equal(interrupted.calls, 1);
  await until("the tool server to hear of it", () =>
    tools.cancellations.some((c) => c.thread_id === id && c.tool_call_id === call.call_id),
  );
  const after = await client.getWaiting(id);
  assert.deepEqual(after.threads.flatMap((t) => t.calls), []);
});

test("a message to a busy thread is refused or queued, as it says", async () => {
  const id = threadId("busy");
  const { events } = follow(id, 0);
  await client.sendMessage(id, "hang");
  const call = await events.waitFor("the call", is("tool_call", (e) => e.name === "hang"));
  await until("the tool server to get the call", () => tools.invocations.some((c) => c.id === call.call_id));
  // Refused at once, saying why.
  await refused(client.sendMessage(id, "say too soon", { whileBusy: "reject" }), 409, /busy/);
  // Kept until the turn ends, then answered.
  await client.sendMessage(id, "say after the turn", { whileBusy: "queue" });
  await until("the queued message", async () => (await client.getWaiting(id)).threads[0]?.queued === 1);
  await client.interrupt(id);
  await events.waitFor("the queued answer", is("assistant_text", (e) => e.text === "you said after the turn"));
});

test("closing a thread: it takes no more input", async () => {
  const id = threadId("close");
  await started(id);
  const { events } = follow(id, 0);
  const accepted = await client.closeThread(id, { tree: true });
  assert.equal(accepted.thread_id, id);
  await events.waitFor("thread_closed", is("thread_closed"));
  await until("the closed record", async () => (await client.getThread(id)).status === "closed");
  await refused(client.sendMessage(id, "still there?"), 409, /closed/);
  await refused(client.closeThread(id), 409, /\S/);
  await refused(client.interrupt(id), 409, /\S/);
  const tree = await client.getTree(id);
  assert.deepEqual(
    tree.map((r) => [r.id, r.status]),
    [[id, "closed"]],
  );
  await until("the tool server to hear of it", () => tools.closings.some((c) => c.thread_id === id));
});

test("schedules: create, list, delete", async () => {
  const id = threadId("schedules");
  await started(id);
  const created = await client.createSchedule(id, {
    message: "water the plants",
    cron: "0 7 * * *",
    timezone: "Europe/Berlin",
  });
  assert.equal(created.thread_id, id);
  assert.match(created.schedule_id, /^sch-/);
  assert.match(created.text, /Europe\/Berlin/);
  const listed = await until("the schedule in the list", async () =>
    (await client.listSchedules(id)).find((s) => s.id === created.schedule_id),
  );
  assert.equal(listed.message, "water the plants");
  assert.equal(listed.cron, "0 7 * * *");
  assert.equal(listed.timezone, "Europe/Berlin");
  assert.equal(listed.fired, 0);

  await refused(client.createSchedule(id, { message: "no rule" }), 400, /exactly one of `rrule` and `cron`/);
  await refused(client.createSchedule(threadId("nobody"), { message: "m", cron: "0 7 * * *" }), 404, /no thread/);

  const deleted = await client.deleteSchedule(id, created.schedule_id);
  assert.equal(deleted.thread_id, id);
  await until("the schedule gone", async () => !(await client.listSchedules(id)).some((s) => s.id === created.schedule_id));
  await refused(client.deleteSchedule(id, created.schedule_id), 404, /no schedule/);
});

test("listing threads: filters, pages, and every page in turn", async () => {
  const tag = threadId("listed");
  const ids = Array.from({ length: 7 }, (_, i) => `${tag}-${i}`);
  for (const id of ids) await client.sendMessage(id, "hello");
  await until("the threads to be listed and idle", async () => {
    const page = await client.listThreads({ title: tag, limit: 500 });
    return page.threads.length === ids.length && page.threads.every((t) => t.activity.state === "idle");
  });

  const first = await client.listThreads({ title: tag, limit: 3 });
  assert.equal(first.threads.length, 3);
  assert.notEqual(first.next, null);
  const second = await client.listThreads({ title: tag, limit: 3, cursor: first.next ?? undefined });
  assert.equal(second.threads.length, 3);
  assert.equal(new Set([...first.threads, ...second.threads].map((t) => t.id)).size, 6);

  const all: ThreadSummary[] = [];
  for await (const summary of client.allThreads({ title: tag, limit: 3 })) all.push(summary);
  assert.deepEqual(all.map((t) => t.id).sort(), [...ids].sort());
  assert.deepEqual(all.slice(0, 6), [...first.threads, ...second.threads]);
  const times = all.map((t) => Date.parse(t.updated_at));
  assert.deepEqual(times, [...times].sort((a, b) => b - a), "newest activity first");

  const filtered = await client.listThreads({ title: tag, roots: true, kind: "conversation", status: "open", agent: "painter" });
  assert.equal(filtered.threads.length, ids.length);
  assert.equal(filtered.next, null);
  assert.deepEqual((await client.listThreads({ title: tag, status: "closed" })).threads, []);
  assert.deepEqual((await client.listThreads({ title: tag, agent: "someone-else" })).threads, []);
  await refused(client.listThreads({ limit: 0 }), 400, /`limit`/);
});

test("an event stream resumes after its connection drops: no gap, no duplicate", async () => {
  const id = threadId("resume");
  const port = Number(new URL(server.url).port);
  const proxy = await startProxy(port);
  try {
    const flaky = new InfinityClient({ baseUrl: proxy.url });
    const stream = flaky.streamEvents(id, { signal: streams.signal, retryMs: 20, maxRetryMs: 100 });
    const events = new Collector(stream);
    await events.waitFor("attached", is("attached", (e) => e.after === 0));
    await client.sendMessage(id, "say one");
    await events.waitFor("the first reply", is("assistant_text", (e) => e.text === "you said one"));
    assert.equal(String(stream.lastEventId).split(".")[0], "2");

    // The network drops, and stays down while the thread goes on.
    proxy.refuse(true);
    proxy.cut();
    await client.sendMessage(id, "say two");
    await client.sendMessage(id, "say three");
    await until("the thread to go on", async () => (await client.getThread(id)).events === 6);
    proxy.refuse(false);

    await events.waitFor("what was missed", is("assistant_text", (e) => e.text === "you said three"));
    await client.sendMessage(id, "say four");
    await events.waitFor("a live reply", is("assistant_text", (e) => e.text === "you said four"));

    assert.deepEqual(events.numbers, [1, 2, 3, 4, 5, 6, 7, 8]);
    assert.deepEqual(
      events.events.filter(is("user_message")).map((e) => e.text),
      ["say one", "say two", "say three", "say four"],
    );
    assert.ok(stream.connections >= 2, `connected ${stream.connections} times`);
    const streamRequests = proxy.requests.filter((r) => r.startsWith("GET "));
    assert.doesNotMatch(streamRequests[0] ?? "", /last-event-id/i, "the first connection attaches");
    assert.ok(
      // The id of event 2: `2`, or `2.B.D` when the stream showed it before its slice committed.
      streamRequests.slice(1).some((r) => /^last-event-id: 2(\.[0-9]+\.[0-9a-f]{16})?$/im.test(r)),
      `a reconnection resumes after 2:\n${streamRequests.join("\n\n")}`,
    );
  } finally {
    await proxy.stop();
  }
});

test("models, agents, budget: switching and setting", async () => {
  const id = threadId("settings");
  await started(id);
  const models = await client.listModels();
  assert.deepEqual(models.allowed, []);
  assert.match(models.set_in, /--allow-model/);
  const agents = await client.listAgents();
  assert.deepEqual(agents, { default: "painter", stored: [] });

  assert.equal((await client.useModel(id, null)).thread_id, id);
  await refused(client.useModel(id, "script:elsewhere.yaml"), 400, /script:elsewhere\.yaml/);
  assert.equal((await client.useAgent(id, "painter")).thread_id, id);
  await refused(client.useAgent(id, "someone-else"), 409, /someone-else/);
  await refused(client.useAgent(id, "painter@7"), 404, /painter@7/);

  assert.equal((await client.setBudget(id, { usd: 2.5, tokens: 9000 })).thread_id, id);
  await until("the budget on the record", async () => {
    const budget = (await client.getThread(id)).conversation_budget_set;
    return budget?.usd === 2.5 && budget.tokens === 9000;
  });
  await refused(client.setBudget(id, { usd: 0 }), 400, /zero/);
});

test("errors carry the status and the server's message", async () => {
  await refused(client.getThread(threadId("nobody")), 404, new RegExp(`^no thread ${threadId("nobody")}$`));
  await refused(client.sendMessage(threadId("blank"), "  "), 400, /is empty/);
  await refused(client.sendMessage("no spaces allowed", "hi"), 400, /\S/);
  const stream = client.streamEvents("no spaces allowed", { signal: streams.signal });
  await refused(
    (async () => {
      for await (const event of stream) assert.fail(`an event: ${JSON.stringify(event)}`);
    })(),
    400,
    /\S/,
  );
});

// Client tools and approvals.

/** The history's results of the tool's calls. */
async function results(id: string, tool = "pick_color"): Promise<{ call_id: string; text: string; is_error?: boolean }[]> {
  const { entries } = await client.getHistory(id);
  return entries.flatMap((e) => (e.item.type === "tool_result" && e.item.name === tool ? [e.item] : []));
}

/** The text of the thread's last entry, when it is the model's words. */
async function reply(id: string): Promise<string | undefined> {
  const item = (await client.getHistory(id)).entries.at(-1)?.item;
  return item?.type === "assistant" ? (item.text ?? undefined) : undefined;
}

/** The thread's (and its children's) client calls waiting for a result. */
async function owed(id: string): Promise<{ call_id: string; tool: string }[]> {
  return (await client.getWaiting(id)).threads.flatMap((t) => t.calls.filter((c) => c.client === true));
}

/** Runs `runTools` beside the test; `stop()` aborts it and gives what it resolved to. */
function runner(id: string, handlers: Record<string, ToolHandler>, options: { followChildren?: boolean } = {}) {
  const controller = new AbortController();
  streams.signal.addEventListener("abort", () => controller.abort(), { once: true });
  let ended = false;
  const done = client.runTools(id, handlers, { ...options, signal: controller.signal }).finally(() => (ended = true));
  return {
    done,
    ended: () => ended,
    stop: async (): Promise<ToolAnswer[]> => {
      controller.abort();
      return done;
    },
  };
}

test("a client tool's call is answered by runTools, and the model reads the result", async () => {
  const id = threadId("tools");
  const asked: [unknown, string][] = [];
  const tools = runner(id, {
    pick_color: (args: { for: string }, call) => {
      asked.push([args, call.call_id]);
      return "teal";
    },
  });
  await client.sendMessage(id, "color sky");
  await until("the reply", async () => (await reply(id)) === "colored teal");
  const [result, ...more] = await results(id);
  assert.deepEqual(more, []);
  assert.ok(result !== undefined);
  assert.equal(result.text, "teal");
  assert.notEqual(result.is_error, true);
  assert.deepEqual(asked, [[{ for: "sky" }, result.call_id]]);
  assert.deepEqual(await tools.stop(), [
    { threadId: id, callId: result.call_id, name: "pick_color", text: "teal", isError: false, accepted: true },
  ]);
  assert.deepEqual(await owed(id), []);
});

test("a handler that throws gives an error result", async () => {
  const id = threadId("tools-throw");
  const tools = runner(id, {
    pick_color: async () => {
      throw new RangeError("no colours left");
    },
  });
  await client.sendMessage(id, "color sky");
  const text = await until("the reply", () => reply(id));
  assert.equal(text, "colored RangeError: no colours left");
  const [result] = await results(id);
  assert.equal(result?.is_error, true);
  assert.equal(result?.text, "RangeError: no colours left");
  const [answer] = await tools.stop();
  assert.equal(answer?.isError, true);
  assert.equal(answer?.accepted, true);
});

test("a runner started later answers the calls still owed: the snapshot re-sends them", async () => {
  const id = threadId("tools-later");
  // The model calls the tool while no runner runs (the application is down)...
  await client.sendMessage(id, "color sea");
  const [call] = await until("the call to wait", async () => ((await owed(id)).length === 1 ? owed(id) : undefined));
  assert.equal(call?.tool, "pick_color");
  // ... and a stream attached without a position re-sends it, unnumbered, before `attached`.
  const { events } = follow(id);
  const resent = await events.waitFor("the call re-sent", is("client_tool_call"));
  await events.waitFor("attached", is("attached"));
  assert.equal(resent.call_id, call?.call_id);
  assert.deepEqual(resent.args, { for: "sea" });
  assert.equal(resent.seq, undefined);
  assert.match(resent.deadline ?? "", /^\d{4}-/);

  // A runner started afresh answers it.
  const tools = runner(id, { pick_color: (args: { for: string }) => `deep blue for the ${args.for}` });
  await until("the reply", async () => (await reply(id)) === "colored deep blue for the sea");
  assert.deepEqual((await results(id)).map((r) => r.call_id), [call?.call_id]);
  assert.deepEqual((await tools.stop()).map((a) => a.callId), [call?.call_id]);
});

test("two runners at once answer a call once, and neither fails", async () => {
  const id = threadId("tools-two");
  await client.sendMessage(id, "color sky");
  const [call] = await until("the call to wait", async () => ((await owed(id)).length === 1 ? owed(id) : undefined));
  const ran: string[] = [];
  const handler = (name: string) => () => {
    ran.push(name);
    return `${name}'s teal`;
  };
  const first = runner(id, { pick_color: handler("first") });
  const second = runner(id, { pick_color: handler("second") });
  const text = await until("the reply", () => reply(id));

  const found = await results(id);
  assert.equal(found.length, 1);
  assert.equal(found[0]?.call_id, call?.call_id);
  assert.ok(["first's teal", "second's teal"].includes(found[0]?.text ?? ""), found[0]?.text);
  assert.equal(text, `colored ${found[0]?.text}`);
  // Each ran the handler at most once (the second may have found the call answered already);
  // one of them got through. (A handler that ran as the runner stopped may have posted nothing.)
  const answers = [...(await first.stop()), ...(await second.stop())];
  assert.ok(answers.every((a) => a.callId === call?.call_id));
  assert.ok(ran.length === 1 || ran.length === 2, `ran ${ran.join(", ")}`);
  assert.equal(new Set(ran).size, ran.length, `ran ${ran.join(", ")}`);
  assert.ok(answers.length <= ran.length);
  assert.ok(answers.some((a) => a.accepted && a.text === found[0]?.text));
});

test("calls without a handler are left alone; a JSON result; a late answer is refused with 409", async () => {
  const id = threadId("tools-alone");
  const tools = runner(id, { pick_color: (args: { for: string }) => ({ color: "teal", for: args.for }) });
  await client.sendMessage(id, "both");
  const [picked] = await until("the pick_color result", async () => ((await results(id)).length ? results(id) : undefined));
  assert.equal(picked?.text, JSON.stringify({ color: "teal", for: "both" }));
  // The runner has no handler for `measure`: its call waits for another application.
  const [measure] = await until("only measure to wait", async () => ((await owed(id)).length === 1 ? owed(id) : undefined));
  assert.equal(measure?.tool, "measure");
  const accepted = await client.postToolResult(id, measure?.call_id ?? "", "3x4 m");
  assert.equal(accepted.thread_id, id);
  await until("the reply", async () => (await reply(id)) === "measured 3x4 m");
  assert.deepEqual((await results(id, "measure")).map((r) => r.text), ["3x4 m"]);
  assert.deepEqual((await tools.stop()).map((a) => a.name), ["pick_color"]);

  const late = picked?.call_id ?? "";
  await refused(client.postToolResult(id, late, "red", { isError: true }), 409, new RegExp(late));
  await refused(client.postToolResult(threadId("nobody"), late, "red"), 404, /no thread/);
  await refused(client.postToolResult(id, "not a call id", "red"), 400, /call id/);
});

test("runTools follows the threads spawned below, also those spawned while it did not run", async () => {
  const id = threadId("tools-children");
  const children = async (): Promise<string[]> => (await client.getTree(id)).slice(1).map((r) => r.id);
  const tools = runner(id, { pick_color: (args: { for: string }) => `teal for the ${args.for}` });
  await client.sendMessage(id, "spawn color");
  const [first] = await until("the child", async () => ((await children()).length === 1 ? children() : undefined));
  assert.ok(first !== undefined);
  await until("the child's reply", async () => (await reply(first)) === "colored teal for the kid");
  assert.deepEqual((await results(first)).map((r) => r.text), ["teal for the kid"]);
  assert.deepEqual((await tools.stop()).map((a) => [a.threadId, a.name]), [[first, "pick_color"]]);

  // A child whose call waits while no runner runs: found through the parent's record.
  await client.sendMessage(id, "spawn color");
  const [call] = await until("the second child's call", async () => ((await owed(id)).length === 1 ? owed(id) : undefined));
  const second = (await children()).find((c) => c !== first);
  assert.ok(second !== undefined);
  const later = runner(id, { pick_color: () => "teal again" });
  await until("the second child's reply", async () => (await reply(second)) === "colored teal again");
  assert.deepEqual((await later.stop()).map((a) => [a.threadId, a.callId]), [[second, call?.call_id]]);
});

test("runTools ends when its thread closes, and at once on a closed thread", async () => {
  const id = threadId("tools-closed");
  await started(id);
  const tools = runner(id, { pick_color: () => "teal" });
  await client.closeThread(id);
  await until("the runner to end", () => tools.ended());
  assert.deepEqual(await tools.done, []);
  const again = runner(id, { pick_color: () => "teal" });
  await until("the second runner to end", () => again.ended());
  assert.deepEqual(await again.done, []);
});

test("an approval: asked as a question, the call runs once approved, or not when declined", async () => {
  const id = threadId("approve");
  const { events } = follow(id, 0);
  await client.sendMessage(id, "retitle Sunflowers");
  const question = await events.waitFor("the approval question", is("choice_requested"));
  assert.deepEqual(question.choices, ["Run it", "Do not run it"]);
  assert.equal(question.default, 1);
  assert.match(question.prompt, /set_title/);
  const waiting = await until("the call to wait for approval", async () =>
    (await client.getWaiting(id)).threads.flatMap((t) => t.calls.filter((c) => c.approval === true)).at(0),
  );
  assert.equal(waiting.call_id, question.call_id);
  assert.equal(waiting.tool, "set_title");

  assert.deepEqual(await client.answerChoice(id, question.call_id, { selected: 0 }), {
    call_id: question.call_id,
    selected: 0,
    choice: "Run it",
  });
  const answered = await events.waitFor("the answer", is("choice_answered"));
  assert.deepEqual([answered.call_id, answered.selected, answered.choice, answered.by_deadline], [question.call_id, 0, "Run it", undefined]);
  await events.waitFor("the reply", is("assistant_text", (e) => e.text === `titled: Title set to "Sunflowers".`));
  assert.equal((await client.getThread(id)).title, "Sunflowers");

  // Dismissed, the question answers its default: the call does not run.
  const from = events.events.length;
  await client.sendMessage(id, "retitle Weeds");
  const again = await events.waitFor("the second question", is("choice_requested"), from);
  await client.answerChoice(id, again.call_id, { dismiss: true });
  const declined = await events.waitFor("the decline", is("choice_answered", (e) => e.call_id === again.call_id));
  assert.deepEqual([declined.selected, declined.choice], [1, "Do not run it"]);
  const result = await events.waitFor("the result", is("tool_result", (e) => e.call_id === again.call_id));
  assert.equal(result.is_error, true);
  await events.waitFor("the reply", is("assistant_text", (e) => e.text.startsWith("titled: Not run")), from);
  assert.equal((await client.getThread(id)).title, "Sunflowers");
});

test("runTools rejects with what it cannot go past: a refused stream", async () => {
  await refused(client.runTools("no spaces allowed", { pick_color: () => "teal" }, { signal: streams.signal }), 400, /\S/);
});

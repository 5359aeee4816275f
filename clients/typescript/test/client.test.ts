/**
 * The client against a real `infinity serve` (checking itself against the OpenAPI document), an
 * agent on the scripted model, and a tiny RAP tool server that asks questions and hangs.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { InfinityClient, InfinityError, type EventStream, type ThreadSummary } from "../src/index.js";
import { Collector, document, is } from "./support/contract.js";
import { startProxy } from "./support/proxy.js";
import { INFINITY_BIN, OPENAPI_DOCUMENT, startServer, until, type Served } from "./support/server.js";
import { startToolServer, type ToolServer } from "./support/toolServer.js";

/** The painter: picks a colour by asking (`pick`), hangs on request, and answers the rest. */
const SCRIPT = String.raw`rules:
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

let server: Served;
let tools: ToolServer;
let client: InfinityClient;
/** Stops every stream a test opened, when the tests end. */
const streams = new AbortController();

/** Thread ids unique to this run, so that nothing depends on what else the server holds. */
const run = Math.random().toString(36).slice(2, 8);
const threadId = (name: string): string => `${name}-${run}`;

before(async () => {
  tools = await startToolServer();
  server = await startServer({ name: "painter", script: SCRIPT, toolServers: [tools.url] });
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
  assert.equal(history.lastEventId, stream.lastEventId);
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
  assert.equal(later.stream.lastEventId, 4);

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
  await refused(client.answerChoice(id, call, { selected: 0 }), 404, /no open question/);
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
    assert.equal(stream.lastEventId, 2);

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
      streamRequests.slice(1).some((r) => /^last-event-id: 2$/im.test(r)),
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
  await refused(client.useAgent(id, "someone-else"), 400, /someone-else/);
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

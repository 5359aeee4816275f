/**
 * The SSE parser, and the event stream against a stand-in server: what `infinity serve` never
 * does but a stack's API function does (ending each stream with `reconnect`), and what the
 * client sends (the token, `Last-Event-ID`).
 */
import assert from "node:assert/strict";
import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import { test } from "node:test";

import { InfinityClient, InfinityError, SseParser, type StreamEvent } from "../src/index.js";
import { assertStreamData } from "./support/contract.js";

test("the parser splits messages on any line ending, even across pieces", () => {
  const parser = new SseParser();
  const text = "\uFEFF: keep-alive\r\nevent: a\r\nid: 1\r\ndata: {\"x\":\r\ndata: 1}\r\n\r\nevent: b\nretry: 250\ndata:two\n\nid\ndata: three\r\r\n";
  const messages = [];
  // Every split, one character at a time, gives the same messages as the whole.
  for (const piece of text) messages.push(...parser.push(piece));
  assert.deepEqual(messages, [
    { event: "a", id: "1", data: '{"x":\n1}', retry: undefined },
    { event: "b", id: undefined, data: "two", retry: 250 },
    { event: "message", id: "", data: "three", retry: undefined },
  ]);
  assert.deepEqual(new SseParser().push(text), messages);
  assert.deepEqual(new SseParser().push("data: unfinished"), [], "a message needs its blank line");
  assert.deepEqual(new SseParser().push("id: 7\n\n"), [{ event: "message", id: "7", data: undefined, retry: undefined }]);
});

/** A stand-in of the stack's API function: each request gets what follows its position, then `reconnect`. */
async function stackStandIn(events: StreamEvent[]): Promise<{ url: string; requests: IncomingHttpHeaders[]; stop(): Promise<void> }> {
  const requests: IncomingHttpHeaders[] = [];
  const server = createServer((request, response: ServerResponse) => {
    requests.push(request.headers);
    if (request.headers.authorization !== "Bearer s3cret") {
      response.writeHead(401, { "Content-Type": "application/json" }).end('{"error":"no token, or a wrong one"}');
      return;
    }
    if (request.url === "/models") {
      response.writeHead(200, { "Content-Type": "application/json" }).end('{"allowed":[],"set_in":"here"}');
      return;
    }
    const after = Number(request.headers["last-event-id"] ?? 0);
    response.writeHead(200, { "Content-Type": "text/event-stream" });
    // One event per request, as a slow host would have it.
    const next = events.find((e) => "seq" in e && typeof e.seq === "number" && e.seq > after);
    if (next !== undefined && "seq" in next) response.write(`event: ${next.type}\ndata: ${JSON.stringify(next)}\nid: ${next.seq}\n\n`);
    response.end(`event: reconnect\ndata: {"type":"reconnect","after_ms":30}\nretry: 30\n\n`);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no address");
  return {
    url: `http://127.0.0.1:${address.port}`,
    requests,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

test("a stream ended with `reconnect` comes back after `after_ms`, resuming after its last event", async () => {
  const at = new Date().toISOString();
  const thread = { thread_id: "t1", at };
  const events: StreamEvent[] = [
    { ...thread, seq: 1, type: "user_message", text: "hi" },
    { ...thread, seq: 2, type: "assistant_text", text: "hello" },
    { ...thread, seq: 3, type: "thread_closed" },
  ];
  events.forEach(assertStreamData);
  const stack = await stackStandIn(events);
  try {
    const client = new InfinityClient({ baseUrl: `${stack.url}/`, token: "s3cret" });
    assert.deepEqual(await client.listModels(), { allowed: [], set_in: "here" }, "requests carry the token");
    const controller = new AbortController();
    const stream = client.streamEvents("t1", { signal: controller.signal });
    const seen: StreamEvent[] = [];
    const started = Date.now();
    for await (const event of stream) {
      seen.push(event);
      if (seen.length === 3) break;
    }
    assert.deepEqual(seen, events, "each event once, and no `reconnect` notice");
    assert.ok(Date.now() - started >= 60, "it waited after_ms before each reconnection");
    assert.equal(stream.lastEventId, 3);
    const streamRequests = stack.requests.slice(1);
    assert.deepEqual(
      streamRequests.map((h) => h["last-event-id"]),
      [undefined, "1", "2"],
    );
    assert.ok(streamRequests.every((h) => h.authorization === "Bearer s3cret" && h.accept === "text/event-stream"));

    // Iterating the same stream again resumes where the last loop stopped; the signal ends it.
    setTimeout(() => controller.abort(), 100);
    for await (const event of stream) assert.fail(`nothing is after 3: ${JSON.stringify(event)}`);
    const later = stack.requests.slice(4);
    assert.ok(later.length > 0 && later.every((h) => h["last-event-id"] === "3"), JSON.stringify(later));
  } finally {
    await stack.stop();
  }
});

test("a refused stream throws InfinityError with the server's message", async () => {
  const stack = await stackStandIn([]);
  try {
    const client = new InfinityClient({ baseUrl: stack.url, token: "wrong" });
    await assert.rejects(
      (async () => {
        for await (const _ of client.streamEvents("t1")) assert.fail("no event");
      })(),
      (error: unknown) => error instanceof InfinityError && error.status === 401 && error.message === "no token, or a wrong one",
    );
    await assert.rejects(client.listModels(), { name: "InfinityError", status: 401, message: "no token, or a wrong one" });
  } finally {
    await stack.stop();
  }
});

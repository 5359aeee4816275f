/**
 * A parser of Server-Sent Events as the HTML standard defines them
 * (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation),
 * for reading an event stream over `fetch`, which unlike `EventSource` can send headers
 * (`Authorization`, `Last-Event-ID`) and be driven by an `AbortSignal`.
 */

/** One event of the stream: what a block of fields up to a blank line said. */
export interface SseMessage {
  /** The `event:` field (`message` when the block had none). */
  event: string;
  /** The `data:` lines joined with `\n`; `undefined` when the block had no `data:` field. */
  data: string | undefined;
  /** The `id:` field, when the block had one (an empty one resets the last event id). */
  id: string | undefined;
  /** The `retry:` field: how long to wait before reconnecting, in milliseconds. */
  retry: number | undefined;
}

/**
 * Turns the text of a stream, given in pieces of any size, into its messages. Lines end with
 * CRLF, LF or CR, a CRLF may be split between two pieces, and a stream may start with a BOM.
 */
export class SseParser {
  #buffer = "";
  #started = false;
  #event: string | undefined;
  #data: string[] | undefined;
  #id: string | undefined;
  #retry: number | undefined;

  /** The messages completed by `text`, the next piece of the stream. */
  push(text: string): SseMessage[] {
    let buffer = this.#buffer + text;
    if (!this.#started && buffer.length > 0) {
      this.#started = true;
      if (buffer.startsWith("\uFEFF")) buffer = buffer.slice(1);
    }
    const messages: SseMessage[] = [];
    const ends = /\r\n|\r|\n/g;
    let start = 0;
    for (let match = ends.exec(buffer); match !== null; match = ends.exec(buffer)) {
      // A CR at the very end may be the first half of a CRLF: wait for the next piece.
      if (match[0] === "\r" && match.index === buffer.length - 1) break;
      const message = this.#line(buffer.slice(start, match.index));
      if (message !== undefined) messages.push(message);
      start = match.index + match[0].length;
    }
    this.#buffer = buffer.slice(start);
    return messages;
  }

  /** Reads one line; a blank line completes the message of the lines before it. */
  #line(line: string): SseMessage | undefined {
    if (line === "") return this.#dispatch();
    if (line.startsWith(":")) return undefined; // a comment (the server's keep-alive)
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    switch (field) {
      case "event":
        this.#event = value;
        break;
      case "data":
        (this.#data ??= []).push(value);
        break;
      case "id":
        if (!value.includes("\0")) this.#id = value;
        break;
      case "retry":
        if (/^\d+$/.test(value)) this.#retry = Number(value);
        break;
      default:
        break; // unknown fields are ignored
    }
    return undefined;
  }

  #dispatch(): SseMessage | undefined {
    const message: SseMessage = {
      event: this.#event === undefined || this.#event === "" ? "message" : this.#event,
      data: this.#data?.join("\n"),
      id: this.#id,
      retry: this.#retry,
    };
    this.#event = this.#data = this.#id = this.#retry = undefined;
    const empty = message.data === undefined && message.id === undefined && message.retry === undefined;
    return empty ? undefined : message;
  }
}

/** The messages of an event stream's body, as they arrive. Cancels the body when left early. */
export async function* readSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseMessage> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const parser = new SseParser();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return; // an unfinished last message is dropped, as the standard says
      yield* parser.push(decoder.decode(value, { stream: true }));
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

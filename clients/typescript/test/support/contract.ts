/**
 * The part of the contract the server cannot check for itself: the events of a stream. The
 * server checks every JSON request and answer (`INFINITY_CHECK_API=1`); the document leaves each
 * event's `data` to the clients (`x-event-schema` of `GET /threads/{id}/events`), so the tests
 * validate every event they receive against it, as JSON Schema 2020-12.
 */
import { readFileSync } from "node:fs";

import { Ajv2020 } from "ajv/dist/2020.js";

import type { EventStream, StreamEvent } from "../../src/index.js";
import { OPENAPI_DOCUMENT, until } from "./server.js";

type Json = Record<string, unknown>;

/** The document, as `npm run generate` read it. */
export const document = JSON.parse(readFileSync(OPENAPI_DOCUMENT, "utf8")) as Json;

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

function validator(schema: Json): (value: unknown) => string | undefined {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  ajv.addFormat("date-time", (text: string) => RFC3339.test(text) && !Number.isNaN(Date.parse(text)));
  const ranges: Record<string, [number, number]> = {
    uint: [0, Number.MAX_SAFE_INTEGER],
    uint16: [0, 65535],
    uint32: [0, 4294967295],
    uint64: [0, Number.MAX_SAFE_INTEGER],
    int32: [-2147483648, 2147483647],
  };
  for (const [format, [min, max]] of Object.entries(ranges)) {
    ajv.addFormat(format, { type: "number", validate: (n: number) => Number.isInteger(n) && n >= min && n <= max });
  }
  const components = (document.components ?? {}) as Json;
  const validate = ajv.compile({ ...schema, components });
  return (value) => (validate(value) ? undefined : ajv.errorsText(validate.errors));
}

const paths = document.paths as Record<string, Record<string, Json>>;
const stream = paths["/threads/{id}/events"]?.get as Json;
const eventSchema = ((stream.responses as Json)["200"] as Json).content as Record<string, Json>;
const checkEvent = validator(eventSchema["text/event-stream"]?.["x-event-schema"] as Json);

/** Throws naming the difference when `event` is not what the document says a stream sends. */
export function assertStreamData(event: unknown): void {
  const problem = checkEvent(event);
  if (problem !== undefined) throw new Error(`an event breaks x-event-schema: ${problem}\n${JSON.stringify(event)}`);
}

/**
 * Reads an event stream in the background, checking each event against the document, so that a
 * test can wait for what it expects (`waitFor`) while the stream goes on.
 */
export class Collector {
  readonly events: StreamEvent[] = [];
  #failure: unknown;
  readonly done: Promise<void>;

  constructor(stream: EventStream) {
    this.done = (async () => {
      try {
        for await (const event of stream) {
          assertStreamData(event);
          this.events.push(event);
        }
      } catch (error) {
        this.#failure = error;
      }
    })();
  }

  /** The first event (after `from`) that `match` picks, once it has arrived. */
  async waitFor<E extends StreamEvent>(what: string, match: (event: StreamEvent) => event is E, from?: number): Promise<E>;
  async waitFor(what: string, match: (event: StreamEvent) => boolean, from?: number): Promise<StreamEvent>;
  async waitFor(what: string, match: (event: StreamEvent) => boolean, from = 0): Promise<StreamEvent> {
    try {
      return await until(what, () => {
        if (this.#failure !== undefined) throw this.#failure;
        return this.events.slice(from).find(match);
      });
    } catch (error) {
      const seen = this.events.map((e) => ("seq" in e && e.seq != null ? `${e.type}#${e.seq}` : e.type));
      throw new Error(`${String(error)}\nevents so far: ${seen.join(", ")}`);
    }
  }

  /** The numbers (`seq`) of the thread's numbered events received, in order. */
  get numbers(): number[] {
    return this.events.flatMap((e) => ("seq" in e && typeof e.seq === "number" ? [e.seq] : []));
  }
}

/** A type guard for an event of one `type`, e.g. `is("assistant_text")`. */
export function is<T extends StreamEvent["type"]>(type: T, where: (event: Extract<StreamEvent, { type: T }>) => boolean = () => true) {
  return (event: StreamEvent): event is Extract<StreamEvent, { type: T }> =>
    event.type === type && where(event as Extract<StreamEvent, { type: T }>);
}

// What a thread is doing, in words, from its record.

import { parseTime } from "./dom.js";

/** The tools whose calls are sleeps. */
export const SLEEP_TOOLS = new Set(["sleep", "sleep_until", "sleep_until_event_or_input"]);

/** The name the runtime gives calls that carry injected events (late results, reports). */
export const INJECTED_TOOL = "receive_event__injected";

function clock(at) {
  const date = parseTime(at);
  return date ? date.toLocaleTimeString() : "later";
}

/**
 * The thread's state as `{state, text}`: `state` is one of `closed`, `suspended`, `running`,
 * `waiting`, `sleeping`, `idle` (for styling), `text` says it to a person. `running` comes from
 * the caller (the page sees the model at work in the event stream; the record does not say).
 */
export function describeStatus(record, running = false) {
  if (!record) return running ? { state: "running", text: "running" } : { state: "new", text: "new" };
  if (record.status === "closed") return { state: "closed", text: "closed" };
  if (record.suspended) return { state: "suspended", text: "paused: hourly limit reached" };
  if (running) return { state: "running", text: "running" };
  const pending = record.pending_calls || [];
  const dispatched = pending.filter((call) => call.kind === "dispatched");
  if (dispatched.length > 0) {
    const names = [...new Set(dispatched.map((call) => call.tool))].join(", ");
    return { state: "waiting", text: `waiting on ${names}` };
  }
  const sleeps = pending.filter((call) => call.kind === "passive");
  if (sleeps.length > 0) {
    const due = sleeps
      .map((call) => call.due)
      .filter(Boolean)
      .sort()[0];
    return {
      state: "sleeping",
      text: due ? `sleeping until ${clock(due)}` : "sleeping until an event or a message",
    };
  }
  const open = (record.children || []).filter((child) => !child.closed).length;
  if (open > 0) {
    return { state: "waiting", text: `waiting on ${open} child thread${open === 1 ? "" : "s"}` };
  }
  if ((record.open_choices || []).length > 0) {
    return { state: "waiting", text: "waiting for your answer" };
  }
  return { state: "idle", text: "idle" };
}

/** The name to show for a thread: its title, or its id. */
export function threadName(record, id) {
  return (record && record.title) || id || (record && record.id) || "";
}

// What a thread is doing, in words, from its record.
//
// The CLI says the same from the same record (`src/status.rs`, `describe`): the two must agree,
// word for word and rule for rule, so change both together.

import { parseTime } from "./dom.js";

/** The tools whose calls are sleeps. */
export const SLEEP_TOOLS = new Set(["sleep", "sleep_until", "sleep_until_event_or_input"]);

/** The name the runtime gives calls that carry injected events (late results, reports). */
export const INJECTED_TOOL = "receive_event__injected";

/**
 * A timestamp from the API as the CLI and the model see it: rounded to the second, in UTC
 * (`2026-05-01 21:07:09 UTC`), or "" when it is not one.
 */
export function showTime(at) {
  const date = parseTime(at);
  if (!date) return "";
  // Half a second or more rounds up, as the runtime rounds (`history::person_time`).
  const iso = new Date(Math.round(date.getTime() / 1000) * 1000).toISOString();
  return `${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC`;
}

/**
 * The thread's state as `{state, text}`: `state` is one of `new`, `moving`, `moved`, `closed`,
 * `suspended`, `running`, `waiting`, `sleeping`, `idle` (for styling), `text` says it to a
 * person. `running` comes from the caller (the page sees the model at work in the event stream;
 * the record does not say). Calls the conversation moved on from (they have a stand-in result,
 * their real one comes as an event) are not waited on.
 */
export function describeStatus(record, running = false) {
  if (!record) return running ? { state: "running", text: "running" } : { state: "new", text: "new" };
  const migration = record.migration;
  if (migration) {
    return migration.state === "moved"
      ? { state: "moved", text: `moved to ${migration.to}` }
      : { state: "moving", text: `moving to ${migration.to}` };
  }
  if (record.status === "closed") return { state: "closed", text: "closed" };
  if (record.suspended && record.suspended.budget) {
    return { state: "suspended", text: "stopped: budget reached" };
  }
  if (record.suspended) return { state: "suspended", text: "paused: hourly limit reached" };
  if (running) return { state: "running", text: "running" };
  const waitedOn = (record.pending_calls || []).filter((call) => !call.moved_on);
  const asking = waitedOn.filter((call) => call.kind === "dispatched" && call.approval);
  if (asking.length > 0) {
    const names = [...new Set(asking.map((call) => call.tool))].join(", ");
    return { state: "waiting", text: `waiting for your approval of ${names}` };
  }
  const dispatched = waitedOn.filter((call) => call.kind === "dispatched" && !call.approval);
  if (dispatched.length > 0) {
    const names = [...new Set(dispatched.map((call) => call.tool))].join(", ");
    return { state: "waiting", text: `waiting on ${names}` };
  }
  const sleeps = waitedOn.filter((call) => call.kind === "passive");
  if (sleeps.length > 0) {
    const dues = sleeps.map((call) => parseTime(call.due)).filter(Boolean);
    if (dues.length === 0) return { state: "sleeping", text: "sleeping until an event or a message" };
    const soonest = new Date(Math.min(...dues.map((due) => due.getTime())));
    return { state: "sleeping", text: `sleeping until ${showTime(soonest.toISOString())}` };
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

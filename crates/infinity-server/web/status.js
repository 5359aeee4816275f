// What a thread is doing, in words, from its record.
//
// The words are the runtime's: the server sends them as `status-words.js`, made from the core's
// `state::Phrase`, so the page and the CLI say the same. The rules that choose one follow the
// core's `Activity::of`, for a record the page keeps up to date: change them in both.

import { parseTime } from "./dom.js";
import { PHRASES } from "./status-words.js";

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
 * `phrase` (one of `PHRASES`) as `{state, text}`, with `values` put in for its `{name}`s, as the
 * core's `Phrase::say` does.
 */
export function say(phrase, values = {}) {
  const text = phrase.text.replace(/\{(\w+)\}/g, (whole, name) =>
    Object.hasOwn(values, name) ? String(values[name]) : whole,
  );
  return { state: phrase.state, text };
}

/**
 * The thread's state as `{state, text}`: `state` is one of `new`, `moving`, `moved`, `closed`,
 * `suspended`, `running`, `waiting`, `sleeping`, `idle` (for styling), `text` says it to a
 * person. `running` comes from the caller (the page sees the model at work in the event stream;
 * the record does not say). Calls the conversation moved on from (they have a stand-in result,
 * their real one comes as an event) are not waited on.
 */
export function describeStatus(record, running = false) {
  if (!record) return say(running ? PHRASES.running : PHRASES.new);
  const migration = record.migration;
  if (migration) {
    const host = { host: migration.to };
    return say(migration.state === "moved" ? PHRASES.moved : PHRASES.moving, host);
  }
  if (record.status === "closed") return say(PHRASES.closed);
  if (record.suspended && record.suspended.budget) return say(PHRASES.budget_reached);
  if (record.suspended) return say(PHRASES.hourly_limit);
  if (running) return say(PHRASES.running);
  const waitedOn = (record.pending_calls || []).filter((call) => !call.moved_on);
  const asking = waitedOn.filter((call) => call.kind === "dispatched" && call.approval);
  if (asking.length > 0) {
    const names = [...new Set(asking.map((call) => call.tool))].join(", ");
    return say(PHRASES.approval, { tools: names });
  }
  const dispatched = waitedOn.filter((call) => call.kind === "dispatched" && !call.approval);
  if (dispatched.length > 0) {
    const names = [...new Set(dispatched.map((call) => call.tool))].join(", ");
    return say(PHRASES.tools, { tools: names });
  }
  const sleeps = waitedOn.filter((call) => call.kind === "passive");
  if (sleeps.length > 0) {
    const dues = sleeps.map((call) => parseTime(call.due)).filter(Boolean);
    if (dues.length === 0) return say(PHRASES.sleeping);
    const soonest = new Date(Math.min(...dues.map((due) => due.getTime())));
    return say(PHRASES.sleeping_until, { time: showTime(soonest.toISOString()) });
  }
  const open = (record.children || []).filter((child) => !child.closed).length;
  if (open === 1) return say(PHRASES.one_child);
  if (open > 1) return say(PHRASES.children, { count: open });
  if ((record.open_choices || []).length > 0) return say(PHRASES.answer);
  return say(PHRASES.idle);
}

/** The name to show for a thread: its title, or its id. */
export function threadName(record, id) {
  return (record && record.title) || id || (record && record.id) || "";
}

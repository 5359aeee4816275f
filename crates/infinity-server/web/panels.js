// The panels around a conversation: its thread tree, open questions, views, plan and result.

import { h, replace, visible } from "./dom.js";
import { describeStatus, showTime, threadName } from "./status.js";
import { renderDiff } from "./transcript.js";

/** The child thread a tool result reports from, and the report: `{childId, report}` or null. */
export function childReport(text) {
  const match = /^(?:Final report|Report) from child thread ([^\s:]+)(?: \(the child has shut down\))?: ([\s\S]*)$/.exec(
    text || "",
  );
  return match ? { childId: match[1], report: match[2] } : null;
}

/**
 * The conversation rooted at `rootId` as a nested list in `list`: each thread links to its
 * view, with its status and its latest report (`reports`, by child id). `records` maps ids to
 * records; `running(id)` says whether the page sees a thread at work; `waiting` (ids to
 * `GET /threads/{id}/waiting` entries, when known) marks the stuck ones.
 */
export function renderTree(list, records, rootId, currentId, reports, running, waiting) {
  const seen = new Set();
  const node = (id) => {
    if (seen.has(id)) return null;
    seen.add(id);
    const record = records.get(id);
    const status = describeStatus(record, running(id));
    const children = record ? (record.children || []).map((child) => child.thread_id) : [];
    const report = reports.get(id);
    const stuck = waiting && waiting.get(id) && waiting.get(id).stuck;
    return h(
      "li",
      { class: "tree-node", "data-thread": id },
      h(
        "a",
        {
          href: `#/thread/${encodeURIComponent(id)}`,
          "aria-current": id === currentId ? "page" : null,
          "data-key": id,
        },
        threadName(record, id),
      ),
      " ",
      h("span", { class: `status status-${status.state}` }, status.text),
      stuck ? [" ", h("span", { class: "badge tone-danger", title: stuck }, "stuck")] : null,
      report ? h("p", { class: "report", title: report }, report) : null,
      children.length ? h("ul", {}, children.map(node)) : null,
    );
  };
  replace(list, node(rootId));
}

/**
 * What would wake a thread (its entry of `GET /threads/{id}/waiting`), one line each, in the
 * words of `infinity status`; a stuck thread says so first.
 */
export function renderWaiting(container, waits) {
  const lines = [];
  for (const timer of waits.timers) {
    const how = timer.moved_on ? ", the conversation went on without it" : "";
    lines.push(`timer: ${timer.tool} fires ${showTime(timer.due)}${how}`);
  }
  for (const call of waits.calls) {
    const how = call.approval
      ? ", waiting for a person's approval to run"
      : call.authorizing
        ? ", waiting for a person to authorize it"
        : call.moved_on
          ? ", the conversation went on without it"
          : call.client
            ? ", waiting for the application that runs it"
            : "";
    lines.push(`call: ${call.tool} since ${showTime(call.since)}${how}`);
  }
  for (const subscription of waits.subscriptions) lines.push(`events from ${subscription.tool}`);
  for (const question of waits.questions) lines.push(`a person's answer: ${question.prompt}`);
  for (const child of waits.children) lines.push(`child ${child} still running`);
  for (const schedule of waits.schedules) lines.push(`schedule ${schedule}`);
  if (waits.paused) {
    const resume = waits.budget ? "raising the budget goes on" : "a person's message goes on";
    lines.push(`paused: ${waits.paused}; ${resume}`);
  }
  if (waits.outbox) lines.push(`${waits.outbox} effect(s) still to perform`);
  if (waits.queued) lines.push(`${waits.queued} message(s) queued until the turn ends`);
  replace(
    container,
    waits.stuck ? h("p", { class: "stuck", role: "alert" }, `Stuck: ${waits.stuck}`) : null,
    waits.closed
      ? h("p", { class: "muted" }, "Nothing: it is closed.")
      : lines.length
        ? h("ul", { class: "waits" }, lines.map((line) => h("li", {}, visible(line))))
        : h("p", { class: "muted" }, "Nothing but a message."),
  );
}

/** An amount of dollars as the CLI shows it (`Usd`'s Display): `$12.35`, `$0.0123`, `<$0.0001`. */
export function showUsd(dollars) {
  const value = Number(dollars) || 0;
  if (value >= 1) return `$${value.toFixed(2)}`;
  if (value === 0 || value >= 0.0001) return `$${value.toFixed(4)}`;
  return "<$0.0001";
}

/** What a usage (a record's `usage` or `conversation_usage`) cost, in the CLI's words. */
export function costText(usage) {
  const completions = usage.completions || 0;
  const unpriced = usage.unpriced || 0;
  if (unpriced === 0) return showUsd(usage.cost);
  if (unpriced >= completions) return "unpriced";
  return `${showUsd(usage.cost)} + ${unpriced} unpriced completion(s)`;
}

/** Every token of a usage: input, cache reads and writes, output. */
function tokensOf(usage) {
  return (
    (usage.input_tokens || 0) +
    (usage.cache_read_tokens || 0) +
    (usage.cache_write_tokens || 0) +
    (usage.output_tokens || 0)
  );
}

/** `3 completions, 1234 tokens, $0.0123`, as `infinity threads` says it. */
export function spentText(usage) {
  return `${usage.completions || 0} completions, ${tokensOf(usage)} tokens, ${costText(usage)}`;
}

/**
 * The cost panel: what the thread spent and, from its conversation's root record, what all the
 * conversation's threads spent against its budget. Returns true when the budget stops it.
 */
export function renderCost(container, record, root) {
  const rows = [h("p", {}, `This thread: ${spentText(record.usage || {})}`)];
  if (root) {
    const budget = root.conversation_budget || {};
    const limits = [];
    if (budget.usd !== undefined) limits.push(showUsd(budget.usd));
    if (budget.tokens !== undefined) limits.push(`${budget.tokens} tokens`);
    rows.push(h("p", {}, `Conversation: ${spentText(root.conversation_usage || {})}`));
    rows.push(
      h("p", { class: "muted" }, limits.length ? `Budget: ${limits.join(" and ")}` : "No budget"),
    );
  }
  const stopped = Boolean(record.suspended && record.suspended.budget);
  if (stopped) rows.push(h("p", { class: "stuck", role: "alert" }, visible(record.suspended.reason)));
  replace(container, ...rows);
  return stopped;
}

/** A plan's steps (`[{text, status}]`) as a checklist. */
export function renderPlan(list, steps) {
  const marks = { pending: "○", in_progress: "◐", completed: "✓", failed: "✗" };
  const words = { pending: "to do", in_progress: "in progress", completed: "done", failed: "failed" };
  replace(
    list,
    steps.map((step) =>
      h(
        "li",
        { class: `step step-${step.status}` },
        h("span", { class: "mark", "aria-hidden": "true" }, marks[step.status] || "○"),
        " ",
        step.text,
        h("span", { class: "visually-hidden" }, ` (${words[step.status] || step.status})`),
      ),
    ),
  );
}

/** The steps of a `plan_updated` event's checklist (`[ ] 1. text`, `[/]`, `[x]`, `[!]`). */
export function parseChecklist(checklist) {
  const statuses = { " ": "pending", "/": "in_progress", x: "completed", "!": "failed" };
  return String(checklist || "")
    .split("\n")
    .map((line) => /^\[( |\/|x|!)\] \d+\. (.*)$/.exec(line))
    .filter(Boolean)
    .map((match) => ({ status: statuses[match[1]], text: match[2] }));
}

/** A JSON value as a structure: objects as term lists, arrays as lists, the rest as text. */
export function renderValue(value) {
  if (Array.isArray(value)) {
    return h("ol", { class: "value-list" }, value.map((item) => h("li", {}, renderValue(item))));
  }
  if (value && typeof value === "object") {
    return h(
      "dl",
      { class: "value-map" },
      Object.entries(value).map(([key, item]) => [h("dt", {}, key), h("dd", {}, renderValue(item))]),
    );
  }
  return h("span", { class: "value" }, value === null ? "null" : String(value));
}

/** A thread's `finish` output (`{status, result}`). */
export function renderOutput(container, output) {
  replace(
    container,
    h("p", {}, h("span", { class: `badge tone-${output.status === "succeeded" ? "success" : "danger"}` }, output.status)),
    renderValue(output.result),
  );
}

/** The thread's views (`view_update`), by type: a diff as a diff, anything else as data. */
export function renderViews(container, views) {
  replace(
    container,
    [...views.entries()].map(([type, content]) =>
      h(
        "section",
        { class: "view", "data-view": type },
        h("h3", {}, type),
        typeof content.patch === "string" ? renderDiff(content.path, content.patch) : renderValue(content),
      ),
    ),
  );
}

/**
 * The open questions (`[{call_id, prompt, choices, default}]`), each choice a button;
 * `onAnswer(question, index)` and `onDismiss(question)` send the answer.
 */
export function renderQuestions(container, questions, onAnswer, onDismiss) {
  replace(
    container,
    questions.map((question, n) => {
      const label = `question-${n}`;
      return h(
        "section",
        { class: "question", role: "group", "aria-labelledby": label, "data-call": question.call_id },
        // Kept as written, line by line (a command under its description), hidden characters shown.
        h("p", { id: label, class: "prompt" }, visible(question.prompt)),
        h(
          "div",
          { class: "choices" },
          question.choices.map((choice, index) =>
            h(
              "button",
              {
                type: "button",
                class: "choice",
                "data-key": `${question.call_id}/${index}`,
                onclick: () => onAnswer(question, index),
              },
              choice,
            ),
          ),
          h(
            "button",
            {
              type: "button",
              class: "secondary",
              "data-key": `${question.call_id}/dismiss`,
              title: `Dismissing answers “${question.choices[question.default] ?? ""}”`,
              onclick: () => onDismiss(question),
            },
            "Dismiss",
          ),
        ),
      );
    }),
  );
}

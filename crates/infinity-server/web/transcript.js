// A thread's conversation: its history, then its live events.
//
// The event stream carries no event ids, and after a reconnect it starts again with the live
// events only. So the page rebuilds the transcript from the history on every (re)connect and
// drops a live event when the entry it shows is already there. Each entry has a key both ways
// can compute: a message or text by its time and text (an event carries the same time as the
// entry it comes from), a tool call or result by its call id.

import { h, parseTime, pretty, preview, timeElement } from "./dom.js";
import { INJECTED_TOOL, SLEEP_TOOLS, showTime } from "./status.js";
import { renderWidget } from "./widget.js";

// The runtime's texts (`crates/infinity-agent-core/src/history.rs`), word for word.

/** The notice an interruption leaves. */
const INTERRUPTED_NOTICE = "Interrupted by the user.";
/** The notice an interruption leaves when nothing was in flight: shown as it is. */
const INTERRUPTED_IDLE_NOTICE =
  "Nothing to interrupt: the user interrupted while no call, question or child thread was in flight.";
/** How the stand-in result of a sleep that new input cut short begins. */
const SLEEP_INTERRUPTED_PREFIX = "Sleep interrupted:";
/** How the stand-in result of a call still running at new input begins. */
const STILL_RUNNING_PREFIX = "Still running:";
/** The same, for a call whose tool waits for the user to authorize it. */
const STILL_WAITING_PREFIX = "Still waiting:";

// What one `POST /markdown` takes (`crates/infinity-server/src/markdown.rs`): at most 500
// texts of at most 100,000 characters each, in a body of at most 1 MiB. A batch is kept well
// under the body's bound (a character may take several bytes).

/** The longest text the server renders (JavaScript counts UTF-16 units; never more). */
const MARKDOWN_TEXT_CHARS = 100_000;
/** The most texts in one request. */
const MARKDOWN_BATCH_TEXTS = 500;
/** The most characters in one request, all texts together. */
const MARKDOWN_BATCH_CHARS = 250_000;

/** `items` (`{text}`) in batches of at most the texts and characters one request takes. */
function markdownBatches(items) {
  const batches = [];
  let batch = [];
  let chars = 0;
  for (const item of items) {
    const full =
      batch.length === MARKDOWN_BATCH_TEXTS || chars + item.text.length > MARKDOWN_BATCH_CHARS;
    if (batch.length && full) {
      batches.push(batch);
      batch = [];
      chars = 0;
    }
    batch.push(item);
    chars += item.text.length;
  }
  if (batch.length) batches.push(batch);
  return batches;
}

export class Transcript {
  /**
   * `list` is the `<ol>` to fill; `onWidgetAction(action, values)` sends a widget's button
   * press and returns a promise; `renderMarkdown(texts)` resolves to each text as safe HTML.
   */
  constructor(list, onWidgetAction, renderMarkdown) {
    this.list = list;
    this.onWidgetAction = onWidgetAction;
    this.renderMarkdown = renderMarkdown;
    this.unrendered = [];
    this.reset();
  }

  /**
   * Shows the agent's `text` in `element` as plain text at once, and as Markdown once the
   * server has rendered it (texts shown together are rendered in as few requests as the
   * server's bounds allow). Until then the element is marked `data-markdown="pending"`; if
   * rendering fails, or the text is longer than the server renders, the plain text stays.
   */
  markdown(element, text) {
    if (text.length > MARKDOWN_TEXT_CHARS) {
      element.dataset.markdown = "too-long";
      return;
    }
    element.dataset.markdown = "pending";
    this.unrendered.push({ element, text });
    if (this.unrendered.length > 1) return;
    queueMicrotask(async () => {
      const waiting = this.unrendered;
      this.unrendered = [];
      for (const batch of markdownBatches(waiting)) {
        let html = null;
        try {
          html = await this.renderMarkdown(batch.map((item) => item.text));
        } catch {
          // The plain text stays.
        }
        batch.forEach((item, index) => {
          if (html && typeof html[index] === "string") {
            // The server's sanitizer made this HTML safe; a template parses it without
            // running anything, and the page's policy forbids inline scripts besides.
            const template = document.createElement("template");
            template.innerHTML = html[index];
            item.element.replaceChildren(template.content);
            item.element.classList.add("markdown");
          }
          item.element.dataset.markdown = html ? "done" : "failed";
        });
      }
    });
  }

  /** Empties the transcript. */
  reset() {
    this.list.replaceChildren();
    this.keys = new Set();
    this.calls = new Map();
    this.streaming = null;
    this.needsAnswer = false;
    this.sleepDue = new Map();
    this.waiting = new Map();
  }

  /** True when the newest entry is one the model answers (a message, a tool result). */
  awaitsModel() {
    return this.needsAnswer || this.streaming !== null;
  }

  /**
   * Shows the history: `entries` as `GET /threads/{id}/history` returns them. For a child
   * thread (`record.parent`), the entries it inherits from its parent are folded away, and a
   * line says where its own begin.
   */
  showHistory(entries, record) {
    this.reset();
    const inherited = inheritedCount(entries, record);
    if (inherited > 0) {
      const inner = h("ol", { class: "transcript inherited-entries" });
      for (const entry of entries.slice(0, inherited)) this.showEntry(entry, inner);
      this.list.append(
        h(
          "li",
          { class: "entry inherited" },
          h(
            "details",
            {},
            h("summary", {}, `${inherited} entries inherited from the parent thread ${record.parent.thread_id}`),
            inner,
          ),
        ),
        h("li", { class: "entry divider", role: "separator" }, "This thread starts here"),
      );
    }
    for (const entry of entries.slice(inherited)) this.showEntry(entry, this.list);
    for (const call of record ? record.pending_calls || [] : []) {
      if (call.due) this.markSleeping(call.call_id, call.due);
    }
    this.markPending(record);
  }

  showEntry(entry, target) {
    const item = entry.item || {};
    const at = entry.at;
    switch (item.type) {
      case "message":
        this.message(at, item.text, item.from && item.from.kind === "parent" ? "parent" : "user", target);
        break;
      case "assistant":
        if (item.text && item.text.trim()) this.assistantText(at, item.text, target);
        for (const call of item.tool_calls || []) this.toolCall(call.id, call.name, call.args, target);
        break;
      case "tool_result":
        this.toolResult(item, target);
        break;
      case "notice":
        this.notice(at, item.text, item.is_error, target);
        break;
      case "summary":
        this.add(
          target,
          null,
          h(
            "li",
            { class: "entry summary" },
            h("details", {}, h("summary", {}, "Summary of the earlier conversation"), h("p", { class: "text" }, item.text)),
          ),
        );
        break;
      default:
        break;
    }
  }

  /**
   * Shows a live event of the transcript's kinds (returns false for other kinds, which the
   * page shows elsewhere).
   */
  apply(event) {
    const target = this.list;
    switch (event.type) {
      case "user_message":
        this.message(event.at, event.text, "user", target);
        return true;
      case "assistant_delta":
        this.delta(event.text);
        return true;
      case "assistant_restarted":
        this.withdrawStreamed();
        return true;
      case "assistant_text":
        this.assistantText(event.at, event.text, target);
        return true;
      case "tool_call":
        this.toolCall(event.call_id, event.name, event.args, target);
        return true;
      case "tool_result":
        this.toolResult(event, target);
        return true;
      case "error":
        this.notice(event.at, event.text, true, target);
        return true;
      case "interrupted":
        // The same text as the notice in the history, so that a reconnect shows it once.
        this.notice(event.at, event.nothing_in_flight ? INTERRUPTED_IDLE_NOTICE : INTERRUPTED_NOTICE, false, target);
        return true;
      case "sleeping":
        if (event.until) this.markSleeping(event.call_id, event.until);
        return true;
      case "authorization_requested":
        this.authorization(event.call_id, event.auth_url);
        return true;
      case "client_tool_call":
        this.markWaiting(event.call_id, "waiting for the application");
        return true;
      case "choice_answered":
        // An approval's answer: the call runs now, or its result says it did not.
        if (event.selected === 0) this.markWaiting(event.call_id, "running");
        return false;
      default:
        return false;
    }
  }

  /** Adds `element` under `key` (nothing when the key is shown already); true if added. */
  add(target, key, element) {
    if (key !== null) {
      if (this.keys.has(key)) return false;
      this.keys.add(key);
    }
    target.append(element);
    return true;
  }

  message(at, text, from, target) {
    const widgetPress = /^\[widget\] The user pressed `([^`]*)`/.exec(text);
    const who = from === "parent" ? "Parent thread" : "You";
    const body = widgetPress
      ? `pressed “${widgetPress[1]}”${text.slice(widgetPress[0].length).replace(/\.$/, "")}`
      : text;
    const added = this.add(
      target,
      `m|${at}|${text}`,
      h(
        "li",
        { class: `entry msg ${from}${widgetPress ? " action" : ""}` },
        h("div", { class: "who" }, who, " ", timeElement(at)),
        h("div", { class: "text" }, body),
      ),
    );
    if (added) this.needsAnswer = true;
  }

  delta(text) {
    if (!this.streaming) {
      this.streaming = h("div", { class: "text" });
      this.list.append(
        h(
          "li",
          { class: "entry msg assistant streaming", "aria-busy": "true" },
          h("div", { class: "who" }, "Agent"),
          this.streaming,
        ),
      );
    }
    this.streaming.append(text);
  }

  /**
   * The stream broke off and the model is asked again: what it showed so far is not part of
   * the answer, and the new answer streams in its place.
   */
  withdrawStreamed() {
    const streamed = this.streaming && this.streaming.parentElement;
    if (streamed) streamed.remove();
    this.streaming = null;
  }

  assistantText(at, text, target) {
    const streamed = this.streaming && this.streaming.parentElement;
    this.streaming = null;
    const key = `a|${at}|${text}`;
    if (this.keys.has(key)) {
      if (streamed) streamed.remove();
      return;
    }
    const body = h("div", { class: "text" }, text);
    this.markdown(body, text);
    const element = h(
      "li",
      { class: "entry msg assistant" },
      h("div", { class: "who" }, "Agent", " ", timeElement(at)),
      body,
    );
    if (streamed) {
      // The streamed text becomes the final one, in place.
      this.keys.add(key);
      streamed.replaceWith(element);
    } else {
      this.add(target, key, element);
    }
    this.needsAnswer = false;
  }

  toolCall(id, name, args, target) {
    if (this.keys.has(`c|${id}`)) return;
    const injected = name === INJECTED_TOOL;
    const sleeping = SLEEP_TOOLS.has(name);
    const state = h("span", { class: "call-state pending" }, sleeping ? "sleeping" : "running");
    const title = injected ? h("span", { class: "tool-name" }, "event") : h("span", { class: "tool-name" }, name);
    const argsPreview = injected
      ? h("span", { class: "args-preview" }, describeInjected(args))
      : h("code", { class: "args-preview" }, preview(args, 60));
    const result = h("div", { class: "call-result" });
    const display = h("div", { class: "call-display" });
    const element = h(
      "li",
      { class: `entry call${injected ? " injected" : ""}${sleeping ? " sleep" : ""}`, "data-call": id, "data-tool": name },
      // What is meant for people (a widget, a diff, an image) shows above the fold.
      display,
      h(
        "details",
        {},
        h("summary", {}, title, " ", argsPreview, " ", state),
        h("div", { class: "call-body" }, h("h4", {}, "Arguments"), h("pre", { class: "code" }, pretty(args)), result),
      ),
    );
    this.add(target, `c|${id}`, element);
    this.calls.set(id, { name, args, state, result, display, element });
    this.needsAnswer = false;
    if (this.sleepDue.has(id)) this.markSleeping(id, this.sleepDue.get(id));
    if (this.waiting.has(id)) this.markWaiting(id, this.waiting.get(id));
  }

  toolResult(result, target) {
    const id = result.call_id;
    const key = `r|${id}`;
    if (this.keys.has(key)) return;
    let call = this.calls.get(id);
    if (!call) {
      this.toolCall(id, result.name, {}, target);
      call = this.calls.get(id);
    }
    this.keys.add(key);
    // The model answers a result, except a succeeded `finish`, which ends its turn.
    const finished = result.name === "finish" && !result.is_error && call.args && call.args.status === "succeeded";
    this.needsAnswer = !finished;
    const label = resultLabel(result);
    call.state.className = `call-state ${label.state}`;
    call.state.textContent = label.text;
    if (result.name === INJECTED_TOOL) {
      const summary = call.element.querySelector(".args-preview");
      if (summary) summary.textContent = preview(result.text, 90);
    }
    call.result.append(h("h4", {}, result.is_error ? "Error" : "Result"), h("pre", { class: "code" }, result.text));
    if (result.name === "widget" && !result.is_error && call.args && call.args.ui) {
      call.display.append(renderWidget(call.args.ui, this.onWidgetAction));
    }
    const shown = showDisplay(result.display_as || []);
    if (shown) call.display.append(shown);
    this.addImages(call, result.images || []);
  }

  addImages(call, images) {
    if (images.length === 0 || call.display.querySelector("img.tool-image")) return;
    for (const image of images) {
      call.display.append(
        h("img", {
          class: "tool-image",
          src: `data:${image.media_type};base64,${image.data}`,
          alt: `An image from ${call.name}`,
        }),
      );
    }
  }

  /** Adds the images of tool results (the live events carry none) from a fresh history. */
  patchImages(entries) {
    for (const entry of entries) {
      const item = entry.item || {};
      if (item.type !== "tool_result" || !(item.images || []).length) continue;
      const call = this.calls.get(item.call_id);
      if (call) this.addImages(call, item.images);
    }
  }

  markSleeping(id, until) {
    this.sleepDue.set(id, until);
    const call = this.calls.get(id);
    if (!call || !call.state.classList.contains("pending")) return;
    // To the second, in UTC, as the thread's status and the sleep's result say it.
    const date = parseTime(until);
    const due = date
      ? h("time", { datetime: date.toISOString(), title: date.toString() }, showTime(until))
      : until;
    call.state.replaceChildren("sleeping until ", due);
  }

  /** Marks the calls `record` says wait for a person's approval or for their application. */
  markPending(record) {
    for (const call of record ? record.pending_calls || [] : []) {
      if (call.approval) this.markWaiting(call.call_id, "waiting for approval");
      else if (call.client) this.markWaiting(call.call_id, "waiting for the application");
    }
  }

  /** Says what a call still running waits for (a person's approval, its application). */
  markWaiting(id, text) {
    this.waiting.set(id, text);
    const call = this.calls.get(id);
    if (!call || !call.state.classList.contains("pending")) return;
    call.state.textContent = text;
  }

  notice(at, text, isError, target) {
    this.add(
      target,
      `n|${at}|${text}`,
      h(
        "li",
        { class: `entry notice${isError ? " error" : ""}`, role: isError ? "alert" : null },
        timeElement(at),
        " ",
        text,
      ),
    );
    this.needsAnswer = false;
  }

  authorization(id, url) {
    const link = /^https?:\/\//.test(url)
      ? h("a", { href: url, target: "_blank", rel: "noopener noreferrer" }, "Authorize")
      : h("code", {}, url);
    const note = h("p", { class: "authorize" }, "The tool asks you to authorize it: ", link);
    const call = this.calls.get(id);
    if (call) call.display.append(note);
    else this.list.append(h("li", { class: "entry notice" }, note));
  }
}

/**
 * How many entries at the start of a child's history are its parent's (0 for a root): those it
 * inherited at the fork and, when its own history starts with the copy of the parent's turn
 * that spawned it, that copy too. The CLI counts the same way (`inherited_len`, `src/render.rs`).
 */
function inheritedCount(entries, record) {
  const parent = record && record.parent;
  if (!parent) return 0;
  const fork = Math.min(parent.fork_at, entries.length);
  const next = entries[fork] && entries[fork].item;
  const copiesSpawn =
    next && next.type === "assistant" && (next.tool_calls || []).some((call) => call.id === parent.call_id);
  return fork + (copiesSpawn ? 1 : 0);
}

/**
 * The word a call's state shows once it has a result, and its style: `error`, `interrupted` (a
 * sleep that new input cut short), `still running` or `still waiting` (the conversation moved on
 * from a call whose result comes later, as an event), `woke up` (a sleep that ended) or `done`.
 */
function resultLabel(result) {
  const text = typeof result.text === "string" ? result.text : "";
  if (result.is_error) return { state: "error", text: "error" };
  if (text.startsWith(SLEEP_INTERRUPTED_PREFIX)) return { state: "interrupted", text: "interrupted" };
  if (text.startsWith(STILL_RUNNING_PREFIX)) return { state: "still", text: "still running" };
  if (text.startsWith(STILL_WAITING_PREFIX)) return { state: "still", text: "still waiting" };
  if (SLEEP_TOOLS.has(result.name)) return { state: "done", text: "woke up" };
  return { state: "done", text: "done" };
}

function describeInjected(args) {
  const tool = args && args.original_tool_name;
  return tool ? `from ${tool}` : "";
}

/** The first `display_as` segment this page can show: a diff, an image or text. */
function showDisplay(segments) {
  for (const segment of segments) {
    const content = segment && segment.content;
    if (segment.type === "diff" && content && typeof content.patch === "string") {
      return renderDiff(content.path, content.patch);
    }
    if (segment.type === "image" && content && content.data) {
      return h("img", {
        class: "tool-image",
        src: `data:${content.mediaType || "image/png"};base64,${content.data}`,
        alt: "An image from the tool",
      });
    }
    if (segment.type === "text" && typeof content === "string") {
      return h("p", { class: "display-text" }, content);
    }
  }
  return null;
}

/** A unified diff, each line marked as added, removed, a hunk header or context. */
export function renderDiff(path, patch) {
  const lines = patch.replace(/\n$/, "").split("\n");
  return h(
    "figure",
    { class: "diff" },
    h("figcaption", {}, path || "diff"),
    h(
      "pre",
      {},
      lines.map((line) => {
        let kind = "context";
        if (line.startsWith("+++") || line.startsWith("---")) kind = "file";
        else if (line.startsWith("@@")) kind = "hunk";
        else if (line.startsWith("+")) kind = "add";
        else if (line.startsWith("-")) kind = "del";
        return h("span", { class: `diff-line diff-${kind}` }, line);
      }),
    ),
  );
}

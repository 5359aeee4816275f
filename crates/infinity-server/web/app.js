// The page: the conversation list, one conversation at a time with its live event stream, and
// what a person does there (send, answer, press, interrupt, close).

import { createApi } from "./api.js";
import { h, replace } from "./dom.js";
import {
  childReport,
  parseChecklist,
  renderOutput,
  renderPlan,
  renderQuestions,
  renderTree,
  renderWaiting,
  renderCost,
  renderViews,
} from "./panels.js";
import { renderSidebar } from "./sidebar.js";
import { describeStatus, threadName } from "./status.js";
import { Transcript } from "./transcript.js";

// The output event types of `GET /threads/{id}/events` (`OutputKind` in the runtime).
/** The connection's state on a host that cannot stream (see the `reconnect` event). */
const LIVE_POLLING = "live (refreshes every 2 s)";

const EVENT_TYPES = [
  "user_message",
  "assistant_text",
  "assistant_delta",
  "assistant_restarted",
  "tool_call",
  "tool_result",
  "thread_spawned",
  "thread_closed",
  "interrupted",
  "sleeping",
  "title_changed",
  "plan_updated",
  "authorization_requested",
  "choice_requested",
  "choice_answered",
  "client_tool_call",
  "view_updated",
  "finished",
  "widget",
];

const POLL_MS = 2000;

const $ = (id) => document.getElementById(id);

// The token the page was opened with (`/?access_token=T`), kept in memory only.
const api = createApi(new URLSearchParams(location.search).get("access_token"));

/** How many conversations the list shows at first, and more at each "Show more". */
const LIST_PAGE = 50;

const page = {
  // The conversation list: a page of summaries (`GET /threads`), how many it asks for, whether
  // there are more, and the title search.
  list: [],
  listLimit: LIST_PAGE,
  more: false,
  search: "",
  // The records of the open conversation's threads (`GET /threads/{root}/tree`), by id.
  records: new Map(),
  // The open thread: see `openThread`.
  current: null,
  refreshTimer: null,
  // The agent each conversation started here runs ("" for the default), until it exists.
  agents: new Map(),
};

const transcript = new Transcript(
  $("transcript"),
  (action, values) => pressWidget(action, values),
  (texts) => api.markdown(texts),
);

function toast(message, isError = false) {
  const element = $("toast");
  element.textContent = message;
  element.classList.toggle("error", isError);
  element.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => {
    element.hidden = true;
  }, isError ? 8000 : 3000);
}

/** Runs `action`; a failure becomes a message on the page, never an uncaught error. */
async function attempt(what, action) {
  try {
    return await action();
  } catch (error) {
    toast(`${what}: ${error.message}`, true);
    return undefined;
  }
}

function running(id) {
  const current = page.current;
  return Boolean(current && current.id === id && transcript.awaitsModel());
}

// --- The conversation list --------------------------------------------------------------------

/** The root of the open thread's conversation. */
function rootOf(current) {
  const record = current.record;
  return record && record.stack && record.stack.length ? record.stack[0] : current.id;
}

function showList(current) {
  renderSidebar($("thread-list"), $("no-threads"), page.list, current, running);
  $("more-threads").hidden = !page.more;
  $("no-threads").textContent = page.search
    ? `No conversation's title holds “${page.search}”.`
    : "No conversations yet. Start one with “New conversation”.";
}

/** Reads the conversation list and the open conversation's records. */
async function refreshThreads() {
  const current = page.current;
  let list;
  let tree = null;
  try {
    list = await api.threads({ kind: "conversation", limit: page.listLimit, title: page.search });
    // A conversation started here has no records until its first message is handled.
    if (current && current.fresh && list.threads.some((summary) => summary.id === current.id)) {
      current.fresh = false;
    }
    if (current && !current.fresh) tree = await api.tree(rootOf(current));
  } catch (error) {
    $("server-state").textContent = `Cannot reach the server: ${error.message}`;
    $("server-state").hidden = false;
    return;
  }
  $("server-state").hidden = true;
  page.list = list.threads;
  page.more = Boolean(list.next);
  if (tree && page.current === current) {
    // Answers may cross: a record never goes back to an older version than the page has seen.
    page.records = new Map(
      tree.map((record) => {
        const known = page.records.get(record.id);
        return [record.id, known && known.version > record.version ? known : record];
      }),
    );
    if (page.records.has(current.id)) current.record = page.records.get(current.id);
  }
  showList(current && current.id);
  if (current) {
    showThread(current);
    refreshWaiting(current);
  }
}

/** Searches the conversations' titles as a person types, a moment after the last key. */
function searchSoon() {
  clearTimeout(page.searchTimer);
  page.searchTimer = setTimeout(() => {
    page.search = $("thread-search").value.trim();
    page.listLimit = LIST_PAGE;
    refreshThreads();
  }, 250);
}

function showMore() {
  page.listLimit += LIST_PAGE;
  refreshThreads();
}

/** What would wake each thread of the current conversation (`GET /threads/{root}/waiting`). */
async function refreshWaiting(current) {
  if (current.fresh) return;
  const record = current.record;
  const rootId = record && record.stack && record.stack.length ? record.stack[0] : current.id;
  let answer;
  try {
    answer = await api.waiting(rootId);
  } catch {
    return; // The next refresh tries again; the panel keeps what it showed.
  }
  if (page.current !== current) return;
  current.waiting = new Map(answer.threads.map((waits) => [waits.thread_id, waits]));
  showThread(current);
}

/**
 * Refreshes the records soon: events come in bursts, and one refresh serves a part of one. A
 * refresh already planned is not put off, so a long burst still gets one every 300 ms.
 */
function refreshSoon() {
  if (page.refreshTimer) return;
  page.refreshTimer = setTimeout(() => {
    page.refreshTimer = null;
    refreshThreads();
  }, 300);
}

async function showAgents() {
  const agents = await attempt("Agents", () => api.agents());
  if (!agents) return;
  $("agent-note").textContent = `New conversations run the agent “${agents.default}”.`;
  // With stored agents a person picks which one a new conversation runs.
  const names = [agents.default, ...(agents.stored || []).map((a) => a.name)];
  const unique = [...new Set(names.filter(Boolean))];
  const choice = $("agent-choice");
  replace(
    choice,
    unique.map((name) =>
      name === agents.default
        ? h("option", { value: "" }, `${name} (default)`)
        : h("option", { value: name }, name),
    ),
  );
  $("agent-picker").hidden = unique.length < 2;
  $("agent-note").hidden = unique.length >= 2;
}

/**
 * Offers the models the server lets threads switch to (`GET /models`) in the model field; the
 * agent's own is the empty field. Anything else typed there is refused by the server.
 */
async function showModels() {
  const models = await attempt("Models", () => api.models());
  if (!models) return;
  const allowed = models.allowed || [];
  replace($("model-options"), allowed.map((spec) => h("option", { value: spec })));
  $("model-choice").placeholder = allowed.length
    ? "a listed model, empty for the agent's"
    : "empty for the agent's (no others allowed)";
}

function newConversation() {
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  const id = `web-${[...bytes].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
  // The agent chosen now runs the conversation its first message starts.
  page.agents.set(id, $("agent-choice").value);
  location.hash = `#/thread/${id}`;
}

// --- One conversation ---------------------------------------------------------------------------

function route() {
  const match = /^#\/thread\/(.+)$/.exec(location.hash);
  let id = null;
  try {
    id = match ? decodeURIComponent(match[1]) : null;
  } catch {
    toast(`Not a thread id: ${match[1]}`, true);
  }
  if (!id) {
    closeCurrent();
    $("welcome").hidden = false;
    $("thread-view").hidden = true;
    $("details").hidden = true;
    showList(null);
    return;
  }
  if (!page.current || page.current.id !== id) openThread(id);
}

function closeCurrent() {
  if (page.current && page.current.source) page.current.source.close();
  page.current = null;
}

/**
 * Opens thread `id`: its history, then its event stream from the last event the history
 * includes. A reconnect resumes from the last event received (`EventSource` sends
 * `Last-Event-ID`), so nothing is shown twice and nothing is missed; a `reset` (the events
 * missed are no longer kept) or a `withdrawn` (a failed slice's events) opens it afresh.
 */
function openThread(id) {
  closeCurrent();
  const current = {
    id,
    // A conversation started here that has no record yet: nothing to load.
    fresh: page.agents.has(id) && !page.list.some((summary) => summary.id === id),
    record: page.records.get(id) || null,
    source: null,
    questions: new Map(),
    views: new Map(),
    reports: new Map(),
    // A plan or output from an event, and the record version it came before.
    plan: null,
    output: null,
  };
  page.current = current;
  transcript.reset();
  $("welcome").hidden = true;
  $("thread-view").hidden = false;
  $("details").hidden = false;
  $("connection").textContent = "connecting…";
  showThread(current);
  showList(id);
  start(current);
}

async function start(current) {
  let history = [];
  let record = current.record;
  let after = 0;
  if (!current.fresh) {
    try {
      const [loaded, fresh] = await Promise.all([
        api.historyAndPosition(current.id),
        api.record(current.id),
      ]);
      history = loaded.entries;
      after = loaded.after;
      record = fresh;
    } catch (error) {
      if (page.current === current) toast(`Loading ${current.id}: ${error.message}`, true);
    }
  }
  if (page.current !== current) return;
  current.record = record;
  if (current.fresh) $("message").focus();
  // The conversation's other threads, for its tree.
  refreshSoon();
  // What is open now; the events after the history change it from there.
  for (const choice of (record && record.open_choices) || []) {
    current.questions.set(choice.call_id, { ...choice, type: "choice_requested" });
  }
  for (const [type, content] of Object.entries((record && record.views) || {})) {
    current.views.set(type, content);
  }
  transcript.showHistory(history, record);
  for (const entry of history) {
    if (entry.item && entry.item.type === "tool_result") noteReport(current, entry.item.text);
  }
  const source = new EventSource(api.eventsUrl(current.id, after));
  current.source = source;
  for (const type of EVENT_TYPES) {
    source.addEventListener(type, (message) => receive(current, message));
  }
  const reopen = () => {
    if (page.current === current) openThread(current.id);
  };
  source.addEventListener("reset", reopen);
  source.addEventListener("withdrawn", reopen);
  // A host that cannot stream (the stack's API function) ends each stream with `reconnect`:
  // the page follows the thread a reconnect at a time, and the ends are not outages.
  source.addEventListener("reconnect", () => {
    current.polling = true;
  });
  source.addEventListener("open", () => {
    if (page.current === current) $("connection").textContent = current.polling ? LIVE_POLLING : "live";
  });
  // An `error` event is either the thread's own (with data) or the connection's.
  source.addEventListener("error", (message) => {
    if (message.data) {
      receive(current, message);
    } else if (page.current === current) {
      $("connection").textContent =
        source.readyState === EventSource.CLOSED
          ? "disconnected (reload the page)"
          : current.polling
            ? LIVE_POLLING
            : "reconnecting…";
    }
  });
  showThread(current);
  showEnd();
}

function receive(current, message) {
  if (page.current !== current) return;
  let event;
  try {
    event = JSON.parse(message.data);
  } catch {
    return;
  }
  handle(current, event);
}

function noteReport(current, text) {
  const report = childReport(text);
  if (report) current.reports.set(report.childId, report.report);
}

/** True when the end of the transcript is in sight (above the composer). */
function atEnd() {
  const footer = document.querySelector(".thread-footer");
  return $("transcript").getBoundingClientRect().bottom - footer.getBoundingClientRect().top < 120;
}

/** Scrolls the end of the transcript into sight, above the composer. */
function showEnd() {
  const footer = document.querySelector(".thread-footer");
  const hidden = $("transcript").getBoundingClientRect().bottom - footer.getBoundingClientRect().top;
  if (hidden > 0) window.scrollBy(0, hidden);
}

function handle(current, event) {
  const version = current.record ? current.record.version : -1;
  const follow = atEnd();
  const inTranscript = transcript.apply(event);
  switch (event.type) {
    case "tool_result":
      noteReport(current, event.text);
      current.questions.delete(event.call_id);
      // The call is done now; the record says so once the slice commits.
      if (current.record && current.record.pending_calls) {
        current.record.pending_calls = current.record.pending_calls.filter((call) => call.call_id !== event.call_id);
      }
      refreshImagesSoon(current);
      break;
    case "title_changed":
      if (current.record) current.record.title = event.title;
      break;
    case "plan_updated":
      current.plan = { value: parseChecklist(event.checklist), before: version };
      break;
    case "finished":
      current.output = { value: { status: event.status, result: event.result }, before: version };
      break;
    case "choice_requested":
      current.questions.set(event.call_id, event);
      break;
    case "choice_answered":
      current.questions.delete(event.call_id);
      break;
    case "view_updated":
      if (Object.keys(event.content || {}).length === 0) current.views.delete(event.view_type);
      else current.views.set(event.view_type, event.content);
      break;
    default:
      break;
  }
  showThread(current);
  if (follow && (inTranscript || event.type === "choice_requested")) showEnd();
  refreshSoon();
}

/** Live tool results carry no images; the history has them. */
function refreshImagesSoon(current) {
  clearTimeout(current.imagesTimer);
  current.imagesTimer = setTimeout(async () => {
    if (page.current !== current || current.fresh) return;
    try {
      transcript.patchImages(await api.history(current.id));
    } catch {
      // The next event tries again.
    }
  }, 1000);
}

/** The newer of an event's value and the record's: the record wins once it has committed it. */
function newest(fromEvent, fromRecord, record) {
  if (fromEvent && (!record || record.version <= fromEvent.before)) return fromEvent.value;
  return fromRecord;
}

function showThread(current) {
  const record = current.record;
  const status = describeStatus(record, running(current.id));
  const closed = Boolean(record && record.status === "closed");
  transcript.markPending(record);
  $("thread-title").textContent = threadName(record, current.id);
  const statusElement = $("thread-status");
  statusElement.textContent = status.text;
  statusElement.className = `status status-${status.state}`;
  $("thread-agent").textContent = record ? `agent ${record.agent}` : "";
  $("thread-model").textContent = record && record.model ? `model ${record.model}` : "";
  $("model-form").hidden = !record || closed;
  $("interrupt").disabled = !record || closed;
  $("close").disabled = !record || closed;
  $("message").disabled = closed;
  $("composer").hidden = closed;
  $("closed-note").hidden = !closed;

  const rootId = record && record.stack && record.stack.length ? record.stack[0] : current.id;
  const breadcrumb = $("breadcrumb");
  breadcrumb.hidden = rootId === current.id;
  if (rootId !== current.id) {
    replace(
      breadcrumb,
      "A thread of ",
      h("a", { href: `#/thread/${encodeURIComponent(rootId)}` }, threadName(page.records.get(rootId), rootId)),
    );
  }

  renderTree($("tree"), page.records, rootId, current.id, current.reports, running, current.waiting);

  $("cost-panel").hidden = !record;
  if (record) {
    const root = page.records.get(rootId) || (rootId === current.id ? record : null);
    const stopped = renderCost($("cost"), record, root);
    $("budget-form").hidden = closed;
    $("budget-form").classList.toggle("urgent", stopped);
  }

  const waits = current.waiting && current.waiting.get(current.id);
  $("waiting-panel").hidden = !waits;
  if (waits) renderWaiting($("waiting"), waits);

  renderQuestions(
    $("questions"),
    [...current.questions.values()],
    (question, index) => answer(current, question, index),
    (question) => dismiss(current, question),
  );

  const steps = newest(current.plan, record && record.plan ? record.plan.steps : null, record);
  $("plan-panel").hidden = !steps || steps.length === 0;
  if (steps) renderPlan($("plan"), steps);

  const output = newest(current.output, record ? record.output : null, record);
  $("output-panel").hidden = !output;
  if (output) renderOutput($("output"), output);

  $("views-panel").hidden = current.views.size === 0;
  renderViews($("views"), current.views);
}

// --- What a person does -------------------------------------------------------------------------

async function send(event) {
  event.preventDefault();
  const current = page.current;
  const box = $("message");
  const text = box.value.trim();
  if (!current || !text) return;
  const agent = current.record ? "" : page.agents.get(current.id) || "";
  const sent = await attempt("Sending", () => api.sendMessage(current.id, text, agent));
  if (sent) {
    box.value = "";
    refreshSoon();
  }
}

async function answer(current, question, index) {
  const answered = await attempt("Answering", () => api.answer(current.id, question.call_id, index));
  if (answered) {
    current.questions.delete(question.call_id);
    toast(`Answered “${question.choices[index]}”`);
    showThread(current);
  }
}

async function dismiss(current, question) {
  const dismissed = await attempt("Dismissing", () => api.dismiss(current.id, question.call_id));
  if (dismissed) {
    current.questions.delete(question.call_id);
    showThread(current);
  }
}

async function pressWidget(action, values) {
  const current = page.current;
  if (!current) return;
  const sent = await attempt("Sending the action", () => api.widgetAction(current.id, action, values));
  if (sent) toast(`Sent “${action}”`);
}

/** Sets the open conversation's lifetime budget in dollars (its root takes it). */
async function setBudget(event) {
  event.preventDefault();
  const current = page.current;
  if (!current) return;
  const usd = Number($("budget-usd").value);
  const done = await attempt("Setting the budget", () => api.setBudget(current.id, { usd }));
  if (done) {
    $("budget-usd").value = "";
    toast(`The conversation's budget is now $${usd}`);
    refreshSoon();
  }
}

/** Switches the model the open thread's next completions use (empty: back to its agent's). */
async function switchModel(event) {
  event.preventDefault();
  const current = page.current;
  if (!current) return;
  const model = $("model-choice").value.trim() || null;
  const done = await attempt("Switching the model", () => api.useModel(current.id, model));
  if (done) {
    toast(model ? `Next completions use ${model}` : "Back to the agent's model");
    refreshSoon();
  }
}

async function interrupt() {
  const current = page.current;
  if (!current) return;
  const done = await attempt("Interrupting", () => api.interrupt(current.id, true));
  // Accepted, not yet done: the transcript says what the interrupt met (or that nothing was
  // in flight) when the thread has taken it.
  if (done) toast("Interrupt sent");
}

// Closing cannot be undone: the first press asks, a second within a few seconds closes.
async function close() {
  const current = page.current;
  const button = $("close");
  if (!current) return;
  if (!button.dataset.confirming) {
    button.dataset.confirming = "yes";
    button.textContent = "Close the thread and its children?";
    setTimeout(() => {
      delete button.dataset.confirming;
      button.textContent = "Close";
    }, 5000);
    return;
  }
  delete button.dataset.confirming;
  button.textContent = "Close";
  const done = await attempt("Closing", () => api.close(current.id, true));
  if (done) {
    toast("Closing the thread");
    refreshSoon();
  }
}

function composerKeys(event) {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    $("composer").requestSubmit();
  }
}

// --- Start --------------------------------------------------------------------------------------

$("new-conversation").addEventListener("click", newConversation);
$("thread-search").addEventListener("input", searchSoon);
$("more-threads").addEventListener("click", showMore);
$("composer").addEventListener("submit", send);
$("message").addEventListener("keydown", composerKeys);
$("interrupt").addEventListener("click", interrupt);
$("model-form").addEventListener("submit", switchModel);
$("budget-form").addEventListener("submit", setBudget);
$("close").addEventListener("click", close);
window.addEventListener("hashchange", route);
setInterval(() => {
  if (!document.hidden) refreshThreads();
}, POLL_MS);

showAgents();
showModels();
refreshThreads().then(route);

// Small helpers to build the page: elements, times, JSON.

/**
 * An element: `h("button", {class: "x", onclick: f}, "Label")`. Attributes named `on...` are
 * listeners; `null`, `undefined` and `false` attributes are left out; children may be strings,
 * nodes, arrays or nothing. Text always goes in as text, never as markup.
 */
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      element.addEventListener(name.slice(2), value);
    } else if (name in element && typeof value !== "string") {
      element[name] = value;
    } else {
      element.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(element, children);
  return element;
}

function append(element, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(element, child);
    else element.append(child instanceof Node ? child : String(child));
  }
}

/**
 * Replaces an element's children, unless the new ones would come out the same: parts of the page
 * redrawn on every refresh must not lose the keyboard focus. When they do change, the control
 * that had the focus gets it back, found by its `data-key`.
 */
export function replace(element, ...children) {
  const next = document.createElement(element.tagName);
  append(next, children);
  if (next.innerHTML === element.innerHTML) return;
  const active = document.activeElement;
  const focused = active && element.contains(active) ? active.dataset.key : undefined;
  element.replaceChildren(...next.childNodes);
  if (focused !== undefined) {
    const again = element.querySelector(`[data-key="${CSS.escape(focused)}"]`);
    if (again) again.focus();
  }
}

/** A timestamp from the API (RFC 3339, maybe with nanoseconds) as a Date, or null. */
export function parseTime(at) {
  if (typeof at !== "string") return null;
  // Date reads at most milliseconds; the runtime writes up to nanoseconds.
  const trimmed = at.replace(/(\.\d{3})\d+/, "$1");
  const date = new Date(trimmed);
  return Number.isNaN(date.getTime()) ? null : date;
}

/** A `<time>` showing the clock time (and the day when it is not today). */
export function timeElement(at) {
  const date = parseTime(at);
  if (!date) return null;
  const today = new Date().toDateString() === date.toDateString();
  const text = today
    ? date.toLocaleTimeString()
    : `${date.toLocaleDateString()} ${date.toLocaleTimeString()}`;
  return h("time", { datetime: date.toISOString(), title: date.toString() }, text);
}

/** How long ago `at` was, in words ("just now", "5 min ago", "3 h ago", a date). */
export function ago(at, now = new Date()) {
  const date = parseTime(at);
  if (!date) return "";
  const seconds = Math.round((now - date) / 1000);
  if (seconds < 45) return "just now";
  if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.round(seconds / 3600)} h ago`;
  return date.toLocaleDateString();
}

/**
 * `text` with the characters that would hide or reorder what a person reads shown instead:
 * C0 controls other than tab and newline as `^[` (caret notation), DEL as `^?`, C1 controls
 * and the bidi marks and overrides as `<U+202E>`, as the server and the CLI show them.
 */
export function visible(text) {
  return String(text).replace(
    /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g,
    (c) => {
      const code = c.charCodeAt(0);
      if (code < 0x20) return `^${String.fromCharCode(code + 0x40)}`;
      if (code === 0x7f) return "^?";
      return `<U+${code.toString(16).toUpperCase().padStart(4, "0")}>`;
    },
  );
}

/** JSON, indented, for people. */
export function pretty(value) {
  return visible(JSON.stringify(value, null, 2));
}

/** A one-line preview of a value, cut to `max` characters. */
export function preview(value, max = 80) {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  if (text === undefined) return "";
  const shown = visible(text);
  return shown.length > max ? `${shown.slice(0, max - 1)}…` : shown;
}

// A `widget` tool's UI as real controls. Nodes follow `schemas/widget.schema.json`: text, badge,
// row, column, button, input, select, card. A button sends its action with the values of the
// widget's inputs and selects, by name.

import { h } from "./dom.js";

const TONES = new Set(["neutral", "info", "success", "warning", "danger"]);

let fieldCount = 0;

/**
 * The widget `ui` as an element; `onAction(action, values, button)` runs when a button is
 * pressed (it returns a promise; the button is disabled until it settles).
 */
export function renderWidget(ui, onAction) {
  const root = h("form", {
    class: "widget",
    "aria-label": ui && ui.title ? ui.title : "Widget",
    onsubmit: (event) => event.preventDefault(),
  });
  if (ui && ui.title) root.append(h("h3", { class: "widget-title" }, ui.title));
  if (!ui || ui.type === "html") {
    // The page runs no markup it did not write: an HTML widget is shown as its source.
    root.append(
      h("p", { class: "muted" }, "An HTML widget (shown as its source: this page renders no foreign markup)."),
      h("pre", { class: "code" }, ui ? String(ui.html || "") : ""),
    );
    return root;
  }
  const values = () => {
    const collected = {};
    for (const field of root.querySelectorAll("[data-field]")) {
      collected[field.dataset.field] = field.value;
    }
    return collected;
  };
  const press = async (action, button) => {
    button.disabled = true;
    try {
      await onAction(action, values(), button);
    } finally {
      button.disabled = false;
    }
  };
  for (const child of ui.children || []) root.append(node(child, press));
  return root;
}

function node(spec, press) {
  const kids = () => (spec.children || []).map((child) => node(child, press));
  switch (spec && spec.type) {
    case "text":
      return h("p", { class: "widget-text" }, spec.text || "");
    case "badge": {
      const tone = TONES.has(spec.tone) ? spec.tone : "neutral";
      return h("span", { class: `badge tone-${tone}` }, spec.text || "");
    }
    case "row":
      return h("div", { class: "widget-row" }, kids());
    case "column":
      return h("div", { class: "widget-column" }, kids());
    case "card":
      return h(
        "section",
        { class: "widget-card" },
        spec.title ? h("h4", {}, spec.title) : null,
        kids(),
      );
    case "button": {
      const button = h(
        "button",
        { type: "button", class: "widget-button", "data-action": spec.action },
        spec.label || spec.action,
      );
      button.addEventListener("click", () => press(spec.action, button));
      return button;
    }
    case "input": {
      const id = `widget-field-${++fieldCount}`;
      return h(
        "div",
        { class: "widget-field" },
        h("label", { for: id }, spec.label || spec.name),
        h("input", {
          id,
          type: "text",
          "data-field": spec.name,
          placeholder: spec.placeholder || null,
        }),
      );
    }
    case "select": {
      const id = `widget-field-${++fieldCount}`;
      return h(
        "div",
        { class: "widget-field" },
        h("label", { for: id }, spec.label || spec.name),
        h(
          "select",
          { id, "data-field": spec.name },
          (spec.options || []).map((option) => h("option", { value: option }, option)),
        ),
      );
    }
    default:
      return h("p", { class: "muted" }, `(a widget part this page does not know: ${spec && spec.type})`);
  }
}

// The list of conversations: every root thread, newest activity first.

import { ago, h, replace } from "./dom.js";
import { costText } from "./panels.js";
import { describeStatus, threadName } from "./status.js";

/** Root threads a person started (not children, not delegated tasks), newest first. */
export function rootThreads(records) {
  return records
    .filter((record) => !record.parent && !record.delegated_by)
    .sort((a, b) => String(b.updated_at).localeCompare(String(a.updated_at)));
}

/**
 * Shows `records`' root threads in `list` as links to `#/thread/ID`, `current` marked; shows
 * `placeholder` instead when there are none. `running` says whether a thread id is running.
 */
export function renderSidebar(list, placeholder, records, current, running) {
  const roots = rootThreads(records);
  placeholder.hidden = roots.length > 0;
  list.hidden = roots.length === 0;
  replace(
    list,
    roots.map((record) => {
      const status = describeStatus(record, running(record.id));
      const here = record.id === current;
      return h(
        "li",
        {},
        h(
          "a",
          {
            href: `#/thread/${encodeURIComponent(record.id)}`,
            class: "thread-link",
            "aria-current": here ? "page" : null,
            "data-thread": record.id,
            "data-key": record.id,
          },
          h("span", { class: "thread-name" }, threadName(record)),
          h(
            "span",
            { class: "thread-meta" },
            h("span", { class: `status status-${status.state}` }, status.text),
            h("span", { class: "activity" }, ago(record.updated_at)),
            record.conversation_usage && record.conversation_usage.completions
              ? h("span", { class: "spent" }, costText(record.conversation_usage))
              : null,
          ),
        ),
      );
    }),
  );
}

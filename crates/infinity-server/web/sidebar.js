// The list of conversations: a page of them from `GET /threads`, newest activity first.

import { ago, h, replace } from "./dom.js";
import { costText } from "./panels.js";
import { say, threadName } from "./status.js";
import { PHRASES } from "./status-words.js";

/**
 * Shows `summaries` (`GET /threads`'s, newest first) in `list` as links to `#/thread/ID`,
 * `current` marked; shows `placeholder` instead when there are none. `running` says whether a
 * thread id is running (the page sees it in the event stream; a summary cannot say).
 */
export function renderSidebar(list, placeholder, summaries, current, running) {
  placeholder.hidden = summaries.length > 0;
  list.hidden = summaries.length === 0;
  replace(
    list,
    summaries.map((summary) => {
      const status = running(summary.id) ? say(PHRASES.running) : summary.activity;
      const here = summary.id === current;
      return h(
        "li",
        {},
        h(
          "a",
          {
            href: `#/thread/${encodeURIComponent(summary.id)}`,
            class: "thread-link",
            "aria-current": here ? "page" : null,
            "data-thread": summary.id,
            "data-key": summary.id,
          },
          h("span", { class: "thread-name" }, threadName(summary)),
          h(
            "span",
            { class: "thread-meta" },
            h("span", { class: `status status-${status.state}` }, status.text),
            h("span", { class: "activity" }, ago(summary.updated_at)),
            summary.usage && summary.usage.completions
              ? h("span", { class: "spent" }, costText(summary.usage))
              : null,
          ),
        ),
      );
    }),
  );
}

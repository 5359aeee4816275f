// The `infinity serve` API, with the page's token when it was opened with one.

/** An error the API answered, with its status and the server's message. */
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/**
 * A client of the server that served the page. `token` (from the page's `?access_token=`) goes
 * in `Authorization: Bearer` headers, and in the event stream's URL, as `EventSource` cannot
 * set headers. It stays in memory: nothing stores it.
 */
export function createApi(token) {
  const headers = (extra = {}) =>
    token ? { ...extra, Authorization: `Bearer ${token}` } : extra;

  /** The answer's value and headers. */
  async function send(method, path, body) {
    let response;
    try {
      response = await fetch(path, {
        method,
        headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }),
        body: body === undefined ? undefined : JSON.stringify(body),
        cache: "no-store",
      });
    } catch (error) {
      throw new ApiError(0, `the server did not answer (${error.message})`);
    }
    const text = await response.text();
    let value = null;
    try {
      value = text ? JSON.parse(text) : null;
    } catch {
      value = text;
    }
    if (!response.ok) {
      const message = value && typeof value === "object" && value.error ? value.error : text;
      throw new ApiError(response.status, message || `${method} ${path}: ${response.status}`);
    }
    return { value, headers: response.headers };
  }

  const request = async (method, path, body) => (await send(method, path, body)).value;

  const thread = (id) => `/threads/${encodeURIComponent(id)}`;

  return {
    agents: () => request("GET", "/agents"),
    models: () => request("GET", "/models"),
    /** A page of threads (`{threads, next}`); `query` holds `GET /threads`'s filters. */
    threads: (query = {}) => {
      const params = new URLSearchParams();
      for (const [name, value] of Object.entries(query)) {
        if (value !== undefined && value !== null && value !== "") params.set(name, String(value));
      }
      const text = params.toString();
      return request("GET", text ? `/threads?${text}` : "/threads");
    },
    /** Markdown texts as safe HTML (rendered and sanitized by the server). */
    markdown: async (texts) => (await request("POST", "/markdown", { texts })).html,
    /** The records of a thread and of every thread below it. */
    tree: (id) => request("GET", `${thread(id)}/tree`),
    record: (id) => request("GET", thread(id)),
    history: (id) => request("GET", `${thread(id)}/history`),
    /** The history, and the last event it includes (stream the events after it). */
    historyAndPosition: async (id) => {
      const { value, headers } = await send("GET", `${thread(id)}/history`);
      return { entries: value || [], after: Number(headers.get("Last-Event-ID") || 0) };
    },
    waiting: (id) => request("GET", `${thread(id)}/waiting`),
    sendMessage: (id, text, agent) =>
      request("POST", `${thread(id)}/messages`, agent ? { text, agent } : { text }),
    useModel: (id, model) => request("POST", `${thread(id)}/model`, { model }),
    setBudget: (id, budget) => request("POST", `${thread(id)}/budget`, budget),
    answer: (id, call, selected) =>
      request("POST", `${thread(id)}/choices/${encodeURIComponent(call)}`, { selected }),
    dismiss: (id, call) =>
      request("POST", `${thread(id)}/choices/${encodeURIComponent(call)}`, { dismiss: true }),
    widgetAction: (id, action, values) =>
      request("POST", `${thread(id)}/widget-actions`, { action, values }),
    interrupt: (id, tree) => request("POST", `${thread(id)}/interrupt`, { tree }),
    close: (id, tree) => request("POST", `${thread(id)}/close`, { tree }),
    /** The event stream after event `after` (a reconnect resumes from the last one received). */
    eventsUrl: (id, after) => {
      const query = new URLSearchParams({ after: String(after) });
      if (token) query.set("access_token", token);
      return `${thread(id)}/events?${query}`;
    },
  };
}

/**
 * A tiny RAP tool server (the Reactive Agent Protocol, docs/tool-servers.md) for the tests:
 *
 * - `pick` asks the person a question (a `user_choice` callback: "Which colour?", red or blue,
 *   default red), and when the runtime posts the answer to its `response_url`, it sends the
 *   call's `tool_result`, "picked COLOUR";
 * - `hang` acknowledges and never answers, so a call stays in flight until it is interrupted.
 *
 * It records what the runtime sent: invocations, answers, cancellations and closings.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";

/** An invocation as the runtime POSTs it to the toolset's endpoint. */
export interface Invocation {
  operation: string;
  arguments: unknown;
  id: string;
  callback_url: string;
  group_id: string;
}

export interface ToolServer {
  /** The base URL, as an agent file's `tool_servers` lists it. */
  url: string;
  invocations: Invocation[];
  /** The bodies posted to `response_url`: `{id, selected}`. */
  answers: { id: string; selected: number }[];
  /** The bodies posted to `/cancel_tool_call`: `{thread_id, tool_call_id}`. */
  cancellations: { thread_id: string; tool_call_id: string }[];
  /** The bodies posted to `/close_thread`. */
  closings: { thread_id?: string }[];
  stop(): Promise<void>;
}

const COLOURS = ["red", "blue"];

export async function startToolServer(): Promise<ToolServer> {
  const state = {
    invocations: [] as Invocation[],
    answers: [] as { id: string; selected: number }[],
    cancellations: [] as { thread_id: string; tool_call_id: string }[],
    closings: [] as { thread_id?: string }[],
  };
  let base = "";

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const route = `${request.method} ${request.url}`;
    if (route === "GET /.well-known/rap-toolset") {
      return json(response, {
        name: "picker",
        endpoint: `${base}/invoke`,
        tools: [
          { name: "pick", description: "Asks the user to pick a colour.", inputSchema: { type: "object", additionalProperties: false } },
          { name: "hang", description: "Never answers.", inputSchema: { type: "object", additionalProperties: false } },
        ],
      });
    }
    const body = (await readJson(request)) as Record<string, unknown>;
    switch (route) {
      case "POST /invoke": {
        const call = body as unknown as Invocation;
        state.invocations.push(call);
        json(response, "ok"); // acknowledge at once; the work goes on after
        if (call.operation === "pick") {
          await callback(call.callback_url, {
            type: "user_choice",
            group_id: call.group_id,
            id: call.id,
            prompt: "Which colour?",
            choices: COLOURS,
            default: 0,
            response_url: `${base}/answer`,
          });
        }
        return;
      }
      case "POST /answer": {
        const answer = body as { id: string; selected: number };
        state.answers.push(answer);
        json(response, "ok");
        const call = state.invocations.find((c) => c.id === answer.id);
        if (call !== undefined) {
          await callback(call.callback_url, {
            type: "tool_result",
            group_id: call.group_id,
            id: call.id,
            text: `picked ${COLOURS[answer.selected] ?? "nothing"}`,
          });
        }
        return;
      }
      case "POST /cancel_tool_call":
        state.cancellations.push(body as { thread_id: string; tool_call_id: string });
        return json(response, "ok");
      case "POST /close_thread":
        state.closings.push(body as { thread_id?: string });
        return json(response, "ok");
      default:
        response.writeHead(404).end();
    }
  }

  const server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      if (!response.headersSent) response.writeHead(500).end(String(error));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no address");
  base = `http://127.0.0.1:${address.port}`;
  return {
    url: base,
    ...state,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** POSTs a RAP callback; the runtime answers 200 when it queued it. */
async function callback(url: string, body: unknown): Promise<void> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  if (!response.ok) throw new Error(`callback refused: ${response.status} ${await response.text()}`);
}

function json(response: ServerResponse, body: unknown): void {
  response.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify(body));
}

async function readJson(request: IncomingMessage): Promise<unknown> {
  let text = "";
  for await (const chunk of request) text += String(chunk);
  return text === "" ? {} : JSON.parse(text);
}

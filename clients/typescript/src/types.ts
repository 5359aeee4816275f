/**
 * Names for the types of the API, all taken from the generated `schema.d.ts` (itself made from
 * the OpenAPI document by `npm run generate`): nothing here restates a shape by hand, so a change
 * of the document shows up as a type error in the client and its users.
 */
import type { components, paths } from "./schema.js";

type Schemas = components["schemas"];

/** The generated OpenAPI types, for what the client does not name. */
export type { components, paths, operations } from "./schema.js";

/** 202: the input was kept, and the thread will take it. */
export type Accepted = Schemas["Accepted"];
/** A thread as a list shows it. */
export type ThreadSummary = Schemas["ThreadSummary"];
/** One page of `GET /threads`; `next` is the cursor of the next page, `null` on the last. */
export type ThreadPage = Schemas["ThreadPage"];
/** A thread's whole record. */
export type ThreadRecord = Schemas["ThreadRecord"];
/** One entry of a thread's history, as its model sees it. */
export type HistoryEntry = Schemas["HistoryEntry"];
/** An answer to a question: `{selected: N}` or `{dismiss: true}` (the question's default). */
export type Choice = Schemas["Choice"];
/** The answer given to a question. */
export type Chosen = Schemas["Chosen"];
/** A recurring schedule of a thread. */
export type Schedule = Schemas["Schedule"];
/** 202 for a new schedule: its id and its next occurrences. */
export type ScheduleCreated = Schemas["ScheduleCreated"];
/** A conversation's lifetime budget, as a record keeps it. */
export type Budget = Schemas["Budget"];
/** A conversation's lifetime budget as a person sets it: dollars, tokens or both, neither zero. */
export type NewBudget = Schemas["NewBudget"];
/** What a message does if the thread is busy: `move_on`, `queue`, `interrupt` or `reject`. */
export type WhileBusy = Schemas["WhileBusy"];
/** What would wake a thread and each open thread below it. */
export type WaitingTree = Schemas["WaitingTree"];
/** The models threads may be switched to besides their agent's own. */
export type Models = Schemas["Models"];
/** The default agent and the stored ones. */
export type Agents = Schemas["Agents"];
/** One of a thread's output events (`type` says which). */
export type OutputEvent = Schemas["OutputEvent"];
/**
 * The model called a client tool (`client_tools:` in the agent file): answer with
 * `postToolResult(thread_id, call_id, ...)`, or let `runTools` do it.
 */
export type ClientToolCall = Extract<OutputEvent, { type: "client_tool_call" }>;
/** A question was answered (a person's answer to an approval, or its deadline's). */
export type ChoiceAnswered = Extract<OutputEvent, { type: "choice_answered" }>;
/** The body of `POST /threads/{id}/tool_results/{call}`: a client tool's result. */
export type ToolResult = Schemas["ToolResult"];
/** The event stream's own events: `attached`, `reset` and `reconnect`. */
export type Notice = Schemas["Notice"];

/**
 * What an event stream yields: the thread's events, and the stream's `attached` and `reset`
 * notices. `reconnect` is the stream's business (it waits and resumes) and is not yielded.
 */
export type StreamEvent = Exclude<Schemas["StreamData"], { type: "reconnect" }>;

/** The filters and paging of `GET /threads` (the token travels as a header, not here). */
export type ThreadQuery = Omit<NonNullable<paths["/threads"]["get"]["parameters"]["query"]>, "access_token">;

/**
 * The body of `POST /threads/{id}/schedules`: the arguments of the `schedule_create` tool
 * (`message`, one of `cron` and `rrule`, and optionally `timezone`, `start`, `until`, `count`),
 * as the document describes them.
 */
export type ScheduleArgs = paths["/threads/{id}/schedules"]["post"]["requestBody"]["content"]["application/json"];

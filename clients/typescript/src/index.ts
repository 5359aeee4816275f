/**
 * `@infinity-runtime/client`: a typed client of Infinity's HTTP API (`infinity serve`, a stack's
 * API function). Start with `InfinityClient`; see the README.
 */
export { InfinityClient, type InfinityClientOptions, type History, type TreeOption } from "./client.js";
export { EventStream, MalformedEvent, type StreamOptions } from "./events.js";
export { InfinityError } from "./errors.js";
export { Backoff, retryable, type BackoffOptions } from "./retry.js";
export { ToolRunner, errorText, resultText, type RunToolsOptions, type ToolAnswer, type ToolClient, type ToolHandler } from "./tools.js";
export { SseParser, readSse, type SseMessage } from "./sse.js";
export type * from "./types.js";

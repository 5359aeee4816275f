/**
 * Plain `fetch`, typed by the generated `paths`: a route or method the document does not have,
 * a missing path parameter, a query parameter it does not name or a body of another shape is a
 * compile error, and the answer has the type of the document's success answer.
 *
 * (These few indexed-access types replace `openapi-fetch`, whose deep mapping of every answer
 * type made each type-check of this package take about ten seconds.)
 */
import { InfinityError } from "./errors.js";
import type { paths } from "./schema.js";

/** The methods the client uses. */
export type Method = "get" | "post" | "delete";

/** The operation of `route` with `method`. */
export type Operation<P extends keyof paths, M extends Method> = NonNullable<paths[P][M]>;

/** The methods the document has for `route`. */
export type MethodOf<P extends keyof paths> = {
  [M in Method]: [Operation<P, M>] extends [never] ? never : M;
}[Method];

type Json<R> = R extends { content: { "application/json": infer T } } ? T : undefined;
type Parameters<O> = O extends { parameters: infer P } ? P : never;

/** What a request of operation `O` carries: its path and query parameters, its JSON body. */
export type CallOptions<O> = (Parameters<O> extends { path: infer T } ? { path: T } : { path?: undefined }) &
  (Parameters<O> extends { query?: infer Q } ? { query?: Q } : { query?: undefined }) &
  (O extends { requestBody: { content: { "application/json": infer B } } }
    ? { body: B }
    : O extends { requestBody?: { content: { "application/json": infer B } } }
      ? { body?: B }
      : { body?: undefined });

/** The JSON of operation `O`'s success answer (the 2xx status the document lists). */
export type Success<O> = O extends { responses: infer R } ? Json<R[Extract<keyof R, 200 | 201 | 202>]> : never;

/** Where the API is and how to reach it. */
export interface Http {
  baseUrl: string;
  headers: Record<string, string>;
  fetch: typeof globalThis.fetch;
}

/**
 * Sends one request: the answer's JSON; `InfinityError` when it is not a success. Aborting
 * `signal` abandons it.
 */
export async function request<P extends keyof paths, M extends MethodOf<P>>(
  http: Http,
  method: M,
  route: P,
  options: CallOptions<Operation<P, M>>,
  signal?: AbortSignal,
): Promise<Success<Operation<P, M>>> {
  return (await exchange(http, method, route, options, signal)).data;
}

/** Sends one request: the answer's JSON and the answer itself (for its headers). */
export async function exchange<P extends keyof paths, M extends MethodOf<P>>(
  http: Http,
  method: M,
  route: P,
  options: CallOptions<Operation<P, M>>,
  signal?: AbortSignal,
): Promise<{ data: Success<Operation<P, M>>; response: Response }> {
  const { path, query, body } = options as {
    path?: Record<string, string>;
    query?: Record<string, unknown>;
    body?: unknown;
  };
  let url = http.baseUrl + route.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(path?.[name] ?? ""));
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(query ?? {})) {
    if (value !== undefined && value !== null) search.set(name, String(value));
  }
  if (search.toString() !== "") url += `?${search.toString()}`;
  const headers: Record<string, string> = { ...http.headers, Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await http.fetch(url, {
    method: method.toUpperCase(),
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
  });
  if (!response.ok) throw await InfinityError.fromResponse(response);
  const text = await response.text();
  return { data: (text === "" ? undefined : JSON.parse(text)) as Success<Operation<P, M>>, response };
}

/**
 * An answer of the API that is not a success: its HTTP status and the message of the server's
 * `{"error": "..."}` body (or the body's text, when a proxy answered something else).
 *
 * The message names what was wrong with the request when it was, e.g. `no thread nobody` (404)
 * or `` `limit` must be a whole number from 1 to 500, not `0` `` (400).
 */
export class InfinityError extends Error {
  override readonly name = "InfinityError";

  constructor(
    /** The HTTP status, e.g. 400, 404 or 409. */
    readonly status: number,
    message: string,
    /** The answer's `Retry-After` in milliseconds from when it came (429, 503), if it had one. */
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }

  /** The error of a failed `response`, read from its body. */
  static async fromResponse(response: Response): Promise<InfinityError> {
    const text = await response.text().catch(() => "");
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = text;
    }
    return InfinityError.fromBody(response.status, parsed, retryAfterMs(response.headers.get("Retry-After")));
  }

  /** The error of a failed answer with `status` whose body was already read (`body`). */
  static fromBody(status: number, body: unknown, retryAfter?: number): InfinityError {
    if (typeof body === "object" && body !== null && "error" in body && typeof body.error === "string") {
      return new InfinityError(status, body.error, retryAfter);
    }
    const text = typeof body === "string" ? body.trim() : "";
    return new InfinityError(status, text === "" ? `HTTP ${status}` : text, retryAfter);
  }
}

/**
 * A `Retry-After` header in milliseconds from now: a number of seconds, or an HTTP date;
 * `undefined` when absent or not understood.
 */
export function retryAfterMs(value: string | null): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const when = Date.parse(text);
  return Number.isNaN(when) ? undefined : Math.max(0, when - Date.now());
}

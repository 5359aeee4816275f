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
    return InfinityError.fromBody(response.status, parsed);
  }

  /** The error of a failed answer with `status` whose body was already read (`body`). */
  static fromBody(status: number, body: unknown): InfinityError {
    if (typeof body === "object" && body !== null && "error" in body && typeof body.error === "string") {
      return new InfinityError(status, body.error);
    }
    const text = typeof body === "string" ? body.trim() : "";
    return new InfinityError(status, text === "" ? `HTTP ${status}` : text);
  }
}

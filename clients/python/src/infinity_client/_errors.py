"""The one exception the client raises for answers the server refused."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime

import httpx


class InfinityError(Exception):
    """The server answered with an error status.

    ``status`` is the HTTP status and ``message`` the server's own words: every error answer of
    the API is ``{"error": "..."}`` naming what was wrong. When the body is not that shape (a
    proxy in between, say), ``message`` is the body's text, or the reason phrase when empty.
    ``retry_after`` is the answer's ``Retry-After`` in seconds (429, 503), when it had one.
    """

    def __init__(self, status: int, message: str, retry_after: float | None = None) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message
        self.retry_after = retry_after

    @classmethod
    def from_response(cls, response: httpx.Response) -> InfinityError:
        """Builds the error from a response whose body has been read."""
        text = response.text
        try:
            body = json.loads(text)
        except ValueError:
            body = None
        if isinstance(body, dict) and isinstance(body.get("error"), str):
            message = body["error"]
        else:
            message = text.strip() or response.reason_phrase
        return cls(response.status_code, message, retry_after(response.headers.get("Retry-After")))


def retry_after(value: str | None) -> float | None:
    """A ``Retry-After`` header in seconds from now: a number of seconds, or an HTTP date;
    ``None`` when absent or not understood."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def raise_for_status(response: httpx.Response) -> None:
    """Raises :class:`InfinityError` for a 4xx or 5xx response (its body must be read)."""
    if response.status_code >= 400:
        raise InfinityError.from_response(response)

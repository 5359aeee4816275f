"""The one exception the client raises for answers the server refused."""

from __future__ import annotations

import json

import httpx


class InfinityError(Exception):
    """The server answered with an error status.

    ``status`` is the HTTP status and ``message`` the server's own words: every error answer of
    the API is ``{"error": "..."}`` naming what was wrong. When the body is not that shape (a
    proxy in between, say), ``message`` is the body's text, or the reason phrase when empty.
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message

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
        return cls(response.status_code, message)


def raise_for_status(response: httpx.Response) -> None:
    """Raises :class:`InfinityError` for a 4xx or 5xx response (its body must be read)."""
    if response.status_code >= 400:
        raise InfinityError.from_response(response)

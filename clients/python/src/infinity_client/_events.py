"""A thread's event stream (``GET /threads/{id}/events``) that resumes by itself.

The server numbers a thread's events 1, 2, 3, ... and sends each number as the SSE ``id``. A
client that saw up to ``N`` reconnects with ``Last-Event-ID: N`` and gets exactly what it
missed, each event once (docs/api.md, "Resuming"). The streams here do that for the caller:
they remember the last id and reconnect with it when the connection drops, when the server
ends the stream, or when it says ``reconnect`` (the stack's API function answers each request
whole and ends every stream so). The stream's own notices (``attached``, ``reset``,
``reconnect``) are yielded too, so the caller can act on them: ``reset`` means events were
lost and the history should be reloaded.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterator
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass
from typing import Any, TypeAlias

import anyio
import httpx
from httpx_sse import EventSource, ServerSentEvent
from pydantic import BaseModel, ValidationError

from . import models
from ._errors import InfinityError
from ._retry import Backoff


@dataclass(frozen=True)
class UnknownEvent:
    """An event whose ``data`` the generated models do not describe.

    A newer server may send event types this client does not know yet; they are handed over
    rather than ending the stream. ``error`` says why the data did not validate.
    """

    type: str
    data: Any
    error: str


StreamEvent: TypeAlias = BaseModel | UnknownEvent
"""What an event stream yields: a variant of :class:`models.OutputEvent` (the thread's events,
such as ``OutputEventAssistantText``), a variant of :class:`models.Notice` (the stream's own:
``NoticeAttached``, ``NoticeReset``, ``NoticeReconnect``), or an :class:`UnknownEvent`. Each
has a ``type``, the SSE event's name."""


def parse_event(sse: ServerSentEvent) -> StreamEvent:
    """The typed event of one SSE message (its ``data`` checked against ``StreamData``)."""
    try:
        data = models.StreamData.model_validate_json(sse.data).root
    except ValidationError as error:
        try:
            raw: Any = json.loads(sse.data)
        except ValueError:
            raw = sse.data
        return UnknownEvent(type=sse.event, data=raw, error=str(error))
    # StreamData is OutputEvent | Notice, each a discriminated union of its own.
    return data.root


class _Position:
    """Where a stream stands, and how long to wait before coming back.

    Shared by the sync and async streams so that both resume the same way. Failed connections
    wait as ``backoff`` says (``backoff.first`` is the plain retry delay, which the server's
    ``retry:`` field replaces).
    """

    def __init__(self, after: int | str | None, backoff: Backoff) -> None:
        self.last_event_id: int | str | None = after
        self.backoff = backoff
        self._asked_delay: float | None = None
        self._failure_delay: float | None = None

    def headers(self) -> dict[str, str]:
        """The headers of the next request: the position, when there is one."""
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-store"}
        if self.last_event_id is not None:
            headers["Last-Event-ID"] = str(self.last_event_id)
        return headers

    def take(self, sse: ServerSentEvent) -> StreamEvent | None:
        """Notes the message's id and retry, and types it (``None``: nothing to hand over)."""
        # httpx-sse carries the last id over to messages without one; a new connection starts
        # from "" again, which must not forget the position. A kept event's id is its number;
        # one shown before its slice committed has `N.B.D`, which the server checks on resume.
        if sse.id:
            self.last_event_id = int(sse.id) if sse.id.isdigit() else sse.id
        if sse.retry is not None:
            self.backoff.first = sse.retry / 1000
        if not sse.data:
            # A keep-alive comment: httpx-sse dispatches it once an id was seen, where the SSE
            # spec dispatches nothing for a message without data.
            return None
        event = parse_event(sse)
        if isinstance(event, models.NoticeReconnect):
            self._asked_delay = event.after_ms / 1000
        return event

    def connected(self) -> None:
        """A connection was accepted: failures so far no longer count."""
        self.backoff.succeeded()

    def failed(self, error: Exception) -> None:
        """Counts a failed or dropped connection; re-raises ``error`` when it is final (a
        refusal such as 400 or 401) or the backoff's limit is reached."""
        self._failure_delay = self.backoff.failed(error)

    def delay(self) -> float:
        """How long to wait before the next connection.

        What the server asked for with ``reconnect`` wins; after a failure, the backoff's wait
        (doubling with each failure in a row, with jitter; a ``Retry-After`` as it is). A
        stream that simply ended comes back after the plain retry delay.
        """
        asked, self._asked_delay = self._asked_delay, None
        failure, self._failure_delay = self._failure_delay, None
        if asked is not None:
            return asked
        if failure is not None:
            return failure
        return self.backoff.first


class EventStream(AbstractContextManager["EventStream"]):
    """The events of one thread, as an iterator that never misses or repeats one.

    Made by :meth:`Client.events`. It connects on the first ``next()``, and iterates until
    closed (a thread's stream has no end: break out, or ``close()`` it; using it in a ``with``
    block does so). ``last_event_id`` is the position reached, to resume from later, in this
    process or another one, with ``client.events(thread, after=stream.last_event_id)``.
    """

    def __init__(
        self,
        open_stream: Callable[[dict[str, str]], AbstractContextManager[httpx.Response]],
        position: _Position,
    ) -> None:
        self._open = open_stream
        self._position = position
        self._events = self._run()
        self.connections = 0
        """How many connections the stream has opened so far (reconnections included)."""

    @property
    def last_event_id(self) -> int | str | None:
        """The SSE id of the last event received, to resume after (``None`` before any position
        is known): a kept event's number, or ``"N.B.D"`` for one shown before its slice committed
        (the server checks, on resume, that the copies the client has are the ones it kept)."""
        return self._position.last_event_id

    def __iter__(self) -> Iterator[StreamEvent]:
        return self

    def __next__(self) -> StreamEvent:
        return next(self._events)

    def close(self) -> None:
        """Closes the connection; the iteration ends."""
        self._events.close()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _run(self) -> Generator[StreamEvent, None, None]:
        position = self._position
        while True:
            try:
                self.connections += 1
                with self._open(position.headers()) as response:
                    if response.status_code == 200:
                        position.connected()
                        for sse in EventSource(response).iter_sse():
                            if (event := position.take(sse)) is not None:
                                yield event
                    else:
                        response.read()
                        position.failed(InfinityError.from_response(response))
            except httpx.TransportError as error:
                # Dropped, timed out, refused: come back where the stream stood.
                position.failed(error)
            time.sleep(position.delay())


class AsyncEventStream(AbstractAsyncContextManager["AsyncEventStream"]):
    """The async twin of :class:`EventStream`, made by :meth:`AsyncClient.events`.

    Use it with ``async with``, or ``await stream.aclose()`` when done, so the connection is
    closed at once rather than when the stream is garbage collected.
    """

    def __init__(
        self,
        open_stream: Callable[[dict[str, str]], AbstractAsyncContextManager[httpx.Response]],
        position: _Position,
    ) -> None:
        self._open = open_stream
        self._position = position
        self._events = self._run()
        self.connections = 0
        """How many connections the stream has opened so far (reconnections included)."""

    @property
    def last_event_id(self) -> int | str | None:
        """The SSE id of the last event received, to resume after (``None`` before any position
        is known): a kept event's number, or ``"N.B.D"`` for one shown before its slice committed
        (the server checks, on resume, that the copies the client has are the ones it kept)."""
        return self._position.last_event_id

    def __aiter__(self) -> AsyncIterator[StreamEvent]:
        return self

    async def __anext__(self) -> StreamEvent:
        return await self._events.__anext__()

    async def aclose(self) -> None:
        """Closes the connection; the iteration ends."""
        await self._events.aclose()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _run(self) -> AsyncGenerator[StreamEvent, None]:
        position = self._position
        while True:
            try:
                self.connections += 1
                async with self._open(position.headers()) as response:
                    if response.status_code == 200:
                        position.connected()
                        async for sse in EventSource(response).aiter_sse():
                            if (event := position.take(sse)) is not None:
                                yield event
                    else:
                        await response.aread()
                        position.failed(InfinityError.from_response(response))
            except httpx.TransportError as error:
                position.failed(error)
            await anyio.sleep(position.delay())

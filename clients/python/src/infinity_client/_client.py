"""``Client`` and ``AsyncClient``: the API's thread routes as methods.

Each route is described once, as a :class:`_Call` in ``_routes.py``; the two clients only
differ in how they send it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from datetime import datetime
from typing import TypeVar

import anyio
import httpx

from ._errors import raise_for_status
from ._events import AsyncEventStream, EventStream, _Position
from ._retry import Backoff
from ._routes import History, _Call, _path, _Routes
from ._tools import StopFlag, ToolAnswer, ToolHandler, _ToolRunner
from .models import (
    Accepted,
    Agents,
    Chosen,
    Models,
    Schedule,
    ScheduleCreated,
    ThreadKind,
    ThreadPage,
    ThreadRecord,
    ThreadStatus,
    ThreadSummary,
    WaitingTree,
    WhileBusy,
)

T = TypeVar("T")

DEFAULT_BASE_URL = "http://127.0.0.1:8700"
"""Where ``infinity serve`` listens unless told otherwise."""

#: Ordinary requests answer at once; under load a few seconds can pass.
DEFAULT_TIMEOUT = httpx.Timeout(30.0)
#: A live stream gets a keep-alive comment every 15 s: a minute of silence means it is dead.
STREAM_TIMEOUT = httpx.Timeout(30.0, read=60.0)


def _position(
    after: int | str | None,
    retry_delay: float,
    max_delay: float,
    max_retries: int | None,
    retry_for: float | None,
) -> _Position:
    backoff = Backoff(first=retry_delay, most=max_delay, max_failures=max_retries, budget=retry_for)
    return _Position(after, backoff)


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


class Client:
    """A synchronous client of an Infinity server (``infinity serve`` or a stack's API).

    ``base_url`` is where the server listens; ``token`` is its bearer token, needed anywhere
    but on a loopback address. Every method raises :class:`InfinityError` when the server
    refuses, and returns the generated model of the answer. Use it as a context manager, or
    call :meth:`close`, to release its connections.
    """

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        *,
        token: str | None = None,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
    ) -> None:
        self._http = httpx.Client(base_url=base_url, headers=_headers(token), timeout=timeout)
        # For run_tools, which follows streams with an AsyncClient of its own.
        self._settings = (base_url, token, timeout)

    def close(self) -> None:
        """Closes the client's connections (not a thread: see :meth:`close_thread`)."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _send(self, call: _Call[T]) -> T:
        response = self._http.request(call.method, call.path, params=call.params, json=call.body)
        raise_for_status(response)
        return call.read(response)

    def send_message(
        self,
        thread_id: str,
        text: str,
        *,
        agent: str | None = None,
        while_busy: WhileBusy | str | None = None,
    ) -> Accepted:
        """Posts a person's message to a thread; the first one creates the thread.

        ``agent`` (``NAME`` or ``NAME@VERSION``) picks the agent of a new conversation; without
        it the server's default runs it. ``while_busy`` (``move_on``, ``queue``, ``interrupt``
        or ``reject``) says what the message does if the thread is busy, instead of what its
        agent says; under ``reject`` a busy thread answers 409 (:class:`InfinityError`). The
        answer (202) means the message is kept: the reply comes as events.
        """
        return self._send(_Routes.send_message(thread_id, text, agent, while_busy))

    def list_threads(
        self,
        *,
        roots: bool | None = None,
        kind: ThreadKind | str | None = None,
        status: ThreadStatus | str | None = None,
        agent: str | None = None,
        title: str | None = None,
        updated_since: datetime | str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> ThreadPage:
        """One page of threads, newest activity first (``page.next``: the next ``cursor``).

        The filters are the server's (docs/api.md, "Lists of threads"): ``title`` matches the
        title, or the id of a thread without one, ignoring case.
        """
        return self._send(
            _Routes.list_threads(
                roots=roots,
                kind=kind,
                status=status,
                agent=agent,
                title=title,
                updated_since=updated_since,
                cursor=cursor,
                limit=limit,
            )
        )

    def iter_threads(
        self,
        *,
        roots: bool | None = None,
        kind: ThreadKind | str | None = None,
        status: ThreadStatus | str | None = None,
        agent: str | None = None,
        title: str | None = None,
        updated_since: datetime | str | None = None,
        limit: int | None = None,
    ) -> Iterator[ThreadSummary]:
        """Every thread the filters select, page after page (``limit`` is the page size)."""
        cursor: str | None = None
        while True:
            page = self.list_threads(
                roots=roots,
                kind=kind,
                status=status,
                agent=agent,
                title=title,
                updated_since=updated_since,
                cursor=cursor,
                limit=limit,
            )
            yield from page.threads
            if page.next is None:
                return
            cursor = page.next

    def get_thread(self, thread_id: str) -> ThreadRecord:
        """The thread's whole record (404 for an unknown thread)."""
        return self._send(_Routes.get_thread(thread_id))

    def history(self, thread_id: str) -> History:
        """The thread's history as its model sees it, and the last event it includes."""
        return self._send(_Routes.history(thread_id))

    def events(
        self,
        thread_id: str,
        *,
        after: int | str | None = None,
        retry_delay: float = 0.5,
        max_delay: float = 10.0,
        max_retries: int | None = 10,
        retry_for: float | None = None,
    ) -> EventStream:
        """The thread's events as they happen, resuming by itself after a disconnect.

        With ``after=N`` the stream starts after event ``N`` (``after=0``: from the thread's
        first event, also for a thread not created yet), or after the event whose SSE id it is
        (a stream's ``last_event_id``). Without it the server first sends
        the thread's views and open questions, then ``attached`` with the position it starts
        from. The stream reconnects with the last event id it saw whenever the connection
        ends, waiting ``retry_delay`` seconds (or what the server asks for). After a failure
        (no connection, a dropped one, 408, 429 or 5xx) the wait doubles with each failure in
        a row up to ``max_delay``, less up to half at random, or is the answer's
        ``Retry-After``; the error is raised after ``max_retries`` failures in a row, or once
        the next attempt would start more than ``retry_for`` seconds after the first failure
        in a row (``None``: no such limit). Any other 4xx is raised at once.
        """
        path = _path("/threads/{}/events", thread_id)
        return EventStream(
            lambda headers: self._http.stream("GET", path, headers=headers, timeout=STREAM_TIMEOUT),
            _position(after, retry_delay, max_delay, max_retries, retry_for),
        )

    def answer_choice(
        self, thread_id: str, call_id: str, selected: int | None = None, *, dismiss: bool = False
    ) -> Chosen:
        """Answers the question a tool call asked: the index ``selected``, or ``dismiss=True``
        for the question's default. An approval (a call waiting for a person's say, from the
        agent file's ``approvals:``) is such a question: ``0`` runs the call, ``dismiss=True``
        declines it."""
        return self._send(_Routes.answer_choice(thread_id, call_id, selected, dismiss))

    def post_tool_result(
        self, thread_id: str, call_id: str, text: str, *, is_error: bool = False
    ) -> Accepted:
        """Answers a call of a client tool (a ``client_tool_call`` event) with its result.

        ``text`` is what the model reads (JSON or any text); ``is_error=True`` says the call
        failed. Raises :class:`InfinityError` with 409 when the call waits for no result (it
        has one already, is past its deadline, was cancelled, or is no client tool's call).
        Two answers to the same call at once: the runtime keeps the first.
        """
        return self._send(_Routes.post_tool_result(thread_id, call_id, text, is_error))

    def run_tools(
        self,
        thread_id: str,
        handlers: Mapping[str, ToolHandler],
        *,
        stop: StopFlag | None = None,
        follow_children: bool = True,
    ) -> list[ToolAnswer]:
        """Runs the client tools of a thread: answers each call of a tool in ``handlers`` with
        what its handler returns, until ``stop`` is set or the thread closes.

        ``handlers`` maps tool names to functions of the call's arguments (a ``dict``). A
        ``str`` result is sent as it is, anything else as JSON; an exception becomes an error
        result naming it. Handlers run in worker threads, several at once when calls come
        together; :func:`current_tool_call` gives the call a handler is answering.

        The stream starts without a position, so the calls still waiting (made while no
        runner ran) come first. Each call's handler runs once per runner; a call answered
        elsewhere meanwhile (409) is skipped. Calls of tools without a handler are left for
        another application. With ``follow_children`` the threads spawned below are followed
        too. ``stop`` is a ``threading.Event`` (anything with ``is_set()``); blocks until it
        is set, or the thread closes, and returns the results posted. The handler of a call
        still unanswered when the application stopped runs again when it starts again: make
        handlers with side effects idempotent.

        Every request it makes (the streams, the thread lookups, the results) is tried again
        after a connection error, 408, 429 or 5xx, waiting 0.25 s, then twice as long each
        time up to 5 s (less up to half at random), or the answer's ``Retry-After``; no
        attempt starts more than 60 s after the first failure in a row. The first error it
        cannot go past (another 4xx, or a minute of failures) is raised. A result being posted
        when the run ends (``stop``, the thread closing, an error) goes on for up to 10 s more.

        It runs an event loop of its own (with an :class:`AsyncClient` like this client): from
        async code, use :meth:`AsyncClient.run_tools` instead.
        """
        base_url, token, timeout = self._settings

        async def run() -> list[ToolAnswer]:
            async with AsyncClient(base_url, token=token, timeout=timeout) as client:
                return await client.run_tools(
                    thread_id, handlers, stop=stop, follow_children=follow_children
                )

        return anyio.run(run)

    def interrupt(self, thread_id: str, *, tree: bool = False) -> Accepted:
        """Cancels the thread's calls in flight (``tree``: its descendants' too)."""
        return self._send(_Routes.interrupt(thread_id, tree))

    def close_thread(self, thread_id: str, *, tree: bool = False) -> Accepted:
        """Closes the thread; ``tree=True`` is needed when it has open children, which close too."""
        return self._send(_Routes.close_thread(thread_id, tree))

    def schedules(self, thread_id: str) -> list[Schedule]:
        """The thread's recurring schedules."""
        return self._send(_Routes.schedules(thread_id))

    def create_schedule(
        self,
        thread_id: str,
        message: str,
        *,
        cron: str | None = None,
        rrule: str | None = None,
        timezone: str | None = None,
        start: str | None = None,
        until: str | None = None,
        count: int | None = None,
    ) -> ScheduleCreated:
        """Creates a recurring schedule: at each occurrence the thread receives ``message``.

        Give exactly one of ``cron`` (five fields) or ``rrule`` (RFC 5545), read in
        ``timezone`` (IANA, default UTC); ``start`` and ``until`` are local times, ``count``
        the most firings. These are the ``schedule_create`` tool's arguments.
        """
        return self._send(
            _Routes.create_schedule(
                thread_id,
                dict(
                    message=message,
                    cron=cron,
                    rrule=rrule,
                    timezone=timezone,
                    start=start,
                    until=until,
                    count=count,
                ),
            )
        )

    def delete_schedule(self, thread_id: str, schedule_id: str) -> Accepted:
        """Deletes one of the thread's schedules (404 if it has none by that id)."""
        return self._send(_Routes.delete_schedule(thread_id, schedule_id))

    def use_model(self, thread_id: str, model: str | None) -> Accepted:
        """Switches the thread's model (``PROVIDER:MODEL``, one :meth:`models` allows), from
        its next completion on; ``None`` goes back to the agent's own."""
        return self._send(_Routes.use_model(thread_id, model))

    def use_agent(self, thread_id: str, agent: str) -> Accepted:
        """Moves the thread to another version of its agent (``NAME`` or ``NAME@VERSION``)."""
        return self._send(_Routes.use_agent(thread_id, agent))

    def set_budget(
        self, thread_id: str, *, usd: float | None = None, tokens: int | None = None
    ) -> Accepted:
        """Sets the lifetime budget of the thread's conversation (what is left out stays)."""
        return self._send(_Routes.set_budget(thread_id, usd, tokens))

    def waiting(self, thread_id: str) -> WaitingTree:
        """What would wake the thread and each open thread below it."""
        return self._send(_Routes.waiting(thread_id))

    def tree(self, thread_id: str) -> list[ThreadRecord]:
        """The records of the thread and every thread below it, the thread first."""
        return self._send(_Routes.tree(thread_id))

    def models(self) -> Models:
        """The models threads may be switched to besides their agent's own."""
        return self._send(_Routes.models())

    def agents(self) -> Agents:
        """The default agent and the stored ones."""
        return self._send(_Routes.agents())


class AsyncClient:
    """The asynchronous twin of :class:`Client`: the same methods, awaited.

    Use it with ``async with``, or ``await client.aclose()``.
    """

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        *,
        token: str | None = None,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
    ) -> None:
        self._http = httpx.AsyncClient(base_url=base_url, headers=_headers(token), timeout=timeout)

    async def aclose(self) -> None:
        """Closes the client's connections."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _send(self, call: _Call[T]) -> T:
        response = await self._http.request(
            call.method, call.path, params=call.params, json=call.body
        )
        raise_for_status(response)
        return call.read(response)

    async def send_message(
        self,
        thread_id: str,
        text: str,
        *,
        agent: str | None = None,
        while_busy: WhileBusy | str | None = None,
    ) -> Accepted:
        """See :meth:`Client.send_message`."""
        return await self._send(_Routes.send_message(thread_id, text, agent, while_busy))

    async def list_threads(
        self,
        *,
        roots: bool | None = None,
        kind: ThreadKind | str | None = None,
        status: ThreadStatus | str | None = None,
        agent: str | None = None,
        title: str | None = None,
        updated_since: datetime | str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> ThreadPage:
        """See :meth:`Client.list_threads`."""
        return await self._send(
            _Routes.list_threads(
                roots=roots,
                kind=kind,
                status=status,
                agent=agent,
                title=title,
                updated_since=updated_since,
                cursor=cursor,
                limit=limit,
            )
        )

    async def iter_threads(
        self,
        *,
        roots: bool | None = None,
        kind: ThreadKind | str | None = None,
        status: ThreadStatus | str | None = None,
        agent: str | None = None,
        title: str | None = None,
        updated_since: datetime | str | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[ThreadSummary]:
        """See :meth:`Client.iter_threads`."""
        cursor: str | None = None
        while True:
            page = await self.list_threads(
                roots=roots,
                kind=kind,
                status=status,
                agent=agent,
                title=title,
                updated_since=updated_since,
                cursor=cursor,
                limit=limit,
            )
            for thread in page.threads:
                yield thread
            if page.next is None:
                return
            cursor = page.next

    async def get_thread(self, thread_id: str) -> ThreadRecord:
        """See :meth:`Client.get_thread`."""
        return await self._send(_Routes.get_thread(thread_id))

    async def history(self, thread_id: str) -> History:
        """See :meth:`Client.history`."""
        return await self._send(_Routes.history(thread_id))

    def events(
        self,
        thread_id: str,
        *,
        after: int | str | None = None,
        retry_delay: float = 0.5,
        max_delay: float = 10.0,
        max_retries: int | None = 10,
        retry_for: float | None = None,
    ) -> AsyncEventStream:
        """See :meth:`Client.events`; iterate with ``async for``."""
        path = _path("/threads/{}/events", thread_id)
        return AsyncEventStream(
            lambda headers: self._http.stream("GET", path, headers=headers, timeout=STREAM_TIMEOUT),
            _position(after, retry_delay, max_delay, max_retries, retry_for),
        )

    async def answer_choice(
        self, thread_id: str, call_id: str, selected: int | None = None, *, dismiss: bool = False
    ) -> Chosen:
        """See :meth:`Client.answer_choice`."""
        return await self._send(_Routes.answer_choice(thread_id, call_id, selected, dismiss))

    async def post_tool_result(
        self, thread_id: str, call_id: str, text: str, *, is_error: bool = False
    ) -> Accepted:
        """See :meth:`Client.post_tool_result`."""
        return await self._send(_Routes.post_tool_result(thread_id, call_id, text, is_error))

    async def run_tools(
        self,
        thread_id: str,
        handlers: Mapping[str, ToolHandler],
        *,
        stop: StopFlag | None = None,
        follow_children: bool = True,
    ) -> list[ToolAnswer]:
        """See :meth:`Client.run_tools`; returns when ``stop`` is set or the thread closes.

        A handler may be ``async def`` (awaited in the loop, cancelled when the run ends) or
        a plain function (run in a worker thread). ``stop`` is an ``asyncio.Event`` or
        ``anyio.Event`` (anything with ``is_set()``); cancelling the task stops it as well.
        """
        runner = _ToolRunner(self, thread_id, handlers, stop=stop, follow_children=follow_children)
        return await runner.run()

    async def interrupt(self, thread_id: str, *, tree: bool = False) -> Accepted:
        """See :meth:`Client.interrupt`."""
        return await self._send(_Routes.interrupt(thread_id, tree))

    async def close_thread(self, thread_id: str, *, tree: bool = False) -> Accepted:
        """See :meth:`Client.close_thread`."""
        return await self._send(_Routes.close_thread(thread_id, tree))

    async def schedules(self, thread_id: str) -> list[Schedule]:
        """See :meth:`Client.schedules`."""
        return await self._send(_Routes.schedules(thread_id))

    async def create_schedule(
        self,
        thread_id: str,
        message: str,
        *,
        cron: str | None = None,
        rrule: str | None = None,
        timezone: str | None = None,
        start: str | None = None,
        until: str | None = None,
        count: int | None = None,
    ) -> ScheduleCreated:
        """See :meth:`Client.create_schedule`."""
        return await self._send(
            _Routes.create_schedule(
                thread_id,
                dict(
                    message=message,
                    cron=cron,
                    rrule=rrule,
                    timezone=timezone,
                    start=start,
                    until=until,
                    count=count,
                ),
            )
        )

    async def delete_schedule(self, thread_id: str, schedule_id: str) -> Accepted:
        """See :meth:`Client.delete_schedule`."""
        return await self._send(_Routes.delete_schedule(thread_id, schedule_id))

    async def use_model(self, thread_id: str, model: str | None) -> Accepted:
        """See :meth:`Client.use_model`."""
        return await self._send(_Routes.use_model(thread_id, model))

    async def use_agent(self, thread_id: str, agent: str) -> Accepted:
        """See :meth:`Client.use_agent`."""
        return await self._send(_Routes.use_agent(thread_id, agent))

    async def set_budget(
        self, thread_id: str, *, usd: float | None = None, tokens: int | None = None
    ) -> Accepted:
        """See :meth:`Client.set_budget`."""
        return await self._send(_Routes.set_budget(thread_id, usd, tokens))

    async def waiting(self, thread_id: str) -> WaitingTree:
        """See :meth:`Client.waiting`."""
        return await self._send(_Routes.waiting(thread_id))

    async def tree(self, thread_id: str) -> list[ThreadRecord]:
        """See :meth:`Client.tree`."""
        return await self._send(_Routes.tree(thread_id))

    async def models(self) -> Models:
        """See :meth:`Client.models`."""
        return await self._send(_Routes.models())

    async def agents(self) -> Agents:
        """See :meth:`Client.agents`."""
        return await self._send(_Routes.agents())

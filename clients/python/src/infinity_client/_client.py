"""``Client`` and ``AsyncClient``: the API's thread routes as methods.

Each route is described once, as a :class:`_Call` (method, path, query, body, and how to read
the answer); the two clients only differ in how they send it. Request bodies are built with
the generated models where the document describes them, and every answer is validated
against the generated models, so a server that drifts from its document is noticed here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import anyio
import httpx
from pydantic import BaseModel, TypeAdapter

from ._errors import raise_for_status
from ._events import AsyncEventStream, EventStream, _Position
from ._tools import StopFlag, ToolAnswer, ToolHandler, _ToolRunner
from .models import (
    Accepted,
    Agents,
    Choice,
    Chosen,
    HistoryEntry,
    Message,
    Models,
    NewBudget,
    Schedule,
    ScheduleCreated,
    ThreadKind,
    ThreadPage,
    WhileBusy,
    ThreadRecord,
    ThreadStatus,
    ThreadSummary,
    ToolResult,
    TreeOption,
    UseAgent,
    UseModel,
    WaitingTree,
)

T = TypeVar("T")

DEFAULT_BASE_URL = "http://127.0.0.1:8700"
"""Where ``infinity serve`` listens unless told otherwise."""

#: Ordinary requests answer at once; under load a few seconds can pass.
DEFAULT_TIMEOUT = httpx.Timeout(30.0)
#: A live stream gets a keep-alive comment every 15 s: a minute of silence means it is dead.
STREAM_TIMEOUT = httpx.Timeout(30.0, read=60.0)


@dataclass(frozen=True)
class History:
    """A thread's history, and the position of the last event it includes.

    Stream with ``client.events(thread, after=history.last_event_id)`` to follow the thread
    from there without missing or repeating anything (docs/api.md: what the web app does).
    """

    entries: list[HistoryEntry]
    last_event_id: int | None


@dataclass(frozen=True)
class _Call(Generic[T]):
    """One request to the API, and how to read its answer."""

    method: str
    path: str
    read: Callable[[httpx.Response], T]
    params: dict[str, Any] | None = None
    body: Any = None
    """The JSON body, or ``None`` for a request without one."""


def _path(template: str, *segments: str) -> str:
    """``template`` with each ``{}`` replaced by a URL-escaped segment."""
    return template.format(*(quote(s, safe="") for s in segments))


def _model(model: type[BaseModel]) -> Callable[[httpx.Response], Any]:
    return lambda response: model.model_validate_json(response.content)


def _list_of(model: type[BaseModel]) -> Callable[[httpx.Response], Any]:
    adapter = TypeAdapter(list[model])  # type: ignore[valid-type]
    return lambda response: adapter.validate_json(response.content)


def _history(response: httpx.Response) -> History:
    entries = TypeAdapter(list[HistoryEntry]).validate_json(response.content)
    position = response.headers.get("Last-Event-ID", "").strip()
    return History(entries=entries, last_event_id=int(position) if position.isdigit() else None)


def _body(model: BaseModel) -> Any:
    """The JSON of a request model: the fields that were set, defaults left to the server."""
    return model.model_dump(mode="json", exclude_unset=True, by_alias=True)


def _query(**params: Any) -> dict[str, Any]:
    """The query parameters that were given, as the server spells them."""
    query: dict[str, Any] = {}
    for name, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, datetime):
            value = value.isoformat()
        elif isinstance(value, Enum):
            value = value.value
        query[name] = value
    return query


class _Routes:
    """The thread routes as :class:`_Call` values, shared by both clients."""

    @staticmethod
    def send_message(
        thread_id: str, text: str, agent: str | None, while_busy: WhileBusy | str | None
    ) -> _Call[Accepted]:
        fields: dict[str, Any] = {"text": text}
        if agent is not None:
            fields["agent"] = agent
        if while_busy is not None:
            fields["while_busy"] = WhileBusy(while_busy)
        message = Message(**fields)
        return _Call(
            "POST",
            _path("/threads/{}/messages", thread_id),
            _model(Accepted),
            body=_body(message),
        )

    @staticmethod
    def list_threads(**filters: Any) -> _Call[ThreadPage]:
        return _Call("GET", "/threads", _model(ThreadPage), params=_query(**filters))

    @staticmethod
    def get_thread(thread_id: str) -> _Call[ThreadRecord]:
        return _Call("GET", _path("/threads/{}", thread_id), _model(ThreadRecord))

    @staticmethod
    def history(thread_id: str) -> _Call[History]:
        return _Call("GET", _path("/threads/{}/history", thread_id), _history)

    @staticmethod
    def answer_choice(
        thread_id: str, call_id: str, selected: int | None, dismiss: bool
    ) -> _Call[Chosen]:
        if (selected is None) == (not dismiss):
            raise ValueError("give either `selected` (an index) or `dismiss=True`")
        choice = Choice(dismiss=True) if dismiss else Choice(selected=selected)
        return _Call(
            "POST",
            _path("/threads/{}/choices/{}", thread_id, call_id),
            _model(Chosen),
            body=_body(choice),
        )

    @staticmethod
    def post_tool_result(
        thread_id: str, call_id: str, text: str, is_error: bool
    ) -> _Call[Accepted]:
        return _Call(
            "POST",
            _path("/threads/{}/tool_results/{}", thread_id, call_id),
            _model(Accepted),
            body=_body(ToolResult(text=text, is_error=is_error)),
        )

    @staticmethod
    def interrupt(thread_id: str, tree: bool) -> _Call[Accepted]:
        return _Call(
            "POST",
            _path("/threads/{}/interrupt", thread_id),
            _model(Accepted),
            body=_body(TreeOption(tree=tree)),
        )

    @staticmethod
    def close_thread(thread_id: str, tree: bool) -> _Call[Accepted]:
        return _Call(
            "POST",
            _path("/threads/{}/close", thread_id),
            _model(Accepted),
            body=_body(TreeOption(tree=tree)),
        )

    @staticmethod
    def schedules(thread_id: str) -> _Call[list[Schedule]]:
        return _Call("GET", _path("/threads/{}/schedules", thread_id), _list_of(Schedule))

    @staticmethod
    def create_schedule(thread_id: str, arguments: dict[str, Any]) -> _Call[ScheduleCreated]:
        # The arguments of the `schedule_create` tool, as the document gives them in place (no
        # named model is generated for them); the server holds them to the tool's schema (400
        # naming what is wrong).
        body = {name: value for name, value in arguments.items() if value is not None}
        return _Call(
            "POST",
            _path("/threads/{}/schedules", thread_id),
            _model(ScheduleCreated),
            body=body,
        )

    @staticmethod
    def delete_schedule(thread_id: str, schedule_id: str) -> _Call[Accepted]:
        return _Call(
            "DELETE",
            _path("/threads/{}/schedules/{}", thread_id, schedule_id),
            _model(Accepted),
        )

    @staticmethod
    def use_model(thread_id: str, model: str | None) -> _Call[Accepted]:
        return _Call(
            "POST",
            _path("/threads/{}/model", thread_id),
            _model(Accepted),
            body=_body(UseModel(model=model)),
        )

    @staticmethod
    def use_agent(thread_id: str, agent: str) -> _Call[Accepted]:
        return _Call(
            "POST",
            _path("/threads/{}/agent", thread_id),
            _model(Accepted),
            body=_body(UseAgent(agent=agent)),
        )

    @staticmethod
    def set_budget(thread_id: str, usd: float | None, tokens: int | None) -> _Call[Accepted]:
        given = {k: v for k, v in {"usd": usd, "tokens": tokens}.items() if v is not None}
        if not given:
            raise ValueError("give `usd`, `tokens` or both")
        return _Call(
            "POST",
            _path("/threads/{}/budget", thread_id),
            _model(Accepted),
            body=_body(NewBudget.model_validate(given)),
        )

    @staticmethod
    def waiting(thread_id: str) -> _Call[WaitingTree]:
        return _Call("GET", _path("/threads/{}/waiting", thread_id), _model(WaitingTree))

    @staticmethod
    def tree(thread_id: str) -> _Call[list[ThreadRecord]]:
        return _Call("GET", _path("/threads/{}/tree", thread_id), _list_of(ThreadRecord))

    @staticmethod
    def models() -> _Call[Models]:
        return _Call("GET", "/models", _model(Models))

    @staticmethod
    def agents() -> _Call[Agents]:
        return _Call("GET", "/agents", _model(Agents))


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
        after: int | None = None,
        retry_delay: float = 0.5,
        max_delay: float = 10.0,
        max_retries: int | None = 10,
    ) -> EventStream:
        """The thread's events as they happen, resuming by itself after a disconnect.

        With ``after=N`` the stream starts after event ``N`` (``after=0``: from the thread's
        first event, also for a thread not created yet). Without it the server first sends
        the thread's views and open questions, then ``attached`` with the position it starts
        from. The stream reconnects with the last event id it saw whenever the connection
        ends, waiting ``retry_delay`` seconds (or what the server asks for), doubling on
        failures in a row up to ``max_delay``, and raises the error after ``max_retries``
        failures in a row (``None``: never gives up).
        """
        path = _path("/threads/{}/events", thread_id)
        return EventStream(
            lambda headers: self._http.stream("GET", path, headers=headers, timeout=STREAM_TIMEOUT),
            _Position(after, retry_delay, max_delay),
            max_retries,
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
        after: int | None = None,
        retry_delay: float = 0.5,
        max_delay: float = 10.0,
        max_retries: int | None = 10,
    ) -> AsyncEventStream:
        """See :meth:`Client.events`; iterate with ``async for``."""
        path = _path("/threads/{}/events", thread_id)
        return AsyncEventStream(
            lambda headers: self._http.stream("GET", path, headers=headers, timeout=STREAM_TIMEOUT),
            _Position(after, retry_delay, max_delay),
            max_retries,
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

"""Running an agent's client tools: the calls the application answers (``client_tools:``).

When the model calls a client tool, the thread's stream shows a ``client_tool_call`` event; the
application runs the tool and posts the result (``POST /threads/{id}/tool_results/{call}``). A
stream opened without a position first re-sends every call still waiting, so a runner that
starts (or starts again, after a crash) finds the calls it still owes.

:class:`_ToolRunner` does that for the handlers it is given, on one thread and, when asked, on
every thread spawned below it. Both clients' ``run_tools`` use it: ``AsyncClient`` directly,
``Client`` in an event loop of its own.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

import anyio
from anyio.abc import TaskGroup

from ._errors import InfinityError
from ._retry import FIRST_WAIT, MOST_WAIT, RUNNER_BUDGET, retrying
from .models import (
    NoticeAttached,
    NoticeReset,
    OutputEventClientToolCall,
    OutputEventThreadClosed,
    OutputEventThreadSpawned,
    ThreadStatus,
)

if TYPE_CHECKING:
    from ._client import AsyncClient

_log = logging.getLogger("infinity_client")

ToolHandler: TypeAlias = Callable[[dict[str, Any]], Any]
"""A client tool's handler: called with the call's arguments, it returns the result.

A ``str`` is sent as it is; anything else as JSON (``json.dumps``). An exception it raises is
sent as an error result (``is_error``) naming the exception. With ``AsyncClient`` it may be an
``async def`` (or return an awaitable); a plain function runs in a worker thread, so that a
blocking one does not hold up the others.
"""


class StopFlag(Protocol):
    """What ``run_tools(stop=...)`` watches: ``threading.Event``, ``asyncio.Event`` and
    ``anyio.Event`` all are one. The runner returns soon after ``is_set()`` is true."""

    def is_set(self) -> bool: ...


@dataclass(frozen=True)
class ToolAnswer:
    """A result a runner posted (or tried to), as ``run_tools`` returns them."""

    thread_id: str
    call_id: str
    name: str
    """The tool."""
    text: str
    """The result as sent: the handler's string, its value as JSON, or the error's text."""
    is_error: bool
    """True when the handler raised."""
    accepted: bool
    """False when the server answered 409: the call no longer waited for this answer. It had
    its result already (from another runner, or from this one when the answer to an earlier
    attempt was lost on the way back), was past its deadline, or was cancelled; the runtime
    kept the first answer."""


_current_call: ContextVar[OutputEventClientToolCall] = ContextVar("infinity_client_tool_call")


def current_tool_call() -> OutputEventClientToolCall:
    """The ``client_tool_call`` event whose handler is running (its ``thread_id``,
    ``call_id``, ``name``, ``args``, ``deadline``).

    Call it from within a handler, e.g. to use ``call_id`` as an idempotency key; elsewhere
    it raises ``LookupError``.
    """
    return _current_call.get()


def result_text(value: Any) -> str:
    """What a handler's return value is sent as: a ``str`` as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def error_text(error: BaseException) -> str:
    """What a handler's exception is sent as (an error result): its type and message."""
    message = str(error)
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


_STOP_POLL = 0.05
#: How long results being posted may go on after the run ends (a stop, the thread closing, an
#: error): a result a handler gave is not dropped for a stop that came while it was posted.
_POST_GRACE = 10.0


class _ToolRunner:
    """Follows a thread (and, with ``follow_children``, the threads below it) and answers the
    calls of the tools it has handlers for, each once.

    Every request it makes (each stream's connections, the thread lookups, the results) is
    tried again as :mod:`._retry` says, for up to :data:`RUNNER_BUDGET` seconds; the first
    error it cannot go past ends the run, and ``run`` raises it."""

    def __init__(
        self,
        client: AsyncClient,
        thread_id: str,
        handlers: Mapping[str, ToolHandler],
        *,
        stop: StopFlag | None,
        follow_children: bool,
    ) -> None:
        self._client = client
        self._root = thread_id
        self._handlers = dict(handlers)
        self._stop = stop
        self._follow_children = follow_children
        self._followed: set[str] = set()
        self._started: set[str] = set()
        """The calls whose handler this runner started: the snapshot and the numbered event
        may both show a call, and a handler runs once per call per runner."""
        self._answers: list[ToolAnswer] = []
        self._group: TaskGroup | None = None
        self._posting: set[anyio.CancelScope] = set()
        """The results being posted, each shielded from the run's end until its grace ends."""
        self._grace_ends: float | None = None
        """When the results still being posted are given up (set when the run ends)."""
        self._failure: Exception | None = None

    async def run(self) -> list[ToolAnswer]:
        async with anyio.create_task_group() as group:
            self._group = group
            if self._stop is not None:
                group.start_soon(self._watch_stop, self._stop)
            self._follow(self._root)
        if self._failure is not None:
            raise self._failure
        return self._answers

    def _finish(self) -> None:
        """Ends the run: every stream and every handler still running is cancelled; results
        being posted go on for :data:`_POST_GRACE` seconds at most."""
        if self._group is None or self._grace_ends is not None:
            return
        self._grace_ends = anyio.current_time() + _POST_GRACE
        for scope in self._posting:
            scope.deadline = min(scope.deadline, self._grace_ends)
        self._group.cancel_scope.cancel()

    def _fail(self, error: Exception) -> None:
        """Ends the run with ``error`` (the first one wins), which ``run`` raises."""
        if self._failure is None:
            self._failure = error
        self._finish()

    async def _watch_stop(self, stop: StopFlag) -> None:
        while not stop.is_set():
            await anyio.sleep(_STOP_POLL)
        self._finish()

    def _follow(self, thread_id: str) -> None:
        if thread_id in self._followed:
            return
        self._followed.add(thread_id)
        assert self._group is not None
        self._group.start_soon(self._follow_thread, thread_id)

    async def _follow_thread(self, thread_id: str) -> None:
        try:
            await self._read_thread(thread_id)
        except Exception as error:
            self._fail(error)

    async def _read_thread(self, thread_id: str) -> None:
        # Each round opens the stream without a position, so that the server first re-sends
        # the calls still waiting. The stream resumes by itself after a dropped connection;
        # only a `reset` (events lost) makes it start again from the snapshot.
        while True:
            stream = self._client.events(
                thread_id,
                retry_delay=FIRST_WAIT,
                max_delay=MOST_WAIT,
                max_retries=None,
                retry_for=RUNNER_BUDGET,
            )
            async with stream:
                async for event in stream:
                    if isinstance(event, OutputEventClientToolCall):
                        self._take(thread_id, event)
                    elif isinstance(event, NoticeAttached):
                        if await self._closed_or_follow_children(thread_id):
                            self._ended(thread_id)
                            return
                    elif isinstance(event, OutputEventThreadSpawned):
                        if self._follow_children:
                            self._follow(event.child_id)
                    elif isinstance(event, OutputEventThreadClosed):
                        self._ended(thread_id)
                        return
                    elif isinstance(event, NoticeReset):
                        break
                else:
                    return  # the stream ended (it does not, but for the type checker)

    def _ended(self, thread_id: str) -> None:
        """The thread is closed: the run ends with the root, a child's stream just stops."""
        if thread_id == self._root:
            self._finish()

    async def _closed_or_follow_children(self, thread_id: str) -> bool:
        """Once attached: True if the thread is closed already; otherwise, with
        ``follow_children``, follows its open children (spawned before the stream attached:
        later ones come as ``thread_spawned``, and each child's own stream shows its own).

        The parent's record is read, not the tree: it lists a child as soon as the spawn is
        committed, before the child's own record exists."""
        try:
            record = await retrying(lambda: self._client.get_thread(thread_id))
        except InfinityError as error:
            if error.status == 404:
                return False  # not created yet: its first input makes it
            raise
        if record.status == ThreadStatus.closed:
            return True
        if self._follow_children:
            for child in record.children or []:
                if not child.closed:
                    self._follow(child.thread_id)
        return False

    def _take(self, thread_id: str, call: OutputEventClientToolCall) -> None:
        handler = self._handlers.get(call.name)
        if handler is None:
            _log.debug(
                "no handler for %s (call %s on %s): left alone", call.name, call.call_id, thread_id
            )
            return
        if call.call_id in self._started:
            return
        self._started.add(call.call_id)
        assert self._group is not None
        self._group.start_soon(self._answer, thread_id, call, handler)

    async def _answer(
        self, thread_id: str, call: OutputEventClientToolCall, handler: ToolHandler
    ) -> None:
        _current_call.set(call)  # this task's own context (and its worker thread's)
        try:
            text, is_error = result_text(await _call(handler, call.args)), False
        except Exception as error:
            _log.info("the %s handler raised on call %s: %r", call.name, call.call_id, error)
            text, is_error = error_text(error), True
        # The run's end does not drop a result the handler gave: the post goes on (until its
        # grace ends), so that the handler need not run again.
        with anyio.CancelScope(shield=True) as scope:
            if self._grace_ends is not None:
                scope.deadline = self._grace_ends
            self._posting.add(scope)
            try:
                accepted = await self._post(thread_id, call.call_id, text, is_error)
            except Exception as error:
                self._fail(error)
                return
            finally:
                self._posting.discard(scope)
            self._answers.append(
                ToolAnswer(thread_id, call.call_id, call.name, text, is_error, accepted)
            )
        if scope.cancelled_caught:
            _log.warning(
                "the result of call %s on %s was not posted before the runner ended: the call"
                " still waits, and a runner started again runs its handler again",
                call.call_id,
                thread_id,
            )

    async def _post(self, thread_id: str, call_id: str, text: str, is_error: bool) -> bool:
        """Posts the result, trying again as :func:`retrying` does; False when the call no
        longer waits for one (409: answered, by this runner before an answer that got lost,
        or by another; past its deadline; cancelled)."""
        try:
            await retrying(
                lambda: self._client.post_tool_result(thread_id, call_id, text, is_error=is_error)
            )
        except InfinityError as error:
            if error.status == 409:
                _log.info("call %s on %s took no result: %s", call_id, thread_id, error.message)
                return False
            raise
        return True


async def _call(handler: ToolHandler, args: Any) -> Any:
    """Runs a handler: ``async`` ones in the loop, plain ones in a worker thread (abandoned,
    not waited for, when the run is cancelled)."""
    if inspect.iscoroutinefunction(handler):
        return await handler(args)
    value = await anyio.to_thread.run_sync(handler, args, abandon_on_cancel=True)
    if inspect.isawaitable(value):
        return await value
    return value

"""Pieces of the client that need no server: errors, event typing, reconnection delays, and
how the client-tool runner answers calls."""

from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any

import anyio
import httpx
import pytest
from httpx_sse import ServerSentEvent
from pydantic import BaseModel

from infinity_client import (
    InfinityError,
    NoticeAttached,
    OutputEventToolCall,
    ToolAnswer,
    UnknownEvent,
    current_tool_call,
    models,
)
from infinity_client._events import _Position, parse_event
from infinity_client._retry import Backoff
from infinity_client._tools import _ToolRunner, error_text, result_text

AT = datetime(2026, 1, 1, tzinfo=timezone.utc)


def test_errors_read_the_error_body_or_fall_back_to_the_text() -> None:
    error = InfinityError.from_response(httpx.Response(409, json={"error": "thread t is closed"}))
    assert (error.status, error.message, str(error)) == (
        409,
        "thread t is closed",
        "409: thread t is closed",
    )
    proxy = InfinityError.from_response(httpx.Response(502, text="Bad Gateway from a proxy\n"))
    assert (proxy.status, proxy.message) == (502, "Bad Gateway from a proxy")
    empty = InfinityError.from_response(httpx.Response(503))
    assert empty.message == "Service Unavailable"


def test_events_are_typed_by_their_data() -> None:
    call = parse_event(
        ServerSentEvent(
            event="tool_call",
            id="7",
            data=(
                '{"thread_id": "t", "seq": 7, "at": "2026-01-01T00:00:00Z", "type": "tool_call",'
                ' "call_id": "c1", "name": "pick", "args": {}}'
            ),
        )
    )
    assert isinstance(call, OutputEventToolCall) and call.seq == 7 and call.name == "pick"
    attached = parse_event(
        ServerSentEvent(
            event="attached", id="3", data='{"type": "attached", "thread_id": "t", "after": 3}'
        )
    )
    assert isinstance(attached, NoticeAttached) and attached.after == 3
    # A field the document requires is missing: handed over as unknown, not raised.
    broken = parse_event(ServerSentEvent(event="tool_call", data='{"type": "tool_call"}'))
    assert isinstance(broken, UnknownEvent) and broken.type == "tool_call" and broken.error
    garbage = parse_event(ServerSentEvent(event="x", data="not json"))
    assert isinstance(garbage, UnknownEvent) and garbage.data == "not json"


def test_the_position_follows_ids_and_skips_keep_alives() -> None:
    position = _Position(after=None, backoff=Backoff(first=0.5, most=4.0))
    assert "Last-Event-ID" not in position.headers()
    position.take(
        ServerSentEvent(
            event="attached", id="3", data='{"type": "attached", "thread_id": "t", "after": 3}'
        )
    )
    assert position.headers()["Last-Event-ID"] == "3"
    # httpx-sse dispatches a keep-alive with the id carried over and no data: nothing to yield.
    assert position.take(ServerSentEvent(event="", id="3", data="")) is None
    # A new connection's decoder starts with no id: the position stays.
    position.take(
        ServerSentEvent(
            event="assistant_delta",
            id="",
            data=(
                '{"thread_id": "t", "at": "2026-01-01T00:00:00Z", "type": "assistant_delta",'
                ' "text": "hi"}'
            ),
        )
    )
    assert position.last_event_id == 3


def test_reconnection_delays_back_off_and_obey_the_server() -> None:
    backoff = Backoff(first=0.5, most=4.0, max_failures=6, rand=lambda: 0.5)
    position = _Position(after=0, backoff=backoff)
    assert position.delay() == 0.5  # a stream that ended
    waits = []
    for _ in range(5):
        position.failed(httpx.ConnectError("refused"))
        waits.append(position.delay())
    # Doubling, capped, each less a quarter (half of the random 0.5).
    assert waits == [0.375, 0.75, 1.5, 3.0, 3.0]
    position.failed(InfinityError(503, "busy", retry_after=7))
    assert position.delay() == 7  # the answer's Retry-After, as it is
    position.connected()
    position.take(
        ServerSentEvent(
            event="reconnect", retry=2000, data='{"type": "reconnect", "after_ms": 2000}'
        )
    )
    assert position.delay() == 2.0  # asked for, once
    assert position.delay() == 2.0  # and `retry:` is the new base
    # A refusal is raised at once; so is a failure past the limit.
    with pytest.raises(InfinityError) as refused:
        position.failed(InfinityError(401, "a bearer token is required"))
    assert refused.value.status == 401
    for _ in range(6):
        position.failed(httpx.ReadError("dropped"))
    with pytest.raises(httpx.ReadError, match="gave up"):
        position.failed(httpx.ReadError("gave up"))


def test_results_are_sent_as_text_or_json_and_errors_name_the_exception() -> None:
    assert result_text("teal") == "teal"
    assert result_text({"color": "teal", "n": [1, 2]}) == '{"color": "teal", "n": [1, 2]}'
    assert result_text(None) == "null" and result_text(3) == "3"
    assert error_text(RuntimeError("no colours left")) == "RuntimeError: no colours left"
    assert error_text(ValueError()) == "ValueError"
    with pytest.raises(LookupError):
        current_tool_call()  # only within a handler


def _client_call(call_id: str, name: str = "pick_color", seq: int | None = None) -> BaseModel:
    return models.OutputEventClientToolCall(
        type="client_tool_call",
        thread_id="t",
        at=AT,
        seq=seq,
        call_id=call_id,
        name=name,
        args={"for": call_id},
    )


class _FakeStream:
    def __init__(self, events: list[BaseModel]) -> None:
        self._events = iter(events)

    async def __aenter__(self) -> _FakeStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        pass

    def __aiter__(self) -> _FakeStream:
        return self

    async def __anext__(self) -> BaseModel:
        try:
            return next(self._events)
        except StopIteration:
            await anyio.sleep_forever()  # a live stream: no end
            raise


class _FakeClient:
    """What the runner uses of an AsyncClient, playing scripted streams."""

    def __init__(self, streams: list[list[BaseModel]], refused: set[str]) -> None:
        self.streams = streams
        self.refused = refused
        self.opened: list[tuple[str, int | None]] = []
        self.posted: list[tuple[str, str, bool]] = []

    def events(self, thread_id: str, *, after: int | None = None, **options: Any) -> _FakeStream:
        self.opened.append((thread_id, after))
        return _FakeStream(self.streams.pop(0))

    async def get_thread(self, thread_id: str) -> SimpleNamespace:
        return SimpleNamespace(status=models.ThreadStatus.open, children=[])

    async def post_tool_result(
        self, thread_id: str, call_id: str, text: str, *, is_error: bool = False
    ) -> None:
        self.posted.append((call_id, text, is_error))
        if call_id in self.refused:
            raise InfinityError(409, f"thread t has no call {call_id} waiting for a result")


@pytest.mark.anyio
async def test_a_runner_runs_each_handler_once_and_starts_again_after_a_reset() -> None:
    """The snapshot and the numbered event show the same call; a reset (events lost) opens
    the stream afresh, whose snapshot shows it again: the handler still runs once."""
    attached = models.NoticeAttached(type="attached", thread_id="t", after=2)
    fake = _FakeClient(
        [
            [
                _client_call("c1"),  # the snapshot's
                attached,
                _client_call("c1", seq=3),  # the same call, numbered
                _client_call("c2", name="measure", seq=4),  # no handler: left alone
                _client_call("c3", seq=5),  # answered elsewhere meanwhile: 409
                models.NoticeReset(type="reset", thread_id="t", after=9),
            ],
            [
                _client_call("c1"),  # the snapshot again, after the reset
                _client_call("c4"),
                attached,
            ],
        ],
        refused={"c3"},
    )
    ran: list[str] = []

    def pick_color(args: dict[str, str]) -> str:
        ran.append(args["for"])
        if args["for"] == "c4":
            raise ValueError("no paint")
        return f"teal for {args['for']}"

    stop = anyio.Event()
    runner = _ToolRunner(
        fake,  # type: ignore[arg-type]
        "t",
        {"pick_color": pick_color},
        stop=stop,
        follow_children=True,
    )
    answers: list[ToolAnswer] = []

    async def run() -> None:
        answers.extend(await runner.run())

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            while len(fake.posted) < 3:
                await anyio.sleep(0.01)
            await anyio.sleep(0.05)  # time to run a handler twice, if it were to
            stop.set()
    assert sorted(ran) == ["c1", "c3", "c4"]
    assert fake.opened == [("t", None), ("t", None)], "each stream starts without a position"
    assert sorted(fake.posted) == [
        ("c1", "teal for c1", False),
        ("c3", "teal for c3", False),
        ("c4", "ValueError: no paint", True),
    ]
    assert sorted((a.call_id, a.accepted, a.is_error) for a in answers) == [
        ("c1", True, False),
        ("c3", False, False),
        ("c4", True, True),
    ]

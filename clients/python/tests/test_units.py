"""Pieces of the client that need no server: errors, event typing, reconnection delays."""

from __future__ import annotations

import httpx
from httpx_sse import ServerSentEvent

from infinity_client import InfinityError, NoticeAttached, OutputEventToolCall, UnknownEvent
from infinity_client._events import _Position, parse_event


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
    position = _Position(after=None, retry_delay=0.5, max_delay=4.0)
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
    position = _Position(after=0, retry_delay=0.5, max_delay=4.0)
    assert position.delay() == 0.5  # a stream that ended
    for _ in range(5):
        position.failed(None, RuntimeError())
    assert position.delay() == 4.0  # 0.5 * 2**4, capped
    position.connected()
    position.take(
        ServerSentEvent(
            event="reconnect", retry=2000, data='{"type": "reconnect", "after_ms": 2000}'
        )
    )
    assert position.delay() == 2.0  # asked for, once
    assert position.delay() == 2.0  # and `retry:` is the new base
    position.failed(2, RuntimeError())
    position.failed(2, RuntimeError())
    try:
        position.failed(2, RuntimeError("gave up"))
    except RuntimeError as error:
        assert str(error) == "gave up"
    else:
        raise AssertionError("the third failure in a row should raise")

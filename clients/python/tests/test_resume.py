"""Event streams resume where they stood: after a dropped connection (through a proxy the test
cuts, against the real server), and when a host ends each stream with ``reconnect``."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlparse

import anyio
import pytest

from infinity_client import (
    AsyncClient,
    AsyncEventStream,
    Client,
    NoticeReconnect,
    OutputEventWithdrawn,
    StreamEvent,
    UnknownEvent,
)

from .conftest import Serve, kept_events, wait_for
from .fake_stream import FakeStream, output, reconnect, withdrawn
from .helpers import Reader, numbered, of_type
from .proxy import CuttableProxy


@pytest.fixture
def proxy(serve: Serve) -> Iterator[CuttableProxy]:
    proxy = CuttableProxy(urlparse(serve.base_url).port or 80)
    yield proxy
    proxy.close()


def _numbers(ids: list[str | None]) -> list[str | None]:
    """The event numbers SSE ids name: `N` for a kept event, `N.B.D` for one its thread showed
    before the slice that made it committed (docs/api.md)."""
    return [i.split(".")[0] if i else i for i in ids]


def test_a_dropped_stream_resumes_without_gap_or_duplicate(
    client: Client, proxy: CuttableProxy, thread_id: str
) -> None:
    client.send_message(thread_id, "say one")
    with Client(proxy.base_url) as flaky:
        stream = flaky.events(thread_id, after=0, retry_delay=0.05, max_delay=0.5, max_retries=None)
        reader = Reader(stream)
        reader.until(of_type("assistant_text", text="you said one"), "the first reply")

        # The network goes down; the thread goes on meanwhile.
        proxy.blocked = True
        proxy.cut()
        client.send_message(thread_id, "say two")
        client.send_message(thread_id, "say three")
        wait_for("the replies made while disconnected", lambda: kept_events(client, thread_id) == 6)
        proxy.blocked = False

        reader.until(of_type("assistant_text", text="you said three"), "what was missed")
        client.send_message(thread_id, "say four")
        reader.until(of_type("assistant_text", text="you said four"), "the live reply")

    assert numbered(reader.seen) == list(range(1, 9)), "each event once, in order"
    texts = [e.text for e in reader.seen if e.type == "assistant_text"]
    assert texts == ["you said one", "you said two", "you said three", "you said four"]
    assert _numbers(proxy.last_event_ids()) == ["0", "2"], "came back after the last event it had"
    assert stream.connections >= 2


async def _read_until(
    stream: AsyncEventStream,
    seen: list[StreamEvent],
    kind: str,
    text: str | None = None,
    timeout: float = 20.0,
) -> StreamEvent:
    """Reads ``stream`` into ``seen`` until an event of type ``kind`` (with ``text``)."""
    with anyio.fail_after(timeout):
        async for event in stream:
            seen.append(event)
            assert not isinstance(event, UnknownEvent), event
            if event.type == kind and (text is None or getattr(event, "text", None) == text):
                return event
    raise AssertionError("the stream ended")


@pytest.mark.anyio
async def test_an_async_dropped_stream_resumes_without_gap_or_duplicate(
    serve: Serve, proxy: CuttableProxy, thread_id: str
) -> None:
    async with AsyncClient(serve.base_url) as client, AsyncClient(proxy.base_url) as flaky:
        await client.send_message(thread_id, "say one")
        seen: list[StreamEvent] = []
        async with flaky.events(
            thread_id, after=0, retry_delay=0.05, max_delay=0.5, max_retries=None
        ) as stream:
            await _read_until(stream, seen, "assistant_text", "you said one")
            proxy.blocked = True
            proxy.cut()
            await client.send_message(thread_id, "say two")
            with anyio.fail_after(20):
                while (await client.get_thread(thread_id)).events < 4:
                    await anyio.sleep(0.02)
            proxy.blocked = False
            await _read_until(stream, seen, "assistant_text", "you said two")
            await client.send_message(thread_id, "say three")
            await _read_until(stream, seen, "assistant_text", "you said three")
            # (Shown before its slice committed, its id is `6.B.D`: see the README.)
            assert str(stream.last_event_id).split(".")[0] == "6"

    assert numbered(seen) == list(range(1, 7))
    assert _numbers(proxy.last_event_ids()) == ["0", "2"]


# What a host without live events does: each stream ends with `reconnect`; and a slice that
# failed withdraws its events (the stream's id goes back to `after`).
SCRIPT = [
    [
        output("user_message", 1, text="hi"),
        output("assistant_text", 2, text="hello"),
        reconnect(after_ms=200),
    ],
    [
        output("assistant_delta", None, text="wor"),
        output("assistant_text", 3, text="world"),
        withdrawn(after=2),
    ],  # then the connection ends without a word
    [
        output("assistant_text", 3, text="world, again"),
        'event: brand_new\ndata: {"type": "brand_new"}\nid: 4\n\n',
        output("assistant_text", 5, text="done"),
    ],
]


def _check_replayed(events: list[StreamEvent], fake: FakeStream) -> None:
    assert [e.type for e in events] == [
        "user_message",
        "assistant_text",
        "reconnect",
        "assistant_delta",
        "assistant_text",
        "withdrawn",
        "assistant_text",
        "brand_new",
        "assistant_text",
    ]
    assert isinstance(events[2], NoticeReconnect) and events[2].after_ms == 200
    assert isinstance(events[5], OutputEventWithdrawn) and events[5].after == 2
    assert isinstance(events[7], UnknownEvent) and events[7].data == {"type": "brand_new"}
    positions = [last for last, _ in fake.connections]
    assert positions == [None, "2", "2"], "resumed after 2, then after the withdrawal's 2"
    waited = fake.connections[1][1] - fake.connections[0][1]
    assert waited >= 0.2, f"came back after {waited:.3f}s, before the 200 ms asked for"


def test_reconnect_notices_and_withdrawals_are_followed() -> None:
    fake = FakeStream(SCRIPT)
    try:
        with Client(fake.base_url) as client, client.events("t", retry_delay=0.01) as stream:
            events = []
            for event in stream:
                events.append(event)
                if getattr(event, "text", None) == "done":
                    break
            assert stream.last_event_id == 5
        _check_replayed(events, fake)
    finally:
        fake.stop()


@pytest.mark.anyio
async def test_async_reconnect_notices_and_withdrawals_are_followed() -> None:
    fake = FakeStream(SCRIPT)
    try:
        async with AsyncClient(fake.base_url) as client:
            events: list[StreamEvent] = []
            with anyio.fail_after(20):
                async with client.events("t", retry_delay=0.01) as stream:
                    async for event in stream:
                        events.append(event)
                        if getattr(event, "text", None) == "done":
                            break
        _check_replayed(events, fake)
    finally:
        fake.stop()

"""Reading event streams in tests with a deadline, running client tools beside a test, and
reading what a thread's history says about its tools."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from infinity_client import (
    Client,
    EventStream,
    StreamEvent,
    ToolAnswer,
    ToolHandler,
    UnknownEvent,
    models,
)


class Reader:
    """Iterates a sync :class:`EventStream` on a thread, so a test can wait with a deadline.

    A blocking ``next()`` cannot time out by itself (a live stream only ever pauses), so the
    events are passed through a queue; ``seen`` keeps every event read so far, in order.
    """

    def __init__(self, stream: EventStream) -> None:
        self.stream = stream
        self.seen: list[StreamEvent] = []
        self._queue: queue.Queue[StreamEvent | BaseException] = queue.Queue()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        try:
            for event in self.stream:
                self._queue.put(event)
        except BaseException as error:  # handed to the test
            self._queue.put(error)

    def until(
        self, matches: Callable[[StreamEvent], bool], what: str, timeout: float = 20.0
    ) -> StreamEvent:
        """Reads until an event ``matches``, returning it; fails after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            try:
                item = self._queue.get(timeout=max(remaining, 0.001))
            except queue.Empty:
                raise AssertionError(
                    f"no {what} within {timeout}s; saw {[e.type for e in self.seen]}"
                ) from None
            if isinstance(item, BaseException):
                raise item
            self.seen.append(item)
            assert not isinstance(item, UnknownEvent), f"an event the document lacks: {item}"
            if matches(item):
                return item


def of_type(kind: str, **fields: object) -> Callable[[StreamEvent], bool]:
    """A matcher: an event of type ``kind`` whose attributes equal ``fields``."""
    return lambda e: e.type == kind and all(getattr(e, k, None) == v for k, v in fields.items())


def numbered(events: list[StreamEvent]) -> list[int]:
    """The ``seq`` of the kept (numbered) events, in the order received."""
    return [e.seq for e in events if getattr(e, "seq", None) is not None]


class Runner:
    """A sync ``run_tools`` on a thread of its own, so that a test can go on meanwhile.

    ``finish()`` sets its stop flag, waits for it to return and gives what it returned,
    raising what it raised; ``ended()`` says whether it returned by itself.
    """

    def __init__(
        self,
        client: Client,
        thread_id: str,
        handlers: Mapping[str, ToolHandler],
        **options: Any,
    ) -> None:
        self.stop = threading.Event()
        self._answers: list[ToolAnswer] | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(client, thread_id, handlers, options), daemon=True
        )
        self._thread.start()

    def _run(
        self,
        client: Client,
        thread_id: str,
        handlers: Mapping[str, ToolHandler],
        options: dict[str, Any],
    ) -> None:
        try:
            self._answers = client.run_tools(thread_id, handlers, stop=self.stop, **options)
        except BaseException as error:  # handed to the test by finish()
            self._error = error

    def ended(self) -> bool:
        return not self._thread.is_alive()

    def raise_if_failed(self) -> None:
        """Raises what ``run_tools`` raised, if it has ended so: a test waiting for an outcome
        sees at once why it will not come."""
        if self.ended() and self._error is not None:
            raise self._error

    def finish(self, timeout: float = 20.0) -> list[ToolAnswer]:
        self.stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"run_tools did not return within {timeout}s"
        if self._error is not None:
            raise self._error
        assert self._answers is not None
        return self._answers


def results(
    client: Client, thread_id: str, tool: str = "pick_color"
) -> list[models.ItemToolResult]:
    """The history's results of the tool's calls."""
    items = [entry.item.root for entry in client.history(thread_id).entries]
    return [i for i in items if isinstance(i, models.ItemToolResult) and i.name == tool]


def reply(client: Client, thread_id: str) -> str | None:
    """The text of the thread's last entry, when it is the model's words."""
    entries = client.history(thread_id).entries
    item = entries[-1].item.root if entries else None
    return item.text if isinstance(item, models.ItemAssistant) else None

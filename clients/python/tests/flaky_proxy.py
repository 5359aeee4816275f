"""A TCP proxy that cuts connections: at random (seeded), or at the requests a test names.

It runs an asyncio loop on a thread of its own, so sync and async tests use it alike. It reads
the HTTP requests going through (a head, then ``Content-Length`` bytes of body) to rewrite their
``Host`` to the server's, which on loopback answers only requests that name it, and so that a
test can cut at a request: before it reaches the server, or after the server got it but before
its answer gets back (the server acted; the client never learns it).

The random cuts depend only on the seed and the connection's number: connection ``k`` is cut,
or not, at the same byte whatever else happens, so a failure is replayed with the same seed.
"""

from __future__ import annotations

import asyncio
import random
import re
import threading
from collections.abc import Coroutine
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

T = TypeVar("T")

_HOST = re.compile(rb"\r\nhost:[^\r]*", re.IGNORECASE)
_LENGTH = re.compile(rb"\r\ncontent-length: *(\d+)", re.IGNORECASE)


class At(Enum):
    """Where a test cuts at a request."""

    BEFORE = "before"
    """The connection is cut before the request reaches the server."""
    AFTER = "after"
    """The request reaches the server; the connection is cut as its answer comes back."""


@dataclass(frozen=True)
class RandomCut:
    """Connection ``k`` is cut after ``after`` bytes going ``way`` (``up``: to the server)."""

    way: str
    after: int


class FlakyProxy:
    """Forwards 127.0.0.1:``port`` to ``upstream_port``, cutting connections.

    With ``seed``, each connection is cut with probability ``rate``, after a random number of
    bytes (up to ``within``) in a random direction. ``cut_at(pattern, at)`` cuts the connection
    of the next request whose request line matches ``pattern``, once. ``cuts`` says what was cut.
    """

    def __init__(
        self,
        upstream_port: int,
        *,
        seed: int | None = None,
        rate: float = 0.7,
        within: int = 1500,
    ) -> None:
        self.upstream_port = upstream_port
        self.seed = seed
        self.rate = rate
        self.within = within
        self.cuts: list[str] = []
        self.connections = 0
        self._targets: list[tuple[re.Pattern[bytes], At]] = []
        self._lock = threading.Lock()
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._server = self._run(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}"

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(10)

    def cut_at(self, request_line: str, at: At) -> None:
        """Cuts the next request whose request line (``POST /threads/...``) matches, once."""
        with self._lock:
            self._targets.append((re.compile(request_line.encode()), at))

    def _random_cut(self, number: int) -> RandomCut | None:
        if self.seed is None:
            return None
        rng = random.Random(f"{self.seed}/{number}")
        if rng.random() >= self.rate:
            return None
        return RandomCut(rng.choice(("up", "down")), rng.randrange(self.within))

    def _targeted(self, head: bytes) -> At | None:
        line = head.split(b"\r\n", 1)[0]
        with self._lock:
            for index, (pattern, at) in enumerate(self._targets):
                if pattern.search(line):
                    del self._targets[index]
                    self.cuts.append(f"{at.value} {line.decode(errors='replace')}")
                    return at
        return None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        with self._lock:
            number = self.connections
            self.connections += 1
        cut = self._random_cut(number)
        writers = [writer]
        self._writers.add(writer)
        try:
            try:
                up_reader, up_writer = await asyncio.open_connection(
                    "127.0.0.1", self.upstream_port
                )
            except OSError:
                return  # the server is down: the client sees its connection closed
            writers.append(up_writer)
            self._writers.add(up_writer)
            answered = asyncio.Event()  # set to cut when the answer comes back
            way = _Way(cut, "up", number, self)
            back = _Way(cut, "down", number, self)
            sending = asyncio.ensure_future(self._requests(reader, up_writer, way, answered))
            receiving = asyncio.ensure_future(self._answers(up_reader, writer, back, answered))
            await asyncio.wait([sending, receiving], return_when=asyncio.FIRST_COMPLETED)
            for pump in (sending, receiving):
                pump.cancel()
            await asyncio.gather(sending, receiving, return_exceptions=True)
        finally:
            for w in writers:
                w.transport.abort()
                self._writers.discard(w)
            self._tasks.discard(task)

    async def _requests(
        self,
        reader: asyncio.StreamReader,
        upstream: asyncio.StreamWriter,
        way: _Way,
        cut_answer: asyncio.Event,
    ) -> None:
        """Forwards the client's requests one by one, their `Host` rewritten."""
        host = b"\r\nHost: 127.0.0.1:%d" % self.upstream_port
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
                return
            length = _LENGTH.search(head)
            body = await reader.readexactly(int(length.group(1))) if length else b""
            target = self._targeted(head)
            if target is At.BEFORE:
                return
            if target is At.AFTER:
                cut_answer.set()  # before the server can answer
            if not await way.forward(upstream, _HOST.sub(host, head, count=1) + body):
                return

    async def _answers(
        self,
        upstream: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        way: _Way,
        cut_answer: asyncio.Event,
    ) -> None:
        """Forwards what the server sends, until a cut."""
        while data := await upstream.read(65536):
            if cut_answer.is_set():
                return
            if not await way.forward(writer, data):
                return

    def close(self) -> None:
        async def shut() -> None:
            self._server.close()
            for writer in list(self._writers):
                writer.transport.abort()
            if self._tasks:
                await asyncio.wait(list(self._tasks), timeout=5)
            await self._server.wait_closed()

        self._run(shut())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


class _Way:
    """One direction of a connection: counts the bytes, and cuts where the random cut says."""

    def __init__(self, cut: RandomCut | None, way: str, number: int, proxy: FlakyProxy) -> None:
        self._left = cut.after if cut is not None and cut.way == way else None
        self._describe = f"connection {number}: {way} after {cut.after if cut else 0} bytes"
        self._proxy = proxy

    async def forward(self, writer: asyncio.StreamWriter, data: bytes) -> bool:
        """Writes ``data``, or the part of it before the cut: False when the cut came."""
        if self._left is not None and len(data) >= self._left:
            writer.write(data[: self._left])
            await writer.drain()
            with self._proxy._lock:
                self._proxy.cuts.append(self._describe)
            return False
        if self._left is not None:
            self._left -= len(data)
        writer.write(data)
        await writer.drain()
        return True

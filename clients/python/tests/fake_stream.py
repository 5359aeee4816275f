"""A scripted SSE server, for what ``infinity serve`` never does.

The embedded runtime follows live events, so it never ends a stream with ``reconnect`` (the
stack's API function does, on every request) and only withdraws events when a slice fails.
This server plays those: each connection gets the next entry of ``script``, and it records
the ``Last-Event-ID`` and time of every connection.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

AT = "2026-01-01T00:00:00Z"


def output(kind: str, seq: int | None, **fields: Any) -> str:
    """One of the thread's events, as the server writes it (its id is its seq)."""
    data = {"thread_id": "t", "at": AT, "type": kind, **fields}
    if seq is not None:
        data["seq"] = seq
    lines = f"event: {kind}\ndata: {json.dumps(data)}\n"
    return lines + (f"id: {seq}\n\n" if seq is not None else "\n")


def withdrawn(after: int) -> str:
    return output("withdrawn", None, after=after).replace("\n\n", f"\nid: {after}\n\n")


def reconnect(after_ms: int) -> str:
    data = json.dumps({"type": "reconnect", "after_ms": after_ms})
    return f"event: reconnect\ndata: {data}\nretry: {after_ms}\n\n"


class FakeStream:
    """Serves ``script[n]`` (a list of SSE texts) to the n-th connection, then closes it;
    the last entry is served and held open (the stream is live) until :meth:`stop`."""

    def __init__(self, script: list[list[str]]) -> None:
        self.script = script
        self.connections: list[tuple[str | None, float]] = []  # (Last-Event-ID, when)
        self._stop = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                n = len(fake.connections)
                fake.connections.append((self.headers.get("Last-Event-ID"), time.monotonic()))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for text in fake.script[min(n, len(fake.script) - 1)]:
                    self.wfile.write(text.encode())
                    self.wfile.flush()
                if n >= len(fake.script) - 1:
                    fake._stop.wait(30)

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._http.server_address[1]}"
        threading.Thread(target=self._http.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        self._http.shutdown()
        self._http.server_close()

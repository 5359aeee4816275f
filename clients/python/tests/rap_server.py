"""A tiny RAP tool server for the tests (docs/tool-servers.md, the RAP spec).

Two tools:

- ``pick`` asks the person to choose a colour (a ``user_choice`` callback whose
  ``response_url`` points back here), then answers ``picked <colour>``;
- ``hang`` acknowledges the call and never answers, so a call stays in flight until the
  thread is interrupted (the runtime then POSTs ``/cancel_tool_call``).

It records what the runtime sent it, for the tests to check.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

COLOURS = ["red", "blue"]


@dataclass
class Recorded:
    """What the runtime sent, by kind, under a lock (the handlers run on their own threads)."""

    invocations: list[dict[str, Any]] = field(default_factory=list)
    answers: list[dict[str, Any]] = field(default_factory=list)
    cancels: list[dict[str, Any]] = field(default_factory=list)
    closes: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, kind: str, body: dict[str, Any]) -> None:
        with self.lock:
            getattr(self, kind).append(body)

    def snapshot(self, kind: str) -> list[dict[str, Any]]:
        with self.lock:
            return list(getattr(self, kind))


def _callback(url: str, body: dict[str, Any]) -> None:
    """POSTs a callback to the runtime, retrying a few times as RAP asks for 5xx and errors."""
    for _ in range(5):
        try:
            response = httpx.post(url, json=body, timeout=10)
        except httpx.TransportError:
            continue
        if response.status_code < 500:
            return
    raise RuntimeError(f"the runtime did not take the callback {body['type']} at {url}")


class RapServer:
    """The tool server, on a free port of 127.0.0.1 (``base_url``), until :meth:`stop`."""

    def __init__(self) -> None:
        self.recorded = Recorded()
        self._calls: dict[str, dict[str, Any]] = {}  # call id -> its invocation
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _answer(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/.well-known/rap-toolset":
                    self._answer(200, server.manifest())
                else:
                    self._answer(404, {"error": "not found"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                # Acknowledge first: RAP calls are fire and forget, the work follows.
                self._answer(200, {"ok": True})
                server.handle(self.path, body)

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._http.server_address[1]}"
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        self._thread.start()

    def manifest(self) -> dict[str, Any]:
        empty = {"type": "object", "additionalProperties": False}
        return {
            "name": "test-tools",
            "endpoint": f"{self.base_url}/invoke",
            "tools": [
                {
                    "name": "pick",
                    "description": "Asks the user to pick a colour.",
                    "inputSchema": empty,
                },
                {"name": "hang", "description": "Never answers.", "inputSchema": empty},
            ],
        }

    def handle(self, path: str, body: dict[str, Any]) -> None:
        """Acts on a POST the runtime made, after it was acknowledged."""
        if path == "/invoke":
            self.recorded.add("invocations", body)
            self._calls[body["id"]] = body
            if body["operation"] == "pick":
                threading.Thread(target=self._ask, args=(body,), daemon=True).start()
        elif path.startswith("/answer/"):
            self.recorded.add("answers", body)
            call = self._calls[path.removeprefix("/answer/")]
            colour = COLOURS[body["selected"]]
            threading.Thread(
                target=_callback,
                daemon=True,
                args=(
                    call["callback_url"],
                    {
                        "type": "tool_result",
                        "group_id": call["group_id"],
                        "id": call["id"],
                        "text": f"picked {colour}",
                    },
                ),
            ).start()
        elif path == "/cancel_tool_call":
            self.recorded.add("cancels", body)
        elif path == "/close_thread":
            self.recorded.add("closes", body)

    def _ask(self, call: dict[str, Any]) -> None:
        _callback(
            call["callback_url"],
            {
                "type": "user_choice",
                "group_id": call["group_id"],
                "id": call["id"],
                "prompt": "Which colour?",
                "choices": COLOURS,
                "default": 0,
                "response_url": f"{self.base_url}/answer/{call['id']}",
            },
        )

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()

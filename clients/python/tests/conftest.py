"""Fixtures: a real ``infinity serve`` with a scripted agent and a RAP tool server.

The server checks every request and answer against its OpenAPI document
(``INFINITY_CHECK_API=1``: a mismatch is answered 500, which the client raises), and the
client validates every answer and event against the models generated from that document, so
each test checks the contract from both sides. No model key is passed on: the agent runs on
the offline scripted model.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from infinity_client import Client, InfinityError, ToolHandler

from .helpers import Runner
from .rap_server import RapServer


def _workspace_binary() -> str:
    """The workspace's debug build of `infinity` (`cargo build -p infinity-cli`)."""
    repo = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(repo, "target")
    return os.path.join(target, "debug", "infinity")


BINARY = os.environ.get("INFINITY_BIN") or _workspace_binary()
T = TypeVar("T")

# The painter agent's scripted model. `(?m)` because after an interruption the text a rule
# sees starts with the runtime's notice, on a line of its own.
#
# The client tools' rules come first: a tool result reads as `NAME ARGS -> TEXT`, and the child
# spawned by `spawn color` calls `pick_color` itself (its task reads "Your task: color kid").
SCRIPT = r"""
rules:
  - when: "(?m)^color (\\w+)$"
    reply:
      tool_calls: [{name: pick_color, args: {for: "$1"}}]
  - when: "(?m)^both$"
    reply:
      tool_calls: [{name: measure, args: {}}, {name: pick_color, args: {for: "both"}}]
  - when: "(?m)^spawn color$"
    reply:
      tool_calls: [{name: spawn_thread, args: {instructions: "color kid", child_of: "${stack}"}}]
  - thread: child
    when: "Your task: color (\\w+)"
    reply:
      tool_calls: [{name: pick_color, args: {for: "$1"}}]
  - when: "(?m)^retitle (.+)$"
    reply:
      tool_calls: [{name: set_title, args: {title: "$1"}}]
  - when: "measure \\{\\} -> (.*)"
    reply: {text: "measured $1"}
  - when: "pick_color \\{.*?\\} -> (.*)"
    reply: {text: "colored $1"}
  - when: "set_title \\{.*?\\} -> (.*)"
    reply: {text: "titled: $1"}
  - thread: child
    reply: {text: "child here"}
  - when: "(?m)^pick$"
    reply:
      tool_calls: [{name: pick, args: {}}]
  - when: "(?m)^hang$"
    reply:
      tool_calls: [{name: hang, args: {}}]
  - when: "(?m)^spawn$"
    reply:
      tool_calls: [{name: spawn_thread, args: {instructions: "say hi", child_of: "${stack}"}}]
  - when: "picked (\\w+)"
    reply: {text: "you picked $1"}
  - when: "(?m)^say (.+)$"
    reply: {text: "you said $1"}
  - reply: {text: "ok"}
"""

# The painter's client tools (the application answers their calls) and its approval rule.
CLIENT_TOOLS = """
client_tools:
  - name: pick_color
    description: Asks the user for a colour.
    input_schema: {type: object, properties: {for: {type: string}}, required: [for]}
    deadline: 10m
  - name: measure
    description: Measures the canvas.
    input_schema: {type: object}
approvals:
  - tools: [set_title]
    deadline: 1h
"""

# A second model people may switch threads to (`--allow-model`).
OTHER_SCRIPT = """
rules:
  - reply: {text: "the other model here"}
"""


def wait_for(what: str, check: Callable[[], T | None], timeout: float = 20.0) -> T:
    """Polls ``check`` until it returns something truthy, failing after ``timeout`` seconds.

    Tests wait for behaviour this way, never with fixed sleeps, so a loaded machine only makes
    them slower, not wrong. A 404 counts as "not yet": the server accepts a message (202)
    before the thread it creates exists.
    """
    deadline = time.monotonic() + timeout
    delay = 0.02
    while True:
        try:
            value = check()
        except InfinityError as error:
            if error.status != 404:
                raise
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 2, 0.25)


def kept_events(client: Client, thread_id: str) -> int:
    """How many events the thread has kept (0 while it does not exist yet: a message is
    accepted before its thread is created)."""
    try:
        return client.get_thread(thread_id).events
    except InfinityError as error:
        if error.status == 404:
            return 0
        raise


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Serve:
    """A running ``infinity serve``: where it listens, how it was started, where its log goes."""

    base_url: str
    log: Path
    process: subprocess.Popen[bytes]
    command: list[str]
    env: dict[str, str]

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


def _spawn(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            command, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )


def _wait_healthy(serve: Serve) -> bool:
    """Waits until the server answers ``/health``: False if it exited first."""
    process = serve.process

    def healthy() -> bool:
        if process.poll() is not None:
            return True  # exited: stop waiting
        try:
            return httpx.get(f"{serve.base_url}/health", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    wait_for("infinity serve to answer /health", healthy, timeout=30)
    return process.poll() is None


def start_serve(
    agent: Path, store: Path, log: Path, extra: list[str], token: str | None = None
) -> Serve:
    """Starts ``infinity serve`` on a free port and waits until it answers ``/health``.

    With ``token``, the server requires it (``INFINITY_SERVE_TOKEN``) even on loopback.
    """
    if not os.access(BINARY, os.X_OK):
        pytest.fail(f"no infinity binary at {BINARY} (set INFINITY_BIN)")
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "INFINITY_API_TOKEN",
            "INFINITY_SERVE_TOKEN",
            "INFINITY_ALLOWED_MODELS",
        )
    }
    env["INFINITY_CHECK_API"] = "1"
    if token is not None:
        env["INFINITY_SERVE_TOKEN"] = token
    for _attempt in range(3):  # a port found free may be taken before the server binds it
        port = free_port()
        command = [
            BINARY,
            "serve",
            "--agent",
            str(agent),
            "--port",
            str(port),
            "--store",
            str(store),
            *extra,
        ]
        serve = Serve(f"http://127.0.0.1:{port}", log, _spawn(command, env, log), command, env)
        if _wait_healthy(serve):
            return serve
    pytest.fail(f"infinity serve did not start:\n{log.read_text(errors='replace')[-4000:]}")


def kill_serve(serve: Serve) -> None:
    """Kills the server at once (SIGKILL), as a crash or a pulled plug would."""
    serve.process.kill()
    serve.process.wait()


def restart_serve(serve: Serve) -> None:
    """Starts a killed server again, as it was: the same port, store and agent."""
    assert serve.process.poll() is not None, "the server still runs"
    serve.process = _spawn(serve.command, serve.env, serve.log)
    if not _wait_healthy(serve):
        pytest.fail(f"infinity serve did not start again:\n{serve.log_tail()}")


def stop_serve(serve: Serve) -> None:
    if serve.process.poll() is not None:
        return
    serve.process.terminate()
    try:
        serve.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        serve.process.kill()
        serve.process.wait()


def painter(home: Path, tool_servers: list[str]) -> Path:
    """Writes the painter agent (``SCRIPT``, ``CLIENT_TOOLS``) in ``home``: its file's path."""
    (home / "script.yaml").write_text(SCRIPT)
    servers = f"tool_servers: [{', '.join(tool_servers)}]\n" if tool_servers else ""
    agent = home / "agent.yaml"
    agent.write_text(f"name: painter\nmodel: script:script.yaml\n{servers}" + CLIENT_TOOLS)
    return agent


@pytest.fixture(scope="session")
def rap() -> Iterator[RapServer]:
    server = RapServer()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def serve(tmp_path_factory: pytest.TempPathFactory, rap: RapServer) -> Iterator[Serve]:
    """One server for the whole session; each test uses threads of its own."""
    home = tmp_path_factory.mktemp("painter")
    (home / "other.yaml").write_text(OTHER_SCRIPT)
    serve = start_serve(
        painter(home, [rap.base_url]),
        home / "store",
        home / "serve.log",
        ["--allow-model", "script:other.yaml"],
    )
    yield serve
    stop_serve(serve)


@pytest.fixture
def client(serve: Serve) -> Iterator[Client]:
    with Client(serve.base_url) as client:
        yield client


@pytest.fixture
def runners(client: Client) -> Iterator[Callable[..., Runner]]:
    """Starts sync ``run_tools`` runners beside the test (``runners(thread, handlers)``);
    any still running when the test ends is stopped."""
    started: list[Runner] = []

    def start(thread_id: str, handlers: Mapping[str, ToolHandler], **options: Any) -> Runner:
        runner = Runner(client, thread_id, handlers, **options)
        started.append(runner)
        return runner

    yield start
    for runner in started:
        runner.stop.set()
    for runner in started:
        if not runner.ended():
            runner.finish()


@pytest.fixture
def thread_id(request: pytest.FixtureRequest) -> str:
    """A thread id no other test (or earlier run against the same server) uses."""
    name = request.node.name.replace("[", "-").replace("]", "").replace("_", "-")
    return f"{name[:80]}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"

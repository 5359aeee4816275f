"""The README's example runs, as written, against a running server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .conftest import Serve, start_serve, stop_serve

EXAMPLE = Path(__file__).parent.parent / "examples" / "quickstart.py"


def test_quickstart_prints_the_reply(serve: Serve) -> None:
    env = {**os.environ, "INFINITY_URL": serve.base_url}
    env.pop("INFINITY_SERVE_TOKEN", None)
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "say", "hello", "from", "Python"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3, done.stdout
    assert lines[0].endswith("] you: say hello from Python")
    assert lines[1].endswith("] agent: you said hello from Python")
    assert lines[2].endswith("] open, 2 events, 1 completion(s)")


def test_the_readme_quickstart_runs(serve: Serve) -> None:
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    block = readme.split("## Quickstart", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    env = {**os.environ, "INFINITY_URL": serve.base_url}
    done = subprocess.run(
        [sys.executable, "-c", block], env=env, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["you said hello", "open"]


def test_the_readme_client_tools_example_runs(tmp_path: Path) -> None:
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    block = readme.split("## Client tools", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    agent = Path(__file__).parent.parent / "examples" / "client_tools" / "agent.yaml"
    serve = start_serve(agent, tmp_path / "store", tmp_path / "serve.log", [])
    try:
        env = {**os.environ, "INFINITY_URL": serve.base_url}
        done = subprocess.run(
            [sys.executable, "-c", block], env=env, capture_output=True, text=True, timeout=30
        )
        assert done.returncode == 0, done.stderr + serve.log_tail()
        assert done.stdout.splitlines() == ["Painting it teal."]
    finally:
        stop_serve(serve)

"""The retry policy (which errors are tried again, how long to wait, when to give up), and the
client-tool runner following it against a scripted client."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from types import SimpleNamespace
from typing import Any

import anyio
import httpx
import pytest
from pydantic import BaseModel

from infinity_client import InfinityError, models
from infinity_client._errors import retry_after
from infinity_client._retry import Backoff, retryable
from infinity_client._tools import _ToolRunner

AT = datetime(2026, 1, 1, tzinfo=timezone.utc)


def test_what_is_tried_again() -> None:
    for error in (httpx.ConnectError("refused"), httpx.RemoteProtocolError("dropped")):
        assert retryable(error)
    assert retryable(httpx.ReadTimeout("slow"))
    for status in (408, 429, 500, 502, 503, 504):
        assert retryable(InfinityError(status, "again")), status
    for status in (400, 401, 403, 404, 409, 422):
        assert not retryable(InfinityError(status, "final")), status
    assert not retryable(ValueError("a bug"))


def test_waits_double_with_jitter_up_to_a_cap() -> None:
    full = Backoff(first=0.25, most=5.0, rand=lambda: 0.0)
    assert [full.failed(httpx.ConnectError("x")) for _ in range(7)] == [
        0.25,
        0.5,
        1.0,
        2.0,
        4.0,
        5.0,
        5.0,
    ]
    halved = Backoff(first=0.25, most=5.0, rand=lambda: 1.0)
    assert [halved.failed(httpx.ConnectError("x")) for _ in range(3)] == [0.125, 0.25, 0.5]
    full.succeeded()
    assert full.failed(httpx.ConnectError("x")) == 0.25, "a success starts afresh"


def test_retry_after_is_waited_as_it_is() -> None:
    backoff = Backoff(rand=lambda: 0.0)
    assert backoff.failed(InfinityError(429, "slow down", retry_after=3.0)) == 3.0
    assert backoff.failed(InfinityError(503, "restarting")) == 0.5  # the second failure
    assert retry_after("3") == 3.0
    assert retry_after(None) is None and retry_after("soon") is None
    later = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=30), usegmt=True)
    assert 25 <= (retry_after(later) or 0) <= 30
    answer = httpx.Response(429, headers={"Retry-After": "2"}, json={"error": "too many"})
    assert InfinityError.from_response(answer).retry_after == 2.0


def test_the_budget_ends_the_retries() -> None:
    now = [100.0]
    backoff = Backoff(first=1.0, most=4.0, budget=10.0, clock=lambda: now[0], rand=lambda: 0.0)
    waited = 0.0
    with pytest.raises(httpx.ConnectError, match="last"):
        while True:
            error = httpx.ConnectError("last")
            wait = backoff.failed(error)
            waited += wait
            now[0] += wait + 0.1  # the wait, and the attempt's own time
    # 1 + 2 + 4 (and the attempts) = 7.3 s; another 4 s would start the next past 10 s.
    assert waited == 7.0
    # A final answer is raised at once, with no budget spent.
    with pytest.raises(InfinityError):
        Backoff(budget=10.0).failed(InfinityError(422, "bad body"))


def _call(call_id: str) -> BaseModel:
    return models.OutputEventClientToolCall(
        type="client_tool_call",
        thread_id="t",
        at=AT,
        call_id=call_id,
        name="pick_color",
        args={"for": call_id},
    )


class _Stream:
    def __init__(self, events: list[BaseModel]) -> None:
        self._events = iter(events)

    async def __aenter__(self) -> _Stream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        pass

    def __aiter__(self) -> _Stream:
        return self

    async def __anext__(self) -> BaseModel:
        try:
            return next(self._events)
        except StopIteration:
            await anyio.sleep_forever()
            raise


class _FlakyClient:
    """What the runner uses of an AsyncClient: one stream of ``calls``, then ``attached``;
    ``lookups`` and ``posts`` are what its requests meet, in turn (then success)."""

    def __init__(self, calls: list[str], lookups: list[Exception], posts: list[Exception]):
        attached = models.NoticeAttached(type="attached", thread_id="t", after=0)
        self._events = [_call(c) for c in calls] + [attached]
        self._lookups: Iterator[Exception] = iter(lookups)
        self._posts: Iterator[Exception] = iter(posts)
        self.looked_up = 0
        self.posted: list[tuple[str, float]] = []
        self.options: dict[str, Any] = {}

    def events(self, thread_id: str, **options: Any) -> _Stream:
        self.options = options
        return _Stream(self._events)

    async def get_thread(self, thread_id: str) -> SimpleNamespace:
        self.looked_up += 1
        if (error := next(self._lookups, None)) is not None:
            raise error
        return SimpleNamespace(status=models.ThreadStatus.open, children=[])

    async def post_tool_result(
        self, thread_id: str, call_id: str, text: str, *, is_error: bool = False
    ) -> None:
        self.posted.append((call_id, time.monotonic()))
        if (error := next(self._posts, None)) is not None:
            raise error


async def _run_until(fake: _FlakyClient, posts: int, lookups: int = 1) -> list[Any]:
    """Runs a runner on ``fake`` until it made ``posts`` posts and ``lookups`` lookups: what it
    returns."""
    stop = anyio.Event()
    runner = _ToolRunner(
        fake,  # type: ignore[arg-type]
        "t",
        {"pick_color": lambda args: f"teal for {args['for']}"},
        stop=stop,
        follow_children=True,
    )
    answers: list[Any] = []

    async def run() -> None:
        answers.extend(await runner.run())

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            while len(fake.posted) < posts or fake.looked_up < lookups:
                await anyio.sleep(0.01)
            stop.set()  # the last attempt, under way, is not cut short
    return answers


@pytest.mark.anyio
async def test_a_result_is_posted_again_after_5xx_and_retry_after() -> None:
    fake = _FlakyClient(
        ["c1"],
        lookups=[],
        posts=[InfinityError(503, "restarting", retry_after=0.3), httpx.ConnectError("refused")],
    )
    [answer] = await _run_until(fake, posts=3)
    assert (answer.call_id, answer.accepted) == ("c1", True)
    [first, second, third] = [at for _, at in fake.posted]
    assert second - first >= 0.3, "waited what Retry-After asked"
    assert third > second
    # The runner's streams try again for a minute, as its other requests do.
    assert fake.options["retry_for"] == 60.0 and fake.options["max_retries"] is None


@pytest.mark.anyio
async def test_a_lookup_that_fails_is_made_again_and_the_result_still_posted() -> None:
    fake = _FlakyClient(
        ["c1"],
        lookups=[httpx.RemoteProtocolError("dropped"), InfinityError(502, "bad gateway")],
        posts=[],
    )
    [answer] = await _run_until(fake, posts=1, lookups=3)
    assert answer.accepted and fake.looked_up == 3


@pytest.mark.anyio
async def test_a_409_is_final_and_not_posted_again() -> None:
    fake = _FlakyClient(["c1"], lookups=[], posts=[InfinityError(409, "answered already")])
    [answer] = await _run_until(fake, posts=1)
    assert not answer.accepted and len(fake.posted) == 1


@pytest.mark.anyio
async def test_another_refusal_ends_the_run_with_it() -> None:
    fake = _FlakyClient(["c1"], lookups=[], posts=[InfinityError(422, "the body is wrong")])
    runner = _ToolRunner(
        fake,  # type: ignore[arg-type]
        "t",
        {"pick_color": lambda args: "teal"},
        stop=None,
        follow_children=True,
    )
    with anyio.fail_after(10), pytest.raises(InfinityError) as refused:
        await runner.run()
    assert refused.value.status == 422 and len(fake.posted) == 1

"""``run_tools`` keeps its promise through outages: a server killed (SIGKILL) and started again
on the same port and store, and connections cut at random or at the requests a test names. A
handler's result reaches the thread once, and no error escapes the runner.

The random cuts are seeded: ``PROXY_SEED=N`` replays a run whose seed the failure printed.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import anyio
import pytest

from infinity_client import (
    AsyncClient,
    Client,
    InfinityError,
    ToolAnswer,
    current_tool_call,
    models,
)

from .conftest import (
    Serve,
    kill_serve,
    painter,
    restart_serve,
    start_serve,
    stop_serve,
    wait_for,
)
from .flaky_proxy import At, FlakyProxy
from .helpers import Runner, reply, results


@pytest.fixture
def own_serve(tmp_path: Path) -> Iterator[Serve]:
    """A server of the test's own, on a store that outlives it: the test kills it."""
    serve = start_serve(painter(tmp_path, []), tmp_path / "store", tmp_path / "serve.log", [])
    yield serve
    stop_serve(serve)


def _port(serve: Serve) -> int:
    return urlparse(serve.base_url).port or 80


def test_a_result_given_while_the_server_is_down_reaches_the_thread(
    own_serve: Serve, thread_id: str
) -> None:
    called, release = threading.Event(), threading.Event()

    def pick_color(args: dict[str, object]) -> str:
        called.set()
        release.wait(30)
        return "teal"

    with Client(own_serve.base_url) as client:
        runner = Runner(client, thread_id, {"pick_color": pick_color})
        client.send_message(thread_id, "color sky")
        assert called.wait(20), "the handler was never called"
        kill_serve(own_serve)
        release.set()  # the handler returns while the server is down: its post fails
        time.sleep(3)  # the outage itself
        restart_serve(own_serve)

        def answered() -> bool:
            runner.raise_if_failed()
            return reply(client, thread_id) == "colored teal"

        wait_for("the reply with the result", answered, timeout=60)
        [result] = results(client, thread_id)
        [answer] = runner.finish()
    assert (answer.call_id, answer.text, answer.accepted) == (result.call_id, "teal", True)


async def _reply(client: AsyncClient, thread_id: str) -> str | None:
    entries = (await client.history(thread_id)).entries
    item = entries[-1].item.root if entries else None
    return item.text if isinstance(item, models.ItemAssistant) else None


@pytest.mark.anyio
async def test_an_async_runner_outlasts_a_ten_second_outage(
    own_serve: Serve, thread_id: str
) -> None:
    called, release, stop = anyio.Event(), anyio.Event(), anyio.Event()
    answers: list[ToolAnswer] = []

    async def pick_color(args: dict[str, object]) -> str:
        called.set()
        await release.wait()
        return "teal"

    async with AsyncClient(own_serve.base_url) as client:

        async def run() -> None:
            answers.extend(await client.run_tools(thread_id, {"pick_color": pick_color}, stop=stop))

        async with anyio.create_task_group() as group:
            group.start_soon(run)
            await client.send_message(thread_id, "color sky")
            with anyio.fail_after(20):
                await called.wait()
            await anyio.to_thread.run_sync(kill_serve, own_serve)
            release.set()
            await anyio.sleep(10)  # the outage itself
            await anyio.to_thread.run_sync(restart_serve, own_serve)
            with anyio.fail_after(60):
                while await _reply(client, thread_id) != "colored teal":
                    await anyio.sleep(0.05)
            stop.set()
    assert [(a.text, a.accepted) for a in answers] == [("teal", True)]


@pytest.fixture
def proxy(serve: Serve) -> Iterator[FlakyProxy]:
    seed = int(os.environ.get("PROXY_SEED") or random.randrange(1 << 32))
    print(f"PROXY_SEED={seed}")  # shown when the test fails
    proxy = FlakyProxy(_port(serve), seed=seed)
    yield proxy
    print(f"cuts: {proxy.cuts}")
    proxy.close()


def test_a_lookup_cut_while_attaching_is_made_again(
    serve: Serve, client: Client, thread_id: str
) -> None:
    flaky = FlakyProxy(_port(serve))
    try:
        flaky.cut_at(f"^GET /threads/{thread_id} ", At.BEFORE)
        with Client(flaky.base_url) as through:
            runner = Runner(through, thread_id, {"pick_color": lambda args: "teal"})

            def answered() -> bool:
                runner.raise_if_failed()
                return reply(client, thread_id) == "colored teal"

            client.send_message(thread_id, "color sky")
            wait_for("the reply with the result", answered)
            [answer] = runner.finish()
        assert answer.accepted
        assert flaky.cuts == [f"before GET /threads/{thread_id} HTTP/1.1"]
    finally:
        flaky.close()


def test_a_result_whose_answer_was_lost_stands_once(
    serve: Serve, client: Client, thread_id: str
) -> None:
    flaky = FlakyProxy(_port(serve))
    ran: list[str] = []

    def pick_color(args: dict[str, object]) -> str:
        ran.append(current_tool_call().call_id)
        return "teal"

    try:
        # The server keeps the result; its 202 never reaches the runner, which posts again.
        flaky.cut_at(f"^POST /threads/{thread_id}/tool_results/", At.AFTER)
        with Client(flaky.base_url) as through:
            runner = Runner(through, thread_id, {"pick_color": pick_color})
            client.send_message(thread_id, "color sky")
            wait_for(
                "the reply with the result", lambda: reply(client, thread_id) == "colored teal"
            )
            [answer] = runner.finish()
        [result] = results(client, thread_id)
        assert ran == [result.call_id] and answer.call_id == result.call_id
        assert len(flaky.cuts) == 1
        # Posted again, the result was the same input (202), or refused as answered (409):
        # either way the runner went on without an error.
    finally:
        flaky.close()


#: How many calls each thread of the random test makes, one after the other.
ROUNDS = 4


@pytest.mark.anyio
async def test_every_call_is_answered_once_through_connections_cut_at_random(
    serve: Serve, proxy: FlakyProxy, thread_id: str
) -> None:
    threads = [f"{thread_id}-{n}" for n in range(3)]
    ran: list[tuple[str, str]] = []
    answers: list[ToolAnswer] = []
    stop = anyio.Event()

    def pick_color(args: dict[str, object]) -> str:
        call = current_tool_call()
        ran.append((call.thread_id, call.call_id))
        return f"teal for the {args['for']}"

    async with AsyncClient(serve.base_url) as direct, AsyncClient(proxy.base_url) as flaky:

        async def run(thread: str) -> None:
            answers.extend(await flaky.run_tools(thread, {"pick_color": pick_color}, stop=stop))

        async def replied(thread: str, text: str) -> bool:
            try:
                return await _reply(direct, thread) == text
            except InfinityError as error:
                if error.status == 404:
                    return False
                raise

        async with anyio.create_task_group() as group:
            for thread in threads:
                group.start_soon(run, thread)
            for round in range(ROUNDS):
                for thread in threads:
                    await direct.send_message(thread, f"color r{round}")
                with anyio.fail_after(60):
                    for thread in threads:
                        while not await replied(thread, f"colored teal for the r{round}"):
                            await anyio.sleep(0.05)
            stop.set()

        for thread in threads:
            items = [e.item.root for e in (await direct.history(thread)).entries]
            found = [i for i in items if isinstance(i, models.ItemToolResult)]
            assert [r.text for r in found] == [f"teal for the r{n}" for n in range(ROUNDS)], thread
            calls = {r.call_id for r in found}
            assert len(calls) == ROUNDS, "each call has one result"
            assert sorted(c for t, c in ran if t == thread) == sorted(calls), "each ran once"
            # A result whose answer was lost may still be on its way when the runner stops
            # (the thread has it): `answers` lists the posts that ended, each once.
            posted = [a.call_id for a in answers if a.thread_id == thread]
            assert len(posted) == len(set(posted)) and set(posted) <= calls
    assert proxy.cuts, f"seed {proxy.seed} cut nothing in {proxy.connections} connections"

"""The async client against a real ``infinity serve``, its client-tool runner included."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import anyio
import pytest

from infinity_client import (
    AsyncClient,
    InfinityError,
    OutputEventAssistantText,
    OutputEventChoiceRequested,
    StreamEvent,
    ToolAnswer,
    UnknownEvent,
    current_tool_call,
    models,
)

from .conftest import Serve
from .helpers import numbered

pytestmark = pytest.mark.anyio


@pytest.fixture
async def aclient(serve: Serve) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(serve.base_url) as client:
        yield client


async def _until(
    stream: AsyncIterator[StreamEvent], seen: list[StreamEvent], kind: str, timeout: float = 20.0
) -> StreamEvent:
    with anyio.fail_after(timeout):
        async for event in stream:
            seen.append(event)
            assert not isinstance(event, UnknownEvent), event
            if event.type == kind:
                return event
    raise AssertionError("the stream ended")


async def _kept(client: AsyncClient, thread_id: str) -> int:
    """The thread's kept events; 0 until it exists (a message is accepted before that)."""
    try:
        return (await client.get_thread(thread_id)).events
    except InfinityError as error:
        if error.status == 404:
            return 0
        raise


async def test_send_and_stream_the_reply(aclient: AsyncClient, thread_id: str) -> None:
    accepted = await aclient.send_message(thread_id, "say hello async")
    assert accepted.thread_id == thread_id
    seen: list[StreamEvent] = []
    async with aclient.events(thread_id, after=0) as stream:
        reply = await _until(stream, seen, "assistant_text")
    assert isinstance(reply, OutputEventAssistantText) and reply.text == "you said hello async"
    assert numbered(seen) == [1, 2]
    history = await aclient.history(thread_id)
    assert history.last_event_id == 2 and len(history.entries) == 2


async def test_answering_a_question(aclient: AsyncClient, thread_id: str) -> None:
    await aclient.send_message(thread_id, "pick")
    seen: list[StreamEvent] = []
    async with aclient.events(thread_id, after=0) as stream:
        question = await _until(stream, seen, "choice_requested")
        assert isinstance(question, OutputEventChoiceRequested)
        chosen = await aclient.answer_choice(thread_id, question.call_id, 1)
        assert chosen.choice == "blue"
        reply = await _until(stream, seen, "assistant_text")
    assert isinstance(reply, OutputEventAssistantText) and reply.text == "you picked blue"


async def test_listing_and_controls(aclient: AsyncClient, thread_id: str) -> None:
    ids = [f"{thread_id}-{n}" for n in range(3)]
    for tid in ids:
        await aclient.send_message(tid, "say hi")
    with anyio.fail_after(20):
        # Until each has replied: a list that still changes pages differently each time.
        while [await _kept(aclient, tid) for tid in ids] != [2, 2, 2] or len(
            (await aclient.list_threads(title=thread_id)).threads
        ) < 3:
            await anyio.sleep(0.02)
    listed = [t.id async for t in aclient.iter_threads(title=thread_id, limit=1)]
    assert sorted(listed) == sorted(ids)

    created = await aclient.create_schedule(
        ids[0], "stretch", rrule="FREQ=WEEKLY;BYDAY=MO;BYHOUR=9"
    )
    with anyio.fail_after(20):
        while not (schedules := await aclient.schedules(ids[0])):
            await anyio.sleep(0.02)
    assert [s.id for s in schedules] == [created.schedule_id] and schedules[0].rrule
    await aclient.delete_schedule(ids[0], created.schedule_id)

    await aclient.interrupt(ids[1], tree=True)
    await aclient.close_thread(ids[2], tree=True)
    with anyio.fail_after(20):
        while (await aclient.get_thread(ids[2])).status != "closed":
            await anyio.sleep(0.02)
    assert (await aclient.waiting(ids[1])).thread_id == ids[1]
    assert [r.id for r in await aclient.tree(ids[1])] == [ids[1]]
    assert (await aclient.models()).allowed and (await aclient.agents()).default == "painter"
    await aclient.use_model(ids[1], None)
    await aclient.use_agent(ids[1], "painter")
    await aclient.set_budget(ids[1], tokens=1000)

    with pytest.raises(InfinityError) as closed:
        await aclient.send_message(ids[2], "say hello?")
    assert closed.value.status == 409


async def _reply(client: AsyncClient, thread_id: str) -> str | None:
    """The thread's last entry when it is the model's words (None until the thread exists)."""
    try:
        entries = (await client.history(thread_id)).entries
    except InfinityError as error:
        if error.status == 404:
            return None
        raise
    item = entries[-1].item.root if entries else None
    return item.text if isinstance(item, models.ItemAssistant) else None


async def test_the_async_runner_answers_with_async_and_plain_handlers(
    aclient: AsyncClient, thread_id: str
) -> None:
    async def pick_color(args: dict[str, object]) -> dict[str, object]:
        await anyio.sleep(0)
        assert current_tool_call().name == "pick_color"
        return {"color": "teal", "for": args["for"]}

    def measure(args: dict[str, object]) -> str:  # a plain one runs in a worker thread
        return f"3x4 m ({current_tool_call().name})"

    stop = anyio.Event()
    answers: list[ToolAnswer] = []

    async def run() -> None:
        answers.extend(
            await aclient.run_tools(
                thread_id, {"pick_color": pick_color, "measure": measure}, stop=stop
            )
        )

    with anyio.fail_after(20):
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            await aclient.send_message(thread_id, "both")
            while await _reply(aclient, thread_id) != "measured 3x4 m (measure)":
                await anyio.sleep(0.02)
            stop.set()

    items = [entry.item.root for entry in (await aclient.history(thread_id)).entries]
    results = {i.name: i for i in items if isinstance(i, models.ItemToolResult)}
    assert results["pick_color"].text == json.dumps({"color": "teal", "for": "both"})
    assert results["measure"].text == "3x4 m (measure)"
    assert sorted((a.name, a.accepted, a.is_error) for a in answers) == [
        ("measure", True, False),
        ("pick_color", True, False),
    ]

    with pytest.raises(InfinityError) as late:
        await aclient.post_tool_result(thread_id, results["measure"].call_id, "again")
    assert late.value.status == 409 and results["measure"].call_id in late.value.message


async def test_the_async_runner_sends_an_async_handlers_error(
    aclient: AsyncClient, thread_id: str
) -> None:
    async def pick_color(args: dict[str, object]) -> str:
        raise KeyError("palette")

    async with anyio.create_task_group() as group:
        group.start_soon(aclient.run_tools, thread_id, {"pick_color": pick_color})
        await aclient.send_message(thread_id, "color sky")
        with anyio.fail_after(20):
            while (text := await _reply(aclient, thread_id)) is None:
                await anyio.sleep(0.02)
        # Cancelling the task stops the runner too.
        group.cancel_scope.cancel()
    assert text == "colored KeyError: 'palette'"
    items = [entry.item.root for entry in (await aclient.history(thread_id)).entries]
    [result] = [i for i in items if isinstance(i, models.ItemToolResult)]
    assert result.is_error is True and result.text == "KeyError: 'palette'"

"""The sync client against a real ``infinity serve``: messages, questions, interrupts, closing,
schedules, lists and the thread controls."""

from __future__ import annotations

import pydantic
import pytest

from infinity_client import (
    Client,
    InfinityError,
    NoticeAttached,
    NoticeReset,
    OutputEventAssistantDelta,
    OutputEventAssistantText,
    OutputEventChoiceRequested,
    OutputEventInterrupted,
    OutputEventToolCall,
    OutputEventToolResult,
    OutputEventUserMessage,
    models,
)

from .conftest import kept_events, wait_for
from .helpers import Reader, numbered, of_type
from .rap_server import RapServer


def test_send_and_stream_the_reply(client: Client, thread_id: str) -> None:
    accepted = client.send_message(thread_id, "say hello", agent="painter")
    assert accepted.thread_id == thread_id and accepted.input_id

    reader = Reader(client.events(thread_id, after=0))
    reply = reader.until(of_type("assistant_text"), "the reply")
    assert isinstance(reply, OutputEventAssistantText)
    assert reply.text == "you said hello"
    first = reader.seen[0]
    assert isinstance(first, OutputEventUserMessage) and first.text == "say hello"
    assert numbered(reader.seen) == [1, 2]
    # Streamed text comes before the whole text, and adds up to it.
    deltas = [e.text for e in reader.seen if isinstance(e, OutputEventAssistantDelta)]
    assert not deltas or "".join(deltas) == reply.text
    # A kept event's id is its number; one shown before its slice committed `2.B.D`.
    assert str(reader.stream.last_event_id).split(".")[0] == "2"

    history = client.history(thread_id)
    assert history.last_event_id == 2
    assert [entry.item.root.type for entry in history.entries] == ["message", "assistant"]
    record = client.get_thread(thread_id)
    assert record.agent == "painter" and record.status == "open" and record.events == 2


def test_attaching_without_a_position_says_where_it_starts(client: Client, thread_id: str) -> None:
    client.send_message(thread_id, "say one")
    wait_for("the first reply", lambda: kept_events(client, thread_id) == 2)

    reader = Reader(client.events(thread_id))
    attached = reader.until(of_type("attached"), "attached")
    assert isinstance(attached, NoticeAttached) and attached.after == 2
    client.send_message(thread_id, "say two")
    reader.until(of_type("assistant_text", text="you said two"), "the second reply")
    assert numbered(reader.seen) == [3, 4]


def test_a_position_past_the_thread_is_reset(client: Client, thread_id: str) -> None:
    client.send_message(thread_id, "say hi")
    wait_for("the reply", lambda: kept_events(client, thread_id) == 2)
    reader = Reader(client.events(thread_id, after=99))
    reset = reader.until(of_type("reset"), "reset")
    assert isinstance(reset, NoticeReset) and reset.after == 2
    assert reader.stream.last_event_id == 2
    client.send_message(thread_id, "say on")
    reader.until(of_type("assistant_text", text="you said on"), "the reply after the reset")
    assert numbered(reader.seen) == [3, 4]


def _ask(client: Client, thread_id: str) -> tuple[Reader, OutputEventChoiceRequested]:
    """Starts the `pick` tool, which asks which colour; returns the question."""
    client.send_message(thread_id, "pick")
    reader = Reader(client.events(thread_id, after=0))
    question = reader.until(of_type("choice_requested"), "the question")
    assert isinstance(question, OutputEventChoiceRequested)
    assert question.prompt == "Which colour?" and question.choices == ["red", "blue"]
    return reader, question


def test_answering_a_tool_servers_question(client: Client, thread_id: str, rap: RapServer) -> None:
    reader, question = _ask(client, thread_id)
    record = client.get_thread(thread_id)
    assert [c.call_id for c in record.open_choices or []] == [question.call_id]

    with pytest.raises(InfinityError) as refused:
        client.answer_choice(thread_id, question.call_id, 5)
    assert refused.value.status == 400
    assert not [a for a in rap.recorded.snapshot("answers") if a["id"] == question.call_id]

    chosen = client.answer_choice(thread_id, question.call_id, 1)
    assert chosen.choice == "blue" and chosen.selected == 1 and chosen.call_id == question.call_id
    reader.until(of_type("assistant_text", text="you picked blue"), "the answer's reply")
    result = next(e for e in reader.seen if isinstance(e, OutputEventToolResult))
    assert result.text == "picked blue" and not result.is_error
    answers = [a for a in rap.recorded.snapshot("answers") if a["id"] == question.call_id]
    assert answers == [{"id": question.call_id, "selected": 1}]
    assert not client.get_thread(thread_id).open_choices

    # A question is answered once: another answer is refused naming the one that stands.
    with pytest.raises(InfinityError) as again:
        client.answer_choice(thread_id, question.call_id, 0)
    assert again.value.status == 409
    assert "(option 1); this answer was not taken" in again.value.message


def test_dismissing_a_question_sends_its_default(client: Client, thread_id: str) -> None:
    reader, question = _ask(client, thread_id)
    chosen = client.answer_choice(thread_id, question.call_id, dismiss=True)
    assert chosen.selected == 0 and chosen.choice == "red"
    reader.until(of_type("assistant_text", text="you picked red"), "the default's reply")

    with pytest.raises(ValueError):
        client.answer_choice(thread_id, question.call_id)
    with pytest.raises(ValueError):
        client.answer_choice(thread_id, question.call_id, 1, dismiss=True)


def test_interrupt_cancels_the_call_in_flight(
    client: Client, thread_id: str, rap: RapServer
) -> None:
    client.send_message(thread_id, "hang")
    reader = Reader(client.events(thread_id, after=0))
    call = reader.until(of_type("tool_call", name="hang"), "the hanging call")
    assert isinstance(call, OutputEventToolCall)
    wait_for(
        "the call to be dispatched",
        lambda: [i for i in rap.recorded.snapshot("invocations") if i["id"] == call.call_id],
    )
    waiting = client.waiting(thread_id)
    assert [c.call_id for c in waiting.threads[0].calls] == [call.call_id]

    accepted = client.interrupt(thread_id)
    assert accepted.thread_id == thread_id
    interrupted = reader.until(of_type("interrupted"), "the interruption")
    assert isinstance(interrupted, OutputEventInterrupted) and interrupted.calls == 1
    result = next(
        e for e in reader.seen if isinstance(e, OutputEventToolResult) and e.call_id == call.call_id
    )
    assert result.is_error and "Interrupted by the user" in result.text
    wait_for(
        "the tool server to hear of the cancellation",
        lambda: [
            c for c in rap.recorded.snapshot("cancels") if c.get("tool_call_id") == call.call_id
        ],
    )
    assert client.waiting(thread_id).threads[0].calls == []

    # The thread goes on with the next message.
    client.send_message(thread_id, "say still here")
    reader.until(of_type("assistant_text", text="you said still here"), "the next reply")


def test_a_message_to_a_busy_thread_is_refused_or_queued_as_it_says(
    client: Client, thread_id: str, rap: RapServer
) -> None:
    client.send_message(thread_id, "hang")
    reader = Reader(client.events(thread_id, after=0))
    call = reader.until(of_type("tool_call", name="hang"), "the hanging call")
    assert isinstance(call, OutputEventToolCall)
    wait_for(
        "the call to be dispatched",
        lambda: [i for i in rap.recorded.snapshot("invocations") if i["id"] == call.call_id],
    )
    # Refused at once, saying why; nothing reaches the thread.
    with pytest.raises(InfinityError) as refused:
        client.send_message(thread_id, "say too soon", while_busy="reject")
    assert refused.value.status == 409 and "busy" in refused.value.message
    # Kept until the turn ends, and only then answered.
    client.send_message(thread_id, "say after the turn", while_busy=models.WhileBusy.queue)
    wait_for("the queued message", lambda: client.waiting(thread_id).threads[0].queued == 1)
    assert not [e for e in reader.seen if isinstance(e, OutputEventAssistantText)]
    # The turn ends when the hanging call does: here, interrupted.
    client.interrupt(thread_id)
    reader.until(of_type("assistant_text", text="you said after the turn"), "the queued answer")
    assert not any("too soon" in getattr(e, "text", "") for e in reader.seen)


def test_closing_a_thread_with_its_children(client: Client, thread_id: str, rap: RapServer) -> None:
    client.send_message(thread_id, "spawn")
    tree = wait_for("the child thread", lambda: (t := client.tree(thread_id)) and len(t) == 2 and t)
    assert tree[0].id == thread_id
    child = tree[1]
    assert child.parent is not None and child.parent.thread_id == thread_id
    assert child.status == "open"

    with pytest.raises(InfinityError) as refused:
        client.close_thread(thread_id)
    assert refused.value.status == 409

    reader = Reader(client.events(thread_id, after=0))
    client.close_thread(thread_id, tree=True)
    reader.until(of_type("thread_closed"), "thread_closed")
    wait_for(
        "both threads closed", lambda: all(r.status == "closed" for r in client.tree(thread_id))
    )
    wait_for(
        "the tool server to hear of the close",
        lambda: [c for c in rap.recorded.snapshot("closes") if c.get("thread_id") == thread_id],
    )

    with pytest.raises(InfinityError) as closed:
        client.send_message(thread_id, "say hello?")
    assert closed.value.status == 409 and "closed" in closed.value.message
    with pytest.raises(InfinityError) as again:
        client.close_thread(thread_id)
    assert again.value.status == 409


def test_schedules_are_created_listed_and_deleted(client: Client, thread_id: str) -> None:
    client.send_message(thread_id, "say hi")
    wait_for("the thread", lambda: kept_events(client, thread_id) == 2)

    with pytest.raises(InfinityError) as bad:
        client.create_schedule(thread_id, "water", rrule="FREQ=DAILY;BYHOUR=31")
    assert bad.value.status == 400 and "BYHOUR" in bad.value.message

    created = client.create_schedule(
        thread_id, "water the plants", cron="0 7 * * *", timezone="Europe/Berlin"
    )
    assert created.thread_id == thread_id and created.schedule_id.startswith("sch-")
    assert "07:00:00 Europe/Berlin" in created.text
    schedules = wait_for("the schedule on the thread", lambda: client.schedules(thread_id))
    assert [(s.id, s.message, s.cron, s.timezone, s.fired) for s in schedules] == [
        (created.schedule_id, "water the plants", "0 7 * * *", "Europe/Berlin", 0)
    ]
    waits = client.waiting(thread_id).threads[0]
    assert len(waits.schedules) == 1 and created.schedule_id in waits.schedules[0], waits

    with pytest.raises(InfinityError) as unknown:
        client.delete_schedule(thread_id, "sch-nope")
    assert unknown.value.status == 404
    client.delete_schedule(thread_id, created.schedule_id)
    wait_for("the schedule gone", lambda: client.schedules(thread_id) == [])


def test_listing_threads_page_by_page(client: Client, thread_id: str) -> None:
    ids = [f"{thread_id}-{n}" for n in range(5)]
    for n, tid in enumerate(ids):
        client.send_message(tid, f"say {n}")
    wait_for(
        "the five threads to reply (so that paging sees a list that no longer changes)",
        lambda: all(kept_events(client, tid) == 2 for tid in ids)
        and len(client.list_threads(title=thread_id).threads) == 5,
    )

    pages = []
    cursor = None
    while True:
        page = client.list_threads(title=thread_id, limit=2, cursor=cursor)
        pages.append(page)
        if page.next is None:
            break
        cursor = page.next
    assert [len(p.threads) for p in pages] == [2, 2, 1]
    listed = [t.id for p in pages for t in p.threads]
    assert sorted(listed) == sorted(ids)
    times = [t.updated_at for p in pages for t in p.threads]
    assert times == sorted(times, reverse=True), "newest activity first"
    assert [t.id for t in client.iter_threads(title=thread_id, limit=2)] == listed
    assert {
        t.id
        for t in client.iter_threads(
            title=thread_id.upper(), roots=True, kind=models.ThreadKind.conversation
        )
    } == set(ids)

    client.close_thread(ids[0])
    wait_for(
        "the closed thread listed as closed",
        lambda: [t.id for t in client.iter_threads(title=thread_id, status="closed")] == [ids[0]],
    )
    assert ids[0] not in {t.id for t in client.iter_threads(title=thread_id, status="open")}

    with pytest.raises(InfinityError) as bad:
        client.list_threads(limit=0)
    assert bad.value.status == 400 and "limit" in bad.value.message


def test_switching_model_agent_and_budget(client: Client, thread_id: str) -> None:
    assert client.agents().default == "painter"
    allowed = client.models().allowed
    assert "script:other.yaml" in allowed

    client.send_message(thread_id, "say first")
    wait_for("the reply", lambda: kept_events(client, thread_id) == 2)
    client.use_model(thread_id, "script:other.yaml")
    client.send_message(thread_id, "say second")
    reader = Reader(client.events(thread_id, after=2))
    reader.until(of_type("assistant_text", text="the other model here"), "the other model's reply")
    client.use_model(thread_id, None)
    client.send_message(thread_id, "say third")
    reader.until(of_type("assistant_text", text="you said third"), "the agent's model again")

    with pytest.raises(InfinityError) as refused:
        client.use_model(thread_id, "script:not-allowed.yaml")
    assert refused.value.status == 400 and "not-allowed" in refused.value.message

    assert client.use_agent(thread_id, "painter").thread_id == thread_id
    with pytest.raises(InfinityError) as other:
        client.use_agent(thread_id, "someone-else")
    assert other.value.status == 409 and "someone-else" in other.value.message

    assert client.set_budget(thread_id, usd=5, tokens=100_000).thread_id == thread_id
    wait_for(
        "the budget on the record",
        lambda: (b := client.get_thread(thread_id).conversation_budget)
        and b.usd == 5
        and b.tokens == 100_000,
    )
    with pytest.raises(ValueError):
        client.set_budget(thread_id)


def test_errors_carry_the_servers_words(client: Client) -> None:
    with pytest.raises(InfinityError) as unknown:
        client.get_thread("nobody-here")
    assert unknown.value.status == 404 and "nobody-here" in unknown.value.message
    with pytest.raises(InfinityError) as bad:
        client.send_message("no spaces allowed", "hi")
    assert bad.value.status == 400
    # A blank message is refused before it is sent: the document's pattern says the server
    # would refuse it.
    with pytest.raises(pydantic.ValidationError):
        client.send_message("blank-message", " ")
    # A stream the server refuses is not retried: the same request would be refused again.
    stream = client.events("no spaces allowed")
    with pytest.raises(InfinityError) as refused:
        next(stream)
    assert refused.value.status == 400 and stream.connections == 1

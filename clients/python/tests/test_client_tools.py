"""Client tools (the agent file's ``client_tools:``) answered by ``run_tools``, and approvals
(``approvals:``), against a real ``infinity serve``.

The painter's script: ``color X`` calls ``pick_color {for: X}`` and replies ``colored RESULT``;
``both`` calls ``measure`` and ``pick_color`` at once and replies ``measured RESULT`` once both
have answered; ``spawn color`` spawns a child that calls ``pick_color {for: kid}``;
``retitle X`` calls ``set_title``, which waits for a person's approval.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

import pytest

from infinity_client import (
    Client,
    InfinityError,
    NoticeAttached,
    OutputEventChoiceAnswered,
    OutputEventChoiceRequested,
    OutputEventClientToolCall,
    current_tool_call,
    models,
)

from .conftest import wait_for
from .helpers import Reader, Runner, of_type, reply, results


def owed(client: Client, thread_id: str) -> list[models.CallWait]:
    """The thread's client calls waiting for a result."""
    return [c for t in client.waiting(thread_id).threads for c in t.calls if c.client]


def test_a_runner_answers_a_client_tool_call(
    client: Client, thread_id: str, runners: Callable[..., Runner]
) -> None:
    asked: list[tuple[dict[str, object], str]] = []

    def pick_color(args: dict[str, object]) -> str:
        asked.append((args, current_tool_call().call_id))
        return "teal"

    runner = runners(thread_id, {"pick_color": pick_color})
    client.send_message(thread_id, "color sky")
    wait_for("the reply with the result", lambda: reply(client, thread_id) == "colored teal")

    [result] = results(client, thread_id)
    assert result.text == "teal" and not result.is_error
    assert asked == [({"for": "sky"}, result.call_id)]
    answers = runner.finish()
    assert [(a.thread_id, a.call_id, a.name, a.text, a.is_error, a.accepted) for a in answers] == [
        (thread_id, result.call_id, "pick_color", "teal", False, True)
    ]
    assert owed(client, thread_id) == []


def test_a_handler_that_raises_gives_an_error_result(
    client: Client, thread_id: str, runners: Callable[..., Runner]
) -> None:
    def pick_color(args: dict[str, object]) -> str:
        raise RuntimeError("no colours left")

    runner = runners(thread_id, {"pick_color": pick_color})
    client.send_message(thread_id, "color sky")
    wait_for("the reply", lambda: reply(client, thread_id))

    [result] = results(client, thread_id)
    assert result.is_error is True and result.text == "RuntimeError: no colours left"
    assert reply(client, thread_id) == "colored RuntimeError: no colours left"
    [answer] = runner.finish()
    assert answer.is_error and answer.accepted


def test_a_runner_started_later_answers_the_calls_still_owed(
    client: Client, thread_id: str, runners: Callable[..., Runner]
) -> None:
    # The model calls the tool while no runner runs (the application is down)...
    client.send_message(thread_id, "color sea")
    [call] = wait_for("the call to wait for its result", lambda: owed(client, thread_id))
    assert call.tool == "pick_color"
    # ... and a stream attached without a position re-sends it, unnumbered, before `attached`.
    reader = Reader(client.events(thread_id))
    reader.until(of_type("attached"), "attached")
    resent = [e for e in reader.seen if isinstance(e, OutputEventClientToolCall)]
    assert [(e.call_id, e.name, e.args, e.seq) for e in resent] == [
        (call.call_id, "pick_color", {"for": "sea"}, None)
    ]
    assert resent[0].deadline is not None
    assert isinstance(reader.seen[-1], NoticeAttached)

    # A runner started afresh answers it.
    runner = runners(thread_id, {"pick_color": lambda args: f"deep blue for the {args['for']}"})
    wait_for("the reply", lambda: reply(client, thread_id) == "colored deep blue for the sea")
    assert [r.call_id for r in results(client, thread_id)] == [call.call_id]
    assert [a.call_id for a in runner.finish()] == [call.call_id]


def test_two_runners_at_once_answer_a_call_once(
    client: Client, thread_id: str, runners: Callable[..., Runner]
) -> None:
    client.send_message(thread_id, "color sky")
    [call] = wait_for("the call to wait for its result", lambda: owed(client, thread_id))
    ran: list[str] = []
    lock = threading.Lock()

    def handler(name: str) -> Callable[[dict[str, object]], str]:
        def pick_color(args: dict[str, object]) -> str:
            with lock:
                ran.append(name)
            return f"{name}'s teal"

        return pick_color

    first = runners(thread_id, {"pick_color": handler("first")})
    second = runners(thread_id, {"pick_color": handler("second")})
    wait_for("the reply", lambda: reply(client, thread_id))

    [result] = results(client, thread_id)
    assert result.call_id == call.call_id and result.text in ("first's teal", "second's teal")
    assert reply(client, thread_id) == f"colored {result.text}"
    # Neither runner fails; each ran the handler at most once (the second may have found the
    # call answered already); one of them got through.
    answers = first.finish() + second.finish()
    assert all(a.call_id == call.call_id for a in answers)
    assert sorted(ran) in (["first"], ["second"], ["first", "second"])
    assert len(answers) <= len(ran)
    assert any(a.accepted and a.text == result.text for a in answers)


def test_calls_without_a_handler_are_left_alone_and_late_answers_refused(
    client: Client, thread_id: str, runners: Callable[..., Runner]
) -> None:
    runner = runners(thread_id, {"pick_color": lambda args: {"color": "teal", "for": args["for"]}})
    client.send_message(thread_id, "both")
    [picked] = wait_for("the pick_color result", lambda: results(client, thread_id))
    assert picked.text == json.dumps({"color": "teal", "for": "both"})  # not a str: JSON

    # The runner has no handler for `measure`: its call waits for another application.
    def only_one() -> list[models.CallWait] | None:
        calls = owed(client, thread_id)
        return calls if len(calls) == 1 else None

    [measure] = wait_for("only measure to wait", only_one)
    assert measure.tool == "measure"
    accepted = client.post_tool_result(thread_id, measure.call_id, "3x4 m")
    assert accepted.thread_id == thread_id and accepted.input_id
    wait_for("the reply", lambda: reply(client, thread_id) == "measured 3x4 m")
    assert [r.text for r in results(client, thread_id, "measure")] == ["3x4 m"]
    assert [a.name for a in runner.finish()] == ["pick_color"]

    # The call has its result: a late answer is refused, naming the call.
    with pytest.raises(InfinityError) as late:
        client.post_tool_result(thread_id, picked.call_id, "red", is_error=True)
    assert late.value.status == 409 and picked.call_id in late.value.message
    with pytest.raises(InfinityError) as unknown:
        client.post_tool_result("nobody-here", picked.call_id, "red")
    assert unknown.value.status == 404
    with pytest.raises(InfinityError) as bad:
        client.post_tool_result(thread_id, "not a call id", "red")
    assert bad.value.status == 400


def test_a_runner_follows_the_threads_spawned_below(
    client: Client, thread_id: str, runners: Callable[..., Runner]
) -> None:
    def children() -> list[str]:
        return [r.id for r in client.tree(thread_id)[1:]]

    # A child spawned while the runner runs: its stream is followed from `thread_spawned`.
    runner = runners(thread_id, {"pick_color": lambda args: f"teal for the {args['for']}"})
    client.send_message(thread_id, "spawn color")
    [first] = wait_for("the child", children)
    wait_for("the child's reply", lambda: reply(client, first) == "colored teal for the kid")
    assert [r.text for r in results(client, first)] == ["teal for the kid"]
    assert [(a.thread_id, a.name) for a in runner.finish()] == [(first, "pick_color")]

    # A child whose call waits while no runner runs: a runner started later finds it through
    # the parent's record, and the child's stream re-sends the call.
    client.send_message(thread_id, "spawn color")
    [call] = wait_for("the second child's call", lambda: owed(client, thread_id))
    second = next(c for c in children() if c != first)
    later = runners(thread_id, {"pick_color": lambda args: "teal again"})
    wait_for("the second child's reply", lambda: reply(client, second) == "colored teal again")
    assert [(a.thread_id, a.call_id) for a in later.finish()] == [(second, call.call_id)]


def test_a_runner_returns_when_its_thread_closes(
    client: Client, thread_id: str, runners: Callable[..., Runner]
) -> None:
    client.send_message(thread_id, "say hi")
    wait_for("the reply", lambda: reply(client, thread_id) == "you said hi")
    runner = runners(thread_id, {"pick_color": lambda args: "teal"})
    client.close_thread(thread_id)
    wait_for("the runner to return", runner.ended)
    assert runner.finish() == []
    # On a thread closed already, it returns at once.
    again = runners(thread_id, {"pick_color": lambda args: "teal"})
    wait_for("the second runner to return", again.ended)
    assert again.finish() == []


def test_an_approval_is_asked_and_answered(client: Client, thread_id: str) -> None:
    client.send_message(thread_id, "retitle Sunflowers")
    reader = Reader(client.events(thread_id, after=0))
    question = reader.until(of_type("choice_requested"), "the approval question")
    assert isinstance(question, OutputEventChoiceRequested)
    assert question.choices == ["Run it", "Do not run it"] and question.default == 1
    assert "set_title" in question.prompt
    [call] = wait_for(
        "the call to wait for approval",
        lambda: [c for t in client.waiting(thread_id).threads for c in t.calls if c.approval],
    )
    assert call.call_id == question.call_id and call.tool == "set_title"
    assert client.get_thread(thread_id).title is None

    chosen = client.answer_choice(thread_id, question.call_id, 0)
    assert chosen.selected == 0 and chosen.choice == "Run it"
    answered = reader.until(of_type("choice_answered"), "the answer on the stream")
    assert isinstance(answered, OutputEventChoiceAnswered)
    assert (answered.call_id, answered.selected, answered.choice) == (
        question.call_id,
        0,
        "Run it",
    )
    assert not answered.by_deadline
    reader.until(of_type("assistant_text"), "the reply")
    assert client.get_thread(thread_id).title == "Sunflowers"
    [result] = results(client, thread_id, "set_title")
    assert not result.is_error


def test_a_runner_raises_what_it_cannot_go_past(client: Client) -> None:
    # The server refuses the stream (a malformed thread id): asking again would not help.
    with pytest.raises(InfinityError) as refused:
        client.run_tools("no spaces allowed", {"pick_color": lambda args: "teal"})
    assert refused.value.status == 400

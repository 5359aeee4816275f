"""The API's thread routes, each described once as a :class:`_Call`: method, path, query, body,
and how to read the answer. ``Client`` and ``AsyncClient`` (``_client.py``) only differ in how
they send one. Request bodies are built with the generated models where the document describes
them, and every answer is validated against the generated models, so a server that drifts from
its document is noticed here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter

from .models import (
    Accepted,
    Agents,
    NewBudget,
    Choice,
    Chosen,
    HistoryEntry,
    Message,
    Models,
    Schedule,
    ScheduleCreated,
    ThreadPage,
    ThreadRecord,
    ToolResult,
    TreeOption,
    UseAgent,
    UseModel,
    WaitingTree,
    WhileBusy,
)

T = TypeVar("T")


@dataclass(frozen=True)
class History:
    """A thread's history, and the position of the last event it includes.

    Stream with ``client.events(thread, after=history.last_event_id)`` to follow the thread
    from there without missing or repeating anything (docs/api.md: what the web app does).
    """

    entries: list[HistoryEntry]
    last_event_id: int | None


@dataclass(frozen=True)
class _Call(Generic[T]):
    """One request to the API, and how to read its answer."""

    method: str
    path: str
    read: Callable[[httpx.Response], T]
    params: dict[str, Any] | None = None
    body: Any = None
    """The JSON body, or ``None`` for a request without one."""


def _path(template: str, *segments: str) -> str:
    """``template`` with each ``{}`` replaced by a URL-escaped segment."""
    return template.format(*(quote(s, safe="") for s in segments))


def _model(model: type[BaseModel]) -> Callable[[httpx.Response], Any]:
    return lambda response: model.model_validate_json(response.content)


def _list_of(model: type[BaseModel]) -> Callable[[httpx.Response], Any]:
    adapter = TypeAdapter(list[model])  # type: ignore[valid-type]
    return lambda response: adapter.validate_json(response.content)


def _history(response: httpx.Response) -> History:
    entries = TypeAdapter(list[HistoryEntry]).validate_json(response.content)
    position = response.headers.get("Last-Event-ID", "").strip()
    return History(entries=entries, last_event_id=int(position) if position.isdigit() else None)


def _body(model: BaseModel) -> Any:
    """The JSON of a request model: the fields that were set, defaults left to the server."""
    return model.model_dump(mode="json", exclude_unset=True, by_alias=True)


def _query(**params: Any) -> dict[str, Any]:
    """The query parameters that were given, as the server spells them."""
    query: dict[str, Any] = {}
    for name, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, datetime):
            value = value.isoformat()
        elif isinstance(value, Enum):
            value = value.value
        query[name] = value
    return query


class _Routes:
    """The thread routes as :class:`_Call` values, shared by both clients."""

    @staticmethod
    def send_message(
        thread_id: str, text: str, agent: str | None, while_busy: WhileBusy | str | None
    ) -> _Call[Accepted]:
        fields: dict[str, Any] = {"text": text}
        if agent is not None:
            fields["agent"] = agent
        if while_busy is not None:
            fields["while_busy"] = WhileBusy(while_busy)
        message = Message(**fields)
        return _Call(
            "POST",
            _path("/threads/{}/messages", thread_id),
            _model(Accepted),
            body=_body(message),
        )

    @staticmethod
    def list_threads(**filters: Any) -> _Call[ThreadPage]:
        return _Call("GET", "/threads", _model(ThreadPage), params=_query(**filters))

    @staticmethod
    def get_thread(thread_id: str) -> _Call[ThreadRecord]:
        return _Call("GET", _path("/threads/{}", thread_id), _model(ThreadRecord))

    @staticmethod
    def history(thread_id: str) -> _Call[History]:
        return _Call("GET", _path("/threads/{}/history", thread_id), _history)

    @staticmethod
    def answer_choice(
        thread_id: str, call_id: str, selected: int | None, dismiss: bool
    ) -> _Call[Chosen]:
        if (selected is None) == (not dismiss):
            raise ValueError("give either `selected` (an index) or `dismiss=True`")
        choice = Choice(dismiss=True) if dismiss else Choice(selected=selected)
        return _Call(
            "POST",
            _path("/threads/{}/choices/{}", thread_id, call_id),
            _model(Chosen),
            body=_body(choice),
        )

    @staticmethod
    def post_tool_result(
        thread_id: str, call_id: str, text: str, is_error: bool
    ) -> _Call[Accepted]:
        return _Call(
            "POST",
            _path("/threads/{}/tool_results/{}", thread_id, call_id),
            _model(Accepted),
            body=_body(ToolResult(text=text, is_error=is_error)),
        )

    @staticmethod
    def interrupt(thread_id: str, tree: bool) -> _Call[Accepted]:
        return _Call(
            "POST",
            _path("/threads/{}/interrupt", thread_id),
            _model(Accepted),
            body=_body(TreeOption(tree=tree)),
        )

    @staticmethod
    def close_thread(thread_id: str, tree: bool) -> _Call[Accepted]:
        return _Call(
            "POST",
            _path("/threads/{}/close", thread_id),
            _model(Accepted),
            body=_body(TreeOption(tree=tree)),
        )

    @staticmethod
    def schedules(thread_id: str) -> _Call[list[Schedule]]:
        return _Call("GET", _path("/threads/{}/schedules", thread_id), _list_of(Schedule))

    @staticmethod
    def create_schedule(thread_id: str, arguments: dict[str, Any]) -> _Call[ScheduleCreated]:
        # The arguments of the `schedule_create` tool, as the document gives them in place (no
        # named model is generated for them); the server holds them to the tool's schema (400
        # naming what is wrong).
        body = {name: value for name, value in arguments.items() if value is not None}
        return _Call(
            "POST",
            _path("/threads/{}/schedules", thread_id),
            _model(ScheduleCreated),
            body=body,
        )

    @staticmethod
    def delete_schedule(thread_id: str, schedule_id: str) -> _Call[Accepted]:
        return _Call(
            "DELETE",
            _path("/threads/{}/schedules/{}", thread_id, schedule_id),
            _model(Accepted),
        )

    @staticmethod
    def use_model(thread_id: str, model: str | None) -> _Call[Accepted]:
        return _Call(
            "POST",
            _path("/threads/{}/model", thread_id),
            _model(Accepted),
            body=_body(UseModel(model=model)),
        )

    @staticmethod
    def use_agent(thread_id: str, agent: str) -> _Call[Accepted]:
        return _Call(
            "POST",
            _path("/threads/{}/agent", thread_id),
            _model(Accepted),
            body=_body(UseAgent(agent=agent)),
        )

    @staticmethod
    def set_budget(thread_id: str, usd: float | None, tokens: int | None) -> _Call[Accepted]:
        given = {k: v for k, v in {"usd": usd, "tokens": tokens}.items() if v is not None}
        if not given:
            raise ValueError("give `usd`, `tokens` or both")
        return _Call(
            "POST",
            _path("/threads/{}/budget", thread_id),
            _model(Accepted),
            body=_body(NewBudget.model_validate(given)),
        )

    @staticmethod
    def waiting(thread_id: str) -> _Call[WaitingTree]:
        return _Call("GET", _path("/threads/{}/waiting", thread_id), _model(WaitingTree))

    @staticmethod
    def tree(thread_id: str) -> _Call[list[ThreadRecord]]:
        return _Call("GET", _path("/threads/{}/tree", thread_id), _list_of(ThreadRecord))

    @staticmethod
    def models() -> _Call[Models]:
        return _Call("GET", "/models", _model(Models))

    @staticmethod
    def agents() -> _Call[Agents]:
        return _Call("GET", "/agents", _model(Agents))

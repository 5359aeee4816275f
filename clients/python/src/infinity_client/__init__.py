"""A Python client of Infinity's HTTP API (``infinity serve``, a stack's API function).

>>> from infinity_client import Client
>>> with Client("http://127.0.0.1:8700") as client:
...     client.send_message("demo-1", "hello")
...     with client.events("demo-1", after=0) as events:
...         for event in events:
...             if event.type == "assistant_text":
...                 print(event.text)
...                 break

The request and answer types are in :mod:`infinity_client.models`, generated from the API's
OpenAPI document; the most used ones are re-exported here.
"""

from . import models
from ._client import DEFAULT_BASE_URL, AsyncClient, Client, History
from ._errors import InfinityError
from ._events import AsyncEventStream, EventStream, StreamEvent, UnknownEvent
from ._tools import StopFlag, ToolAnswer, ToolHandler, current_tool_call
from .models import (
    Accepted,
    NoticeAttached,
    NoticeReconnect,
    NoticeReset,
    OutputEventAssistantDelta,
    OutputEventAssistantText,
    OutputEventChoiceAnswered,
    OutputEventChoiceRequested,
    OutputEventClientToolCall,
    OutputEventError,
    OutputEventInterrupted,
    OutputEventThreadClosed,
    OutputEventThreadSpawned,
    OutputEventToolCall,
    OutputEventToolResult,
    OutputEventUserMessage,
    OutputEventWithdrawn,
    Schedule,
    ThreadPage,
    ThreadRecord,
    ThreadSummary,
)

__all__ = [
    "DEFAULT_BASE_URL",
    "Accepted",
    "AsyncClient",
    "AsyncEventStream",
    "Client",
    "EventStream",
    "History",
    "InfinityError",
    "NoticeAttached",
    "NoticeReconnect",
    "NoticeReset",
    "OutputEventAssistantDelta",
    "OutputEventAssistantText",
    "OutputEventChoiceAnswered",
    "OutputEventChoiceRequested",
    "OutputEventClientToolCall",
    "OutputEventError",
    "OutputEventInterrupted",
    "OutputEventThreadClosed",
    "OutputEventThreadSpawned",
    "OutputEventToolCall",
    "OutputEventToolResult",
    "OutputEventUserMessage",
    "OutputEventWithdrawn",
    "Schedule",
    "StopFlag",
    "StreamEvent",
    "ThreadPage",
    "ThreadRecord",
    "ThreadSummary",
    "ToolAnswer",
    "ToolHandler",
    "UnknownEvent",
    "current_tool_call",
    "models",
]

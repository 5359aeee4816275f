"""What the stand-in answers, decided from the request alone, the same way every time.

A request is first read into a `Request` (the same for the three APIs), then `answer` decides the
`Reply`:
- the last user message holds tool results: a short text that quotes the first one;
- the request offers tools and the last user message names one (or a directive says `tool=`):
  a short text and a call to each such tool, with arguments valid for its input schema;
- otherwise a text that echoes the last user message (`words=N` makes it N tokens long).
A reply longer than the request's max tokens is cut there and stops with `max_tokens`.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field

# `[[stand-in: fault=429 retry_after=1]]` anywhere in the last user message.
MARKER = re.compile(r"\[\[stand-in:?\s*([^\]]*)\]\]")

# What a long reply goes on with once the echo is used up.
FILLER = (
    "the quick brown fox jumps over the lazy dog while the stand-in keeps talking "
    "so that a long reply takes as long to arrive as a real one would"
).split()


class BadRequest(Exception):
    """A request the provider would refuse; the message says what is wrong."""


@dataclass
class Request:
    """A request as the stand-in understands it, whichever API it came through."""

    api: str
    model: str
    stream: bool
    last_text: str  # the last user message's text, markers removed
    markers: str  # the directives found in markers in the last user message
    tool_results: list[str]  # texts of the tool results in the last user message
    tools: dict[str, dict]  # offered tool name -> its input JSON schema
    max_tokens: int | None
    input_tokens: int
    include_usage: bool = False  # OpenAI's stream_options.include_usage
    fingerprint: str = ""  # the same for a request and its retries


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text

    def pieces(self) -> list[str]:
        """The arguments cut into small pieces, as models stream them."""
        sizes, out, at, i = (3, 1, 5, 2, 7, 4), [], 0, 0
        while at < len(self.arguments):
            out.append(self.arguments[at : at + sizes[i % len(sizes)]])
            at += sizes[i % len(sizes)]
            i += 1
        return out


@dataclass
class Reply:
    id: str
    tokens: list[str]  # the text, a token per item (joined they are the text)
    calls: list[ToolCall] = field(default_factory=list)
    stop: str = "end_turn"  # end_turn | tool_use | max_tokens
    input_tokens: int = 0

    @property
    def text(self) -> str:
        return "".join(self.tokens)

    @property
    def output_tokens(self) -> int:
        return len(self.tokens) + sum(len(c.pieces()) for c in self.calls)


def read(api: str, body: dict, stream: bool, model: str | None = None) -> Request:
    """Reads a request body of `api` (`anthropic`, `openai` or `bedrock`)."""
    if api == "anthropic":
        return _anthropic(body)
    if api == "openai":
        return _openai(body)
    return _bedrock(body, stream, model or "")


def _require(body: dict, names: list[str]) -> None:
    for name in names:
        if name not in body:
            raise BadRequest(f"{name}: Field required")
    _messages(body, "messages: at least one message is required")


def _messages(body: dict, missing: str) -> list[dict]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest(missing)
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise BadRequest(f"messages.{index}: Input should be an object")
    return messages


def _texts(content, text_key="text") -> list[str]:
    """The texts of a message's content: a string, or blocks with a `text`."""
    if isinstance(content, str):
        return [content]
    out = []
    for block in content or []:
        if isinstance(block, dict) and isinstance(block.get(text_key), str):
            out.append(block[text_key])
    return out


def _anthropic(body: dict) -> Request:
    _require(body, ["model", "max_tokens", "messages"])
    last = body["messages"][-1]
    texts, results = [], []
    if last.get("role") == "user":
        content = last.get("content")
        texts = _texts(content)
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                results.append(" ".join(_texts(block.get("content"))))
    tools = {
        t["name"]: t["input_schema"]
        for t in body.get("tools") or []
        if isinstance(t, dict) and "name" in t and "input_schema" in t
    }
    return _request("anthropic", body, body["model"], bool(body.get("stream")), texts, results,
                    tools, body.get("max_tokens"))


def _openai(body: dict) -> Request:
    _require(body, ["model", "messages"])
    messages = body["messages"]
    texts, results = [], []
    if messages[-1].get("role") == "tool":
        at = len(messages)
        while at > 0 and messages[at - 1].get("role") == "tool":
            at -= 1
        results = [" ".join(_texts(m.get("content"))) for m in messages[at:]]
    elif messages[-1].get("role") == "user":
        texts = _texts(messages[-1].get("content"))
    tools = {}
    for tool in body.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and "name" in function:
            tools[function["name"]] = function.get("parameters") or {"type": "object"}
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
    request = _request("openai", body, body["model"], bool(body.get("stream")), texts, results,
                       tools, max_tokens)
    request.include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    return request


def _bedrock(body: dict, stream: bool, model: str) -> Request:
    last = _messages(body, "A conversation must have at least one message: messages is missing.")[-1]
    texts, results = [], []
    if last.get("role") == "user":
        for block in last.get("content") or []:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif isinstance(block, dict) and isinstance(block.get("toolResult"), dict):
                parts = block["toolResult"].get("content") or []
                results.append(" ".join(
                    p["text"] if "text" in p else json.dumps(p.get("json")) for p in parts
                    if isinstance(p, dict)
                ))
    tools = {}
    for tool in (body.get("toolConfig") or {}).get("tools") or []:
        spec = tool.get("toolSpec") if isinstance(tool, dict) else None
        if isinstance(spec, dict) and "name" in spec:
            tools[spec["name"]] = (spec.get("inputSchema") or {}).get("json") or {"type": "object"}
    max_tokens = (body.get("inferenceConfig") or {}).get("maxTokens")
    return _request("bedrock", body, model, stream, texts, results, tools, max_tokens)


def _request(api, body, model, stream, texts, results, tools, max_tokens) -> Request:
    joined = "\n".join(texts)
    markers = " ".join(m.group(1).strip() for m in MARKER.finditer(joined))
    raw = json.dumps(body, sort_keys=True, ensure_ascii=False)
    return Request(
        api=api,
        model=str(model),
        stream=stream,
        last_text=" ".join(MARKER.sub(" ", joined).split()),
        markers=markers,
        tool_results=results,
        tools=tools,
        max_tokens=max_tokens if isinstance(max_tokens, int) and max_tokens > 0 else None,
        # About four characters a token, as for English text.
        input_tokens=max(1, len(raw) // 4),
        fingerprint=hashlib.sha256(f"{api}:{model}:{raw}".encode()).hexdigest(),
    )


def answer(request: Request, tools_asked: list[str] | None, words: int | None) -> Reply:
    """The reply to `request`: `tools_asked` names tools to call whatever the text says (an empty
    list: none), `words` makes the text that many tokens long."""
    reply = Reply(id=request.fingerprint[:24], tokens=[], input_tokens=request.input_tokens)
    if request.tool_results:
        reply.tokens = _tokens("Got it: " + _shorten(request.tool_results[0], 12))
    else:
        names = tools_asked if tools_asked is not None else [
            name for name in request.tools if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])",
                                                        request.last_text)
        ]
        for name in names:
            if name not in request.tools:
                raise BadRequest(f"stand-in: tool `{name}` is not among the tools offered")
        if names:
            reply.tokens = _tokens("Calling " + ", ".join(names) + ".")
            value = _shorten(request.last_text, 8) or "stand-in"
            for index, name in enumerate(names):
                arguments = json.dumps(example(request.tools[name], value), ensure_ascii=False)
                reply.calls.append(ToolCall(_id(request, index), name, arguments))
            reply.stop = "tool_use"
        else:
            reply.tokens = _tokens("You said: " + (_shorten(request.last_text, 30) or "nothing"))
    if words is not None:
        reply.tokens = _lengthen(reply.tokens, words)
    if request.max_tokens is not None and reply.output_tokens > request.max_tokens:
        reply.tokens = reply.tokens[: request.max_tokens]
        reply.calls = []
        reply.stop = "max_tokens"
    return reply


def _id(request: Request, index: int) -> str:
    return hashlib.sha256(f"{request.fingerprint}:{index}".encode()).hexdigest()[:24]


def _shorten(text: str, words: int) -> str:
    return " ".join(text.split()[:words])


def _tokens(text: str) -> list[str]:
    words = text.split()
    return words[:1] + [" " + w for w in words[1:]]


def _lengthen(tokens: list[str], count: int) -> list[str]:
    tokens, start = tokens[:count], len(tokens)
    while len(tokens) < count:
        tokens.append((" " if tokens else "") + FILLER[(len(tokens) - start) % len(FILLER)])
    return tokens


def example(schema, text: str):
    """A value valid for a JSON schema (the parts tools use): consts, enums and defaults as
    given, required properties (or else the first one) of objects, strings from `text`."""
    if not isinstance(schema, dict):
        return text
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return example(schema[key][0], text)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "array" if "items" in schema else "string"
    if kind == "object":
        properties = schema.get("properties") or {}
        names = schema.get("required") or list(properties)[:1]
        return {name: example(properties.get(name, {}), text) for name in names}
    if kind == "array":
        return [example(schema.get("items", {}), text)] * max(1, schema.get("minItems", 1))
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "number":
        return schema.get("minimum", 1.5)
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    value = text[: schema.get("maxLength", 60)]
    return value + "x" * max(0, schema.get("minLength", 0) - len(value))

"""What each provider refuses that its request definitions do not say: rules from the providers'
API documentation and from the 400 errors their APIs answer with. Each function takes a request
body and returns its errors as "path: rule"; none assumes the body matched its definition (a
value of the wrong type is skipped here, the definitions report it).
"""

from __future__ import annotations

import re

# Anthropic ("Define tools": `name` must match this) and OpenAI (the OpenAPI document's
# FunctionObject.name: "a-z, A-Z, 0-9, or contain underscores and dashes, with a maximum length
# of 64"). Bedrock's ToolName shape states the same, so its definition checks it.
TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")

# Anthropic's limit on blocks with `cache_control` in one request (prompt caching docs).
MAX_CACHE_BREAKPOINTS = 4

# OpenAI: the most tools one request may offer (the API's "array too long" answer for `tools`;
# the OpenAPI document states the same limit, maxItems 128, for the older `functions`).
MAX_OPENAI_TOOLS = 128


def _items(value):
    return list(enumerate(value)) if isinstance(value, list) else []


def _blank(text) -> bool:
    return isinstance(text, str) and not text.strip()


def _tool_names(tools, name_of, path_of) -> list[str]:
    errors, seen = [], set()
    for i, tool in _items(tools):
        name = name_of(tool)
        if not isinstance(name, str):
            continue
        if not TOOL_NAME.fullmatch(name):
            errors.append(f"{path_of(i)}: tool name `{name}` must match ^[a-zA-Z0-9_-]{{1,64}}$")
        if name in seen:
            errors.append(f"{path_of(i)}: tool name `{name}` is given twice (names must be unique)")
        seen.add(name)
    return errors


def anthropic(body: dict) -> list[str]:
    errors = []
    messages = body.get("messages")
    if isinstance(messages, list) and not messages:
        errors.append("messages: at least one message is required")
    errors += _tool_names(
        body.get("tools"),
        lambda t: t.get("name") if isinstance(t, dict) else None,
        lambda i: f"tools[{i}].name",
    )

    # Text: never empty or only whitespace ("text content blocks must contain non-whitespace
    # text"; with cache_control, "cache_control cannot be set for empty text blocks").
    def texts(blocks, path):
        for j, block in _items(blocks):
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and _blank(block.get("text")):
                errors.append(f"{path}[{j}].text: text content blocks must contain non-whitespace text")
            if block.get("type") == "tool_result":
                texts(block.get("content"), f"{path}[{j}].content")

    texts(body.get("system"), "system")
    if _blank(body.get("system")):
        errors.append("system: text content blocks must contain non-whitespace text")
    for i, message in _items(messages):
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        texts(content, f"messages[{i}].content")
        last_assistant = i == len(messages) - 1 and message.get("role") == "assistant"
        if (content == [] or _blank(content)) and not last_assistant:
            errors.append(
                f"messages[{i}].content: all messages must have non-empty content except for the "
                "optional final assistant message"
            )

    breakpoints = _count_key(body, "cache_control")
    if breakpoints > MAX_CACHE_BREAKPOINTS:
        errors.append(
            f"(body): {breakpoints} blocks have cache_control; at most {MAX_CACHE_BREAKPOINTS} may"
        )
    errors += _anthropic_tool_pairs(messages)
    return errors


def _count_key(value, key) -> int:
    if isinstance(value, dict):
        return (key in value) + sum(_count_key(v, key) for v in value.values())
    if isinstance(value, list):
        return sum(_count_key(v, key) for v in value)
    return 0


def _blocks_of(message, kind):
    content = message.get("content") if isinstance(message, dict) else None
    return [(j, b) for j, b in _items(content) if isinstance(b, dict) and b.get("type") == kind]


def _anthropic_tool_pairs(messages) -> list[str]:
    """Each tool_use is answered by a tool_result in the next message, which answers only the
    calls of the message before it and puts its results first; tool_use ids are unique."""
    errors, seen = [], set()
    messages = [m for _, m in _items(messages)]
    for i, message in enumerate(messages):
        for j, block in _blocks_of(message, "tool_use"):
            if block.get("id") in seen:
                errors.append(f"messages[{i}].content[{j}].id: tool_use ids must be unique")
            seen.add(block.get("id"))
        asked = {b.get("id") for _, b in _blocks_of(message, "tool_use")}
        following = messages[i + 1] if i + 1 < len(messages) else None
        answered = {b.get("tool_use_id") for _, b in _blocks_of(following, "tool_result")}
        missing = sorted(str(x) for x in asked - answered)
        if missing and following is not None:
            errors.append(
                f"messages[{i + 1}]: tool_use ids were found without tool_result blocks "
                f"immediately after: {', '.join(missing)}"
            )
        previous = messages[i - 1] if i > 0 else None
        offered = {b.get("id") for _, b in _blocks_of(previous, "tool_use")}
        for j, block in _blocks_of(message, "tool_result"):
            if block.get("tool_use_id") not in offered:
                errors.append(
                    f"messages[{i}].content[{j}].tool_use_id: unexpected tool_use_id "
                    f"`{block.get('tool_use_id')}`: each tool_result block must have a "
                    "corresponding tool_use block in the previous message"
                )
        content = message.get("content") if isinstance(message, dict) else None
        kinds = [b.get("type") for _, b in _items(content) if isinstance(b, dict)]
        others = [k for k, kind in enumerate(kinds) if kind != "tool_result"]
        if others and "tool_result" in kinds[others[0]:]:
            errors.append(f"messages[{i}].content: tool_result blocks must come first in the content")
    return errors


def openai(body: dict) -> list[str]:
    errors = []
    messages = body.get("messages")
    if isinstance(messages, list) and not messages:
        errors.append("messages: the OpenAPI document requires at least one (minItems 1)")
    tools = body.get("tools")
    if isinstance(tools, list) and len(tools) > MAX_OPENAI_TOOLS:
        errors.append(f"tools: {len(tools)} tools; at most {MAX_OPENAI_TOOLS}")
    errors += _tool_names(
        tools,
        lambda t: (t.get("function") or {}).get("name") if isinstance(t, dict) else None,
        lambda i: f"tools[{i}].function.name",
    )
    for i, message in _items(messages):
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if content == []:
            errors.append(f"messages[{i}].content: an array of parts needs one at least (minItems 1)")
        if message.get("role") == "assistant" and content is None and not message.get("tool_calls"):
            errors.append(
                f"messages[{i}]: an assistant message needs content unless it has tool_calls"
            )
    errors += _openai_tool_pairs(messages)
    return errors


def _openai_tool_pairs(messages) -> list[str]:
    """The tool messages after an assistant message with tool_calls answer each of its calls,
    and come right after it; a tool message answers a call of that assistant message."""
    errors = []
    pending, asked_at = set(), None
    for i, message in _items(messages):
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id in pending:
                pending.discard(call_id)
            else:
                errors.append(
                    f"messages[{i}]: a message with role 'tool' must be a response to a preceding "
                    f"message with 'tool_calls' (no open call `{call_id}`)"
                )
            continue
        if pending:
            errors.append(
                f"messages[{asked_at}]: an assistant message with 'tool_calls' must be followed by "
                f"tool messages responding to each 'tool_call_id'; not answered before "
                f"messages[{i}]: {', '.join(sorted(map(str, pending)))}"
            )
        pending, asked_at = set(), None
        if role == "assistant":
            calls = message.get("tool_calls")
            pending = {c.get("id") for _, c in _items(calls) if isinstance(c, dict)}
            asked_at = i
    if pending and messages:
        errors.append(
            f"messages[{asked_at}]: tool_calls without tool messages answering them: "
            f"{', '.join(sorted(map(str, pending)))}"
        )
    return errors


def bedrock(body: dict) -> list[str]:
    errors = []
    messages = body.get("messages")
    # Tool names: the ToolName shape states their length and characters.

    # "The text field in the ContentBlock object at messages.N.content.M is blank."
    def texts(blocks, path):
        for j, block in _items(blocks):
            if not isinstance(block, dict):
                continue
            if "text" in block and _blank(block["text"]):
                errors.append(f"{path}[{j}].text: the text field is blank")
            result = block.get("toolResult")
            if isinstance(result, dict):
                texts(result.get("content"), f"{path}[{j}].toolResult.content")

    texts(body.get("system"), "system")
    roles = []
    for i, message in _items(messages):
        if isinstance(message, dict):
            texts(message.get("content"), f"messages[{i}].content")
            roles.append((i, message.get("role")))
    if not roles or roles[0][1] != "user":
        errors.append("messages[0].role: a conversation must start with a user message")
    for (_, a), (i, b) in zip(roles, roles[1:]):
        if a == b:
            errors.append(
                f"messages[{i}].role: a conversation must alternate between user and assistant roles"
            )
    errors += _bedrock_tool_pairs(messages)
    return errors


def _bedrock_tool_pairs(messages) -> list[str]:
    """Each toolUse is answered by a toolResult in the next message, and a toolResult answers a
    toolUse of the message before it."""

    def ids(message, kind, key):
        content = message.get("content") if isinstance(message, dict) else None
        return [
            (j, b[kind].get(key))
            for j, b in _items(content)
            if isinstance(b, dict) and isinstance(b.get(kind), dict)
        ]

    errors = []
    messages = [m for _, m in _items(messages)]
    for i, message in enumerate(messages):
        asked = {x for _, x in ids(message, "toolUse", "toolUseId")}
        if i + 1 < len(messages):
            answered = {x for _, x in ids(messages[i + 1], "toolResult", "toolUseId")}
            if asked - answered:
                errors.append(
                    f"messages[{i + 1}].content: expected toolResult blocks for the following "
                    f"ids: {', '.join(sorted(map(str, asked - answered)))}"
                )
        offered = {x for _, x in ids(messages[i - 1], "toolUse", "toolUseId")} if i else set()
        for j, use_id in ids(message, "toolResult", "toolUseId"):
            if use_id not in offered:
                errors.append(
                    f"messages[{i}].content[{j}].toolResult.toolUseId: `{use_id}` answers no "
                    "toolUse of the previous turn"
                )
    return errors

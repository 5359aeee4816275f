"""A `Reply` in each provider's wire format, built from the providers' own definitions.

Anthropic's and OpenAI's replies and stream events are made as the SDKs' response types
(`anthropic.types`, `openai.types.chat`) and serialized from them; Bedrock's are checked against
botocore's `bedrock-runtime` service model. Either way a field the definitions do not have, a
required one missing or a value of the wrong type fails here, before anything is sent.

A stream is a list of `Piece`s: the bytes to write and whether the piece is a token the stand-in
paces out (text or a piece of tool arguments) or framing sent as soon as it is due.
"""

from __future__ import annotations

import binascii
import json
import struct
import time
from dataclasses import dataclass

import anthropic.types as at
import botocore.session
import pydantic
from anthropic.types.raw_message_delta_event import Delta as MessageDelta
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionMessage,
    ChatCompletionMessageFunctionToolCall,
)
from openai.types.chat import chat_completion as completion
from openai.types.chat import chat_completion_chunk as chunk
from openai.types.chat.chat_completion_message_function_tool_call import Function
from openai.types.completion_usage import CompletionUsage, PromptTokensDetails
from openai.types.shared import ErrorObject

from conversation import Reply

BEDROCK = botocore.session.get_session().get_service_model("bedrock-runtime")


@dataclass
class Piece:
    data: bytes
    paced: bool = False


class NotInDefinition(Exception):
    """What we were about to send does not match the provider's definitions (a bug here)."""


# --- checking against the definitions -----------------------------------------------------------


def checked(model: pydantic.BaseModel) -> pydantic.BaseModel:
    """`model`, once nothing in it is a field its type leaves out. (The SDKs' types accept
    unknown fields, so that they keep working when the API grows; we must not invent any.)"""

    def walk(value, path):
        if isinstance(value, pydantic.BaseModel):
            if value.model_extra:
                raise NotInDefinition(
                    f"{path}: {type(value).__name__} has no field {sorted(value.model_extra)}")
            for name in value.model_fields_set:
                walk(getattr(value, name), f"{path}.{name}")
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, f"{path}[{index}]")

    walk(model, type(model).__name__)
    return model


def dump(model: pydantic.BaseModel) -> str:
    """The JSON of the fields set on `model` (and on what it holds), checked first."""
    return checked(model).model_dump_json(exclude_unset=True)


def check_shape(shape, value, path: str) -> None:
    """Fails unless `value` is valid for a botocore shape: members it defines, required ones
    present, one member of a union, enum values, types."""
    kind = shape.type_name
    if shape.metadata.get("document"):
        return
    if kind == "structure":
        if not isinstance(value, dict):
            raise NotInDefinition(f"{path}: {shape.name} must be an object")
        for name in value:
            if name not in shape.members:
                raise NotInDefinition(f"{path}: {shape.name} has no member `{name}`")
        for name in shape.required_members:
            if name not in value:
                raise NotInDefinition(f"{path}: {shape.name} requires `{name}`")
        if shape.metadata.get("union") and len(value) != 1:
            raise NotInDefinition(f"{path}: {shape.name} is a union: exactly one member")
        for name, item in value.items():
            check_shape(shape.members[name], item, f"{path}.{name}")
    elif kind == "list":
        if not isinstance(value, list):
            raise NotInDefinition(f"{path}: {shape.name} must be a list")
        for index, item in enumerate(value):
            check_shape(shape.member, item, f"{path}[{index}]")
    elif kind == "string":
        if not isinstance(value, str):
            raise NotInDefinition(f"{path}: {shape.name} must be a string")
        if shape.enum and value not in shape.enum:
            raise NotInDefinition(f"{path}: `{value}` is not one of {shape.enum}")
    elif kind in ("integer", "long"):
        if not isinstance(value, int) or isinstance(value, bool):
            raise NotInDefinition(f"{path}: {shape.name} must be an integer")
    elif kind == "boolean" and not isinstance(value, bool):
        raise NotInDefinition(f"{path}: {shape.name} must be a boolean")


# --- Anthropic Messages --------------------------------------------------------------------------

ANTHROPIC_STOP = {"end_turn": "end_turn", "tool_use": "tool_use", "max_tokens": "max_tokens"}


def _anthropic_usage(reply: Reply, output_tokens: int) -> at.Usage:
    return at.Usage(input_tokens=reply.input_tokens, output_tokens=output_tokens,
                    cache_creation_input_tokens=0, cache_read_input_tokens=0)


def anthropic_message(reply: Reply, model: str) -> bytes:
    content = []
    if reply.tokens:
        content.append(at.TextBlock(type="text", text=reply.text))
    for call in reply.calls:
        content.append(at.ToolUseBlock(type="tool_use", id="toolu_" + call.id, name=call.name,
                                       input=json.loads(call.arguments)))
    message = at.Message(id="msg_" + reply.id, type="message", role="assistant", model=model,
                         content=content, stop_reason=ANTHROPIC_STOP[reply.stop],
                         stop_sequence=None, usage=_anthropic_usage(reply, reply.output_tokens))
    return dump(message).encode()


def anthropic_stream(reply: Reply, model: str) -> list[Piece]:
    """message_start, a ping, a text block and a tool_use block per call (arguments in many
    input_json_delta pieces), message_delta with the cumulative usage, message_stop."""

    def event(model_event: pydantic.BaseModel, paced=False) -> Piece:
        name = model_event.type  # type: ignore[attr-defined]
        return Piece(f"event: {name}\ndata: {dump(model_event)}\n\n".encode(), paced)

    start = at.Message(id="msg_" + reply.id, type="message", role="assistant", model=model,
                       content=[], stop_reason=None, stop_sequence=None,
                       usage=_anthropic_usage(reply, 1))
    pieces = [event(at.RawMessageStartEvent(type="message_start", message=start)),
              # The one event the SDK has no type for; the API documents and sends it.
              Piece(b'event: ping\ndata: {"type": "ping"}\n\n')]
    index = 0
    if reply.tokens:
        pieces.append(event(at.RawContentBlockStartEvent(
            type="content_block_start", index=index,
            content_block=at.TextBlock(type="text", text=""))))
        for token in reply.tokens:
            pieces.append(event(at.RawContentBlockDeltaEvent(
                type="content_block_delta", index=index,
                delta=at.TextDelta(type="text_delta", text=token)), paced=True))
        pieces.append(event(at.RawContentBlockStopEvent(type="content_block_stop", index=index)))
        index += 1
    for call in reply.calls:
        pieces.append(event(at.RawContentBlockStartEvent(
            type="content_block_start", index=index,
            content_block=at.ToolUseBlock(type="tool_use", id="toolu_" + call.id, name=call.name,
                                          input={}))))
        for part in call.pieces():
            pieces.append(event(at.RawContentBlockDeltaEvent(
                type="content_block_delta", index=index,
                delta=at.InputJSONDelta(type="input_json_delta", partial_json=part)), paced=True))
        pieces.append(event(at.RawContentBlockStopEvent(type="content_block_stop", index=index)))
        index += 1
    usage = at.MessageDeltaUsage(input_tokens=reply.input_tokens, output_tokens=reply.output_tokens,
                                 cache_creation_input_tokens=0, cache_read_input_tokens=0)
    pieces.append(event(at.RawMessageDeltaEvent(
        type="message_delta", usage=usage,
        delta=MessageDelta(stop_reason=ANTHROPIC_STOP[reply.stop], stop_sequence=None))))
    pieces.append(event(at.RawMessageStopEvent(type="message_stop")))
    return pieces


def anthropic_error(kind: str, message: str, request_id: str) -> bytes:
    body = at.ErrorResponse(type="error", error={"type": kind, "message": message},
                            request_id=request_id)
    return dump(body).encode()


# --- OpenAI Chat Completions ---------------------------------------------------------------------

OPENAI_FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}


def _openai_usage(reply: Reply) -> CompletionUsage:
    return CompletionUsage(prompt_tokens=reply.input_tokens, completion_tokens=reply.output_tokens,
                           total_tokens=reply.input_tokens + reply.output_tokens,
                           prompt_tokens_details=PromptTokensDetails(cached_tokens=0))


def openai_completion(reply: Reply, model: str) -> bytes:
    calls = {"tool_calls": [
        ChatCompletionMessageFunctionToolCall(id="call_" + c.id, type="function",
                                              function=Function(name=c.name, arguments=c.arguments))
        for c in reply.calls]} if reply.calls else {}
    message = ChatCompletionMessage(role="assistant", content=reply.text or None, refusal=None,
                                    **calls)
    choice = completion.Choice(index=0, message=message, logprobs=None,
                               finish_reason=OPENAI_FINISH[reply.stop])
    body = ChatCompletion(id="chatcmpl-" + reply.id, object="chat.completion",
                          created=int(time.time()), model=model, choices=[choice],
                          usage=_openai_usage(reply))
    return dump(body).encode()


def openai_stream(reply: Reply, model: str, include_usage: bool) -> list[Piece]:
    """A role chunk, a chunk per token, per call a chunk with its id and name and then its
    arguments in many pieces, a finish chunk, the usage chunk when asked for, `[DONE]`."""
    created = int(time.time())

    def chunk_piece(choices, paced=False, usage=None) -> Piece:
        # With include_usage, `usage` is null on every chunk but the last, as OpenAI sends it.
        extra = {"usage": usage} if include_usage else {}
        body = ChatCompletionChunk(id="chatcmpl-" + reply.id, object="chat.completion.chunk",
                                   created=created, model=model, choices=choices, **extra)
        return Piece(f"data: {dump(body)}\n\n".encode(), paced)

    def delta(paced=False, finish=None, **fields) -> Piece:
        return chunk_piece([chunk.Choice(index=0, delta=chunk.ChoiceDelta(**fields),
                                         logprobs=None, finish_reason=finish)], paced)

    pieces = [delta(role="assistant", content="", refusal=None)]
    pieces += [delta(paced=True, content=token) for token in reply.tokens]
    for index, call in enumerate(reply.calls):
        pieces.append(delta(tool_calls=[chunk.ChoiceDeltaToolCall(
            index=index, id="call_" + call.id, type="function",
            function=chunk.ChoiceDeltaToolCallFunction(name=call.name, arguments=""))]))
        for part in call.pieces():
            pieces.append(delta(paced=True, tool_calls=[chunk.ChoiceDeltaToolCall(
                index=index, function=chunk.ChoiceDeltaToolCallFunction(arguments=part))]))
    pieces.append(delta(finish=OPENAI_FINISH[reply.stop]))
    if include_usage:
        pieces.append(chunk_piece([], usage=_openai_usage(reply)))
    pieces.append(Piece(b"data: [DONE]\n\n"))
    return pieces


def openai_error(kind: str, message: str, code: str | None, param: str | None = None) -> bytes:
    error = ErrorObject(message=message, type=kind, param=param, code=code)
    return ('{"error": ' + dump(error) + "}").encode()


# --- Bedrock Converse and ConverseStream ---------------------------------------------------------


def _bedrock_usage(reply: Reply) -> dict:
    return {"inputTokens": reply.input_tokens, "outputTokens": reply.output_tokens,
            "totalTokens": reply.input_tokens + reply.output_tokens}


def bedrock_converse(reply: Reply, latency_ms: int) -> bytes:
    content = [{"text": reply.text}] if reply.tokens else []
    for call in reply.calls:
        content.append({"toolUse": {"toolUseId": "tooluse_" + call.id, "name": call.name,
                                    "input": json.loads(call.arguments)}})
    body = {"output": {"message": {"role": "assistant", "content": content}},
            "stopReason": reply.stop, "usage": _bedrock_usage(reply),
            "metrics": {"latencyMs": latency_ms}}
    check_shape(BEDROCK.operation_model("Converse").output_shape, body, "ConverseResponse")
    return json.dumps(body).encode()


def bedrock_stream(reply: Reply, latency_ms: int) -> list[Piece]:
    """messageStart, the text as contentBlockDelta events (Bedrock starts no text block), per
    call a contentBlockStart and its input in many pieces, messageStop, metadata (usage)."""
    events = BEDROCK.operation_model("ConverseStream").output_shape.members["stream"]

    def event(name: str, payload: dict, paced=False) -> Piece:
        check_shape(events.members[name], payload, name)
        headers = {":event-type": name, ":content-type": "application/json",
                   ":message-type": "event"}
        return Piece(event_stream_frame(headers, json.dumps(payload).encode()), paced)

    pieces = [event("messageStart", {"role": "assistant"})]
    index = 0
    if reply.tokens:
        for token in reply.tokens:
            pieces.append(event("contentBlockDelta", {"delta": {"text": token},
                                                      "contentBlockIndex": index}, paced=True))
        pieces.append(event("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    for call in reply.calls:
        pieces.append(event("contentBlockStart", {
            "start": {"toolUse": {"toolUseId": "tooluse_" + call.id, "name": call.name}},
            "contentBlockIndex": index}))
        for part in call.pieces():
            pieces.append(event("contentBlockDelta", {"delta": {"toolUse": {"input": part}},
                                                      "contentBlockIndex": index}, paced=True))
        pieces.append(event("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    pieces.append(event("messageStop", {"stopReason": reply.stop}))
    pieces.append(event("metadata", {"usage": _bedrock_usage(reply),
                                     "metrics": {"latencyMs": latency_ms}}))
    return pieces


def bedrock_error(exception: str, message: str) -> tuple[int, bytes]:
    """The status and body of a Bedrock error the service model defines."""
    shape = BEDROCK.shape_for(exception)
    body = {"message": message}
    check_shape(shape, body, exception)
    return shape.metadata["error"]["httpStatusCode"], json.dumps(body).encode()


def event_stream_frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One message of the AWS event stream encoding: a prelude (total length, headers length,
    their CRC32), string-valued headers, the payload, and the CRC32 of everything before it."""
    encoded = b""
    for name, value in headers.items():
        name_bytes, value_bytes = name.encode(), value.encode()
        # Header value type 7 is a string with a 2-byte length.
        encoded += (struct.pack("!B", len(name_bytes)) + name_bytes
                    + struct.pack("!BH", 7, len(value_bytes)) + value_bytes)
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack("!II", total, len(encoded))
    prelude += struct.pack("!I", binascii.crc32(prelude))
    message = prelude + encoded + payload
    return message + struct.pack("!I", binascii.crc32(message))

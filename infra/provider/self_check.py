"""Checks the stand-in with the providers' own clients: the anthropic and openai SDKs pointed at it
(their stream parsers, with strict response validation) and botocore's bedrock-runtime client
(its event-stream decoder checks every frame's CRCs). Prints a line per check; exits 1 if one
failed.

    .venv/bin/python infra/provider/self_check.py               # starts a stand-in of its own
    .venv/bin/python infra/provider/self_check.py --url URL     # checks a running one
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import traceback
import urllib.error
import uuid
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import anthropic  # noqa: E402
import botocore.config  # noqa: E402
import botocore.eventstream  # noqa: E402
import botocore.exceptions  # noqa: E402
import botocore.session  # noqa: E402
import openai  # noqa: E402
from openai.lib.streaming.chat import ChatCompletionStreamState  # noqa: E402

import stand_in  # noqa: E402
import wire  # noqa: E402

WEATHER = {"type": "object", "required": ["city", "unit"],
           "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}}}
ASK = "Paris please, use get_weather"
# What the stand-in calls get_weather with when asked that way.
ARGS = {"city": ASK, "unit": "celsius"}
# In every request that asks for a fault: a stand-in counts attempts per request, so a check run
# again against the same one must not look like a retry of the first run.
RUN = uuid.uuid4().hex[:8]
CHECKS = []


def check(function):
    CHECKS.append(function)
    return function


def expect(condition, what):
    if not condition:
        raise AssertionError(what)


def raises(kind, call):
    try:
        call()
    except kind as error:
        return error
    raise AssertionError(f"expected {kind.__name__}")


# --- Anthropic -----------------------------------------------------------------------------------


def claude(url, **options):
    return anthropic.Anthropic(base_url=url, api_key="sk-self-check", max_retries=0,
                               _strict_response_validation=True, **options)


@check
def anthropic_reply(url):
    message = claude(url).messages.create(model="claude-sonnet-4-5", max_tokens=100,
                                          messages=[{"role": "user", "content": "hello there"}])
    expect(message.content[0].text == "You said: hello there", message.content)
    expect(message.stop_reason == "end_turn" and message.usage.output_tokens == 4, message)


@check
def anthropic_stream_with_a_tool_call_in_pieces(url):
    tools = [{"name": "get_weather", "description": "Weather.", "input_schema": WEATHER}]
    with claude(url).messages.stream(model="claude-sonnet-4-5", max_tokens=100, tools=tools,
                                     messages=[{"role": "user", "content": ASK}]) as stream:
        events = list(stream)
        final = stream.get_final_message()
    pieces = [e for e in events if e.type == "content_block_delta" and e.delta.type == "input_json_delta"]
    expect(len(pieces) >= 5, f"{len(pieces)} argument pieces")
    call = final.content[-1]
    expect(call.type == "tool_use" and call.name == "get_weather" and call.input == ARGS, call)
    expect(final.stop_reason == "tool_use", final.stop_reason)
    # The accumulator takes the cumulative usage of message_delta.
    delta = [e for e in events if e.type == "message_delta"][0]
    expect(final.usage.output_tokens == delta.usage.output_tokens > 1, final.usage)


@check
def anthropic_long_reply_cut_at_max_tokens(url):
    with claude(url).messages.stream(
            model="claude-sonnet-4-5", max_tokens=40,
            messages=[{"role": "user", "content": "go on [[stand-in: words=200]]"}]) as stream:
        final = stream.get_final_message()
    expect(final.stop_reason == "max_tokens" and final.usage.output_tokens == 40, final)
    expect(len(final.content[0].text.split()) == 40, final.content[0].text)


@check
def anthropic_errors(url):
    client = claude(url)

    def ask(marker):
        return lambda: client.messages.create(
            model="claude-sonnet-4-5", max_tokens=10,
            messages=[{"role": "user", "content": f"self-check {RUN} {marker} [[stand-in: {marker}]]"}])

    limited = raises(anthropic.RateLimitError, ask("fault=429 retry_after=1"))
    expect(limited.response.headers["retry-after"] == "1", limited.response.headers)
    expect(limited.response.headers["anthropic-ratelimit-requests-remaining"] == "0", "ratelimit")
    expect(limited.body["error"]["type"] == "rate_limit_error", limited.body)
    overloaded = raises(anthropic.OverloadedError, ask("fault=529"))
    expect(overloaded.status_code == 529 and overloaded.body["error"]["type"] == "overloaded_error",
           overloaded.body)
    raises(anthropic.InternalServerError, ask("fault=500"))
    raises(anthropic.BadRequestError, ask("bogus=1"))
    # Without the headers the SDK always sends.
    status, body = post(url + "/v1/messages", {"model": "m", "max_tokens": 1, "messages": []}, {})
    expect(status == 401 and body["error"]["type"] == "authentication_error", body)
    status, body = post(url + "/v1/messages", {"model": "m", "messages": [{"role": "user", "content": "x"}]},
                        {"x-api-key": "k", "anthropic-version": "2023-06-01"})
    expect(status == 400 and "max_tokens" in body["error"]["message"], body)
    anthropic.types.ErrorResponse.model_validate(body)


@check
def anthropic_reset_and_stall_break_the_stream(url):
    def stream(marker, **options):
        def run():
            with claude(url, **options).messages.stream(
                    model="claude-sonnet-4-5", max_tokens=100,
                    messages=[{"role": "user", "content": f"self-check {RUN} [[stand-in: {marker}]]"}]) as s:
                s.get_final_message()
        return run

    # Broken off mid-stream, the SDK raises its HTTP client's error as it is, not its own.
    reset = raises(Exception, stream("fault=reset words=10 at=3"))
    expect("reset" in str(reset), repr(reset))
    stalled = raises(Exception, stream("fault=stall stall=1.5 words=10", timeout=0.5))
    expect("Timeout" in type(stalled).__name__, repr(stalled))


# --- OpenAI --------------------------------------------------------------------------------------


def gpt(url):
    return openai.OpenAI(base_url=url + "/v1", api_key="sk-self-check", max_retries=0,
                         _strict_response_validation=True)


@check
def openai_reply(url):
    completion = gpt(url).chat.completions.create(
        model="gpt-4.1", messages=[{"role": "user", "content": "hello there"}])
    choice = completion.choices[0]
    expect(choice.message.content == "You said: hello there" and choice.finish_reason == "stop", choice)
    expect(completion.usage.completion_tokens == 4, completion.usage)


@check
def openai_stream_with_a_tool_call_in_pieces(url):
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]
    chunks = list(gpt(url).chat.completions.create(
        model="gpt-4.1", tools=tools, stream=True, stream_options={"include_usage": True},
        messages=[{"role": "user", "content": ASK}]))
    state = ChatCompletionStreamState()
    for chunk in chunks:
        state.handle_chunk(chunk)
    final = state.get_final_completion()
    call = final.choices[0].message.tool_calls[0]
    expect(call.function.name == "get_weather" and json.loads(call.function.arguments) == ARGS, call)
    expect(final.choices[0].finish_reason == "tool_calls", final.choices[0])
    pieces = [c for c in chunks if c.choices and c.choices[0].delta.tool_calls]
    expect(len(pieces) >= 5, f"{len(pieces)} argument pieces")
    expect(chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 1, chunks[-1])
    expect(all(c.usage is None for c in chunks[:-1]), "usage only on the last chunk")


@check
def openai_errors(url):
    client = gpt(url)
    limited = raises(openai.RateLimitError, lambda: client.chat.completions.create(
        model="gpt-4.1", messages=[{"role": "user", "content": f"self-check {RUN} [[stand-in: fault=429]]"}]))
    expect(limited.code == "rate_limit_exceeded" and "retry-after" in limited.response.headers, limited)
    expect(limited.response.headers["x-ratelimit-remaining-requests"] == "0", "ratelimit")
    raises(openai.InternalServerError, lambda: client.chat.completions.create(
        model="gpt-4.1", messages=[{"role": "user", "content": f"self-check {RUN} [[stand-in: fault=503]]"}]))
    status, body = post(url + "/v1/chat/completions", {"model": "m", "messages": []}, {})
    expect(status == 401 and body["error"]["type"] == "invalid_request_error", body)
    status, body = post(url + "/v1/chat/completions", {"model": "m"}, {"authorization": "Bearer k"})
    expect(status == 400 and "messages" in body["error"]["message"], body)
    openai.types.shared.ErrorObject.model_validate(body["error"])


# --- Bedrock -------------------------------------------------------------------------------------


def bedrock(url, **config):
    return botocore.session.get_session().create_client(
        "bedrock-runtime", region_name="us-east-1", endpoint_url=url,
        aws_access_key_id="AKIDSELFCHECK", aws_secret_access_key="secret",
        config=botocore.config.Config(retries={"total_max_attempts": 1}, **config))


BEDROCK_TOOLS = {"tools": [{"toolSpec": {"name": "get_weather", "inputSchema": {"json": WEATHER}}}]}


@check
def bedrock_converse(url):
    reply = bedrock(url).converse(modelId="anthropic.claude-sonnet-4-5-v1:0", toolConfig=BEDROCK_TOOLS,
                                  messages=[{"role": "user", "content": [{"text": ASK}]}])
    content = reply["output"]["message"]["content"]
    expect(content[0]["text"] == "Calling get_weather.", content)
    expect(content[1]["toolUse"]["input"] == ARGS and reply["stopReason"] == "tool_use", reply)


@check
def bedrock_converse_stream(url):
    reply = bedrock(url).converse_stream(modelId="anthropic.claude-sonnet-4-5-v1:0",
                                         toolConfig=BEDROCK_TOOLS,
                                         messages=[{"role": "user", "content": [{"text": ASK}]}])
    events = list(reply["stream"])
    text = "".join(e["contentBlockDelta"]["delta"].get("text", "") for e in events if "contentBlockDelta" in e)
    pieces = [e["contentBlockDelta"]["delta"]["toolUse"]["input"] for e in events
              if "contentBlockDelta" in e and "toolUse" in e["contentBlockDelta"]["delta"]]
    expect(text == "Calling get_weather." and len(pieces) >= 5, (text, pieces))
    expect(json.loads("".join(pieces)) == ARGS, pieces)
    expect(events[-2]["messageStop"]["stopReason"] == "tool_use", events[-2])
    expect(events[-1]["metadata"]["usage"]["outputTokens"] > 1, events[-1])


@check
def bedrock_errors(url):
    def converse(marker, client=None):
        return lambda: (client or bedrock(url)).converse(
            modelId="m", messages=[{"role": "user", "content": [{"text": f"self-check {RUN} [[stand-in: {marker}]]"}]}])

    for marker, code in (("fault=429", "ThrottlingException"),
                         ("fault=overloaded", "ServiceUnavailableException"),
                         ("fault=500", "InternalServerException"),
                         ("tool=nosuch", "ValidationException")):
        error = raises(botocore.exceptions.ClientError, converse(marker))
        expect(error.response["Error"]["Code"] == code, (marker, error.response))
    unsigned = bedrock(url, signature_version=botocore.UNSIGNED)
    error = raises(botocore.exceptions.ClientError, converse("id=unsigned", unsigned))
    expect(error.response["ResponseMetadata"]["HTTPStatusCode"] == 403, error.response)


@check
def event_stream_frames_decode_and_their_crcs_are_checked(url):
    frame = wire.event_stream_frame({":event-type": "messageStart"}, b'{"role":"assistant"}')
    buffer = botocore.eventstream.EventStreamBuffer()
    buffer.add_data(frame)
    message = next(iter(buffer))
    expect(message.headers[":event-type"] == "messageStart" and message.payload == b'{"role":"assistant"}',
           message)
    for at in (8, len(frame) - 6):  # the prelude's CRC, then the message's
        broken = bytearray(frame)
        broken[at] ^= 0xFF
        buffer = botocore.eventstream.EventStreamBuffer()
        buffer.add_data(bytes(broken))
        raises(botocore.eventstream.ChecksumMismatch, lambda: next(iter(buffer)))


@check
def a_field_the_definitions_lack_fails(url):
    raises(wire.NotInDefinition, lambda: wire.dump(
        anthropic.types.TextBlock(type="text", text="x", invented=True)))
    shape = wire.BEDROCK.shape_for("TokenUsage")
    raises(wire.NotInDefinition, lambda: wire.check_shape(
        shape, {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2, "invented": 1}, "usage"))
    raises(wire.NotInDefinition, lambda: wire.check_shape(shape, {"inputTokens": 1}, "usage"))


def post(url, body, headers):
    request = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a running stand-in (default: start one here)")
    url = parser.parse_args().url
    if not url:
        server = stand_in.StandIn(("127.0.0.1", 0), stand_in.Settings(ttft=0.01, tps=1000),
                                   log=False)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = "http://127.0.0.1:%d" % server.server_address[1]
    failed = 0
    for function in CHECKS:
        try:
            function(url.rstrip("/"))
            print(f"ok   {function.__name__}")
        except Exception:
            failed += 1
            print(f"FAIL {function.__name__}\n{traceback.format_exc()}")
    print(f"{len(CHECKS) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

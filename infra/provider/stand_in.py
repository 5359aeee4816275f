"""A stand-in for the model providers that behaves like them: Anthropic Messages, OpenAI Chat
Completions and Bedrock Converse / ConverseStream on one port, with real latency, rate limits,
overload, server errors, streams that break or stall, and a deterministic reply (see
conversation.py for what it answers, wire.py for how each provider's reply is shaped).

    .venv/bin/python infra/provider/stand_in.py --port 0

prints `stand-in: listening on http://127.0.0.1:PORT`, then a line per request saying what it
did. `GET /_stats` gives the counts of requests by outcome. infra/README.md has the details:
flags, directives (per request, in the last user message or an `x-stand-in` header), and how to
point the adapters at it.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import re
import signal
import socket
import struct
import sys
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import conversation  # noqa: E402
import wire  # noqa: E402
from conversation import BadRequest  # noqa: E402

# Faults a request can meet: an error status instead of a reply, or a stream that breaks off
# (connection reset) or goes silent for a while, part way through.
FAULTS = ("429", "overloaded", "500", "reset", "stall")
FAULT_ALIASES = {"529": "overloaded", "503": "overloaded"}


@dataclass
class Settings:
    """How every request behaves unless it says otherwise."""

    ttft: float = 0.6  # seconds to the first token
    tps: float = 60.0  # tokens per second after it
    retry_after: float = 2.0  # what a 429 asks the client to wait, in seconds
    stall: float = 10.0  # how long a stalled stream stays silent, in seconds
    faults: dict[str, float] = field(default_factory=dict)  # fault -> share of requests
    seed: int = 0


@dataclass
class Directive:
    """What one request asks for (`[[stand-in: key=value ...]]` or an `x-stand-in` header)."""

    ttft: float | None = None
    tps: float | None = None
    words: int | None = None  # the reply's length in tokens
    fault: str | None = None
    times: int | None = 1  # attempts that meet the fault; None: every attempt
    retry_after: float | None = None
    at: int | None = None  # the token a reset or stall strikes before (default: halfway)
    stall: float | None = None
    tools: list[str] | None = None  # tools to call (`tool=none`: no call)
    id: str | None = None  # counts this request's outcomes under `ids` in the stats


def parse_directive(text: str) -> Directive:
    directive = Directive()
    numbers = {"ttft": float, "tps": float, "words": int, "retry_after": float, "at": int,
               "stall": float}
    for item in text.split():
        key, sep, value = item.partition("=")
        if not sep or not value:
            raise BadRequest(f"stand-in: `{item}` is not key=value")
        try:
            if key in numbers:
                number = numbers[key](value)
                if number < 0 or (key == "tps" and number == 0):
                    raise ValueError
                setattr(directive, key, number)
            elif key == "fault":
                fault = FAULT_ALIASES.get(value, value)
                if fault not in FAULTS:
                    raise ValueError
                directive.fault = fault
            elif key == "times":
                directive.times = None if value == "always" else int(value)
            elif key == "tool":
                directive.tools = [] if value == "none" else value.split(",")
            elif key == "id":
                directive.id = value
            else:
                raise BadRequest(f"stand-in: unknown directive `{key}` (known: ttft, tps, words, "
                                 "fault, times, retry_after, at, stall, tool, id)")
        except ValueError:
            raise BadRequest(f"stand-in: `{item}` has a value `{key}` cannot take") from None
    return directive


class Refused(Exception):
    """A request answered with an error: `kind` is one of ERRORS' kinds."""

    def __init__(self, kind: str, message: str, code: str | None = None):
        super().__init__(message)
        self.kind, self.message, self.code = kind, message, code


class Stats:
    """Counts of requests by outcome, by API and by directive id; and the attempts seen of each
    request (by fingerprint), so a fault can strike the first attempts only."""

    def __init__(self):
        self.lock = threading.Lock()
        self.attempts: dict[str, int] = {}
        self.counts = {"requests": 0, "outcomes": {}, "apis": {}, "ids": {}, "client_gone": 0}

    def next_attempt(self, fingerprint: str) -> int:
        with self.lock:
            self.attempts[fingerprint] = self.attempts.get(fingerprint, 0) + 1
            return self.attempts[fingerprint]

    def record(self, api: str, outcome: str, request_id: str | None):
        """Counts a request once it is known what it meets, before the answer is written (so a
        stalled request counts while it stalls)."""
        with self.lock:
            counts = self.counts
            counts["requests"] += 1
            for table in (counts["outcomes"], counts["apis"].setdefault(api, {}),
                          counts["ids"].setdefault(request_id, {}) if request_id else {}):
                table[outcome] = table.get(outcome, 0) + 1

    def client_gone(self):
        with self.lock:
            self.counts["client_gone"] += 1

    def snapshot(self) -> dict:
        with self.lock:
            return json.loads(json.dumps(self.counts))


# --- the errors each provider answers with ------------------------------------------------------


def _anthropic_error(kind: str, message: str, code: str | None) -> tuple[int, dict, bytes]:
    status, error_type = {
        "429": (429, "rate_limit_error"), "overloaded": (529, "overloaded_error"),
        "500": (500, "api_error"), "auth": (401, "authentication_error"),
        "invalid": (400, "invalid_request_error"), "not_found": (404, "not_found_error"),
    }[kind]
    request_id = "req_" + uuid.uuid4().hex[:24]
    return status, {"request-id": request_id}, wire.anthropic_error(error_type, message, request_id)


def _openai_error(kind: str, message: str, code: str | None) -> tuple[int, dict, bytes]:
    status, error_type, default_code = {
        "429": (429, "requests", "rate_limit_exceeded"), "overloaded": (503, "server_error", None),
        "500": (500, "server_error", None), "auth": (401, "invalid_request_error", None),
        "invalid": (400, "invalid_request_error", None),
        "not_found": (404, "invalid_request_error", "unknown_url"),
    }[kind]
    headers = {"x-request-id": "req_" + uuid.uuid4().hex}
    return status, headers, wire.openai_error(error_type, message, code or default_code)


def _bedrock_error(kind: str, message: str, code: str | None) -> tuple[int, dict, bytes]:
    if kind in ("auth", "not_found"):
        # Errors of AWS's front door, which no service model defines: body {"message": ...}.
        status, body = (403 if kind == "auth" else 404), json.dumps({"message": message}).encode()
        exception = code or "UnknownOperationException"
    else:
        exception = {"429": "ThrottlingException", "overloaded": "ServiceUnavailableException",
                     "500": "InternalServerException", "invalid": "ValidationException"}[kind]
        status, body = wire.bedrock_error(exception, message)
    headers = {"x-amzn-RequestId": str(uuid.uuid4()),
               "x-amzn-ErrorType": f"{exception}:http://internal.amazon.com/coral/com.amazon.bedrock/"}
    return status, headers, body


ERRORS = {"anthropic": _anthropic_error, "openai": _openai_error, "bedrock": _bedrock_error}

FAULT_MESSAGES = {
    "anthropic": {"429": "This request would exceed your rate limit (stand-in).",
                  "overloaded": "Overloaded", "500": "Internal server error"},
    "openai": {"429": "Rate limit reached for requests (stand-in).",
               "overloaded": "The server is overloaded or not ready yet.",
               "500": "The server had an error while processing your request (stand-in)."},
    "bedrock": {"429": "Too many requests, please wait before trying again.",
                "overloaded": "Bedrock is unable to process your request.",
                "500": "The server encountered an internal error while processing the request."},
}


def check_auth(api: str, headers) -> None:
    scheme, _, token = headers.get("authorization", "").partition(" ")
    bearer = scheme.lower() == "bearer" and bool(token.strip())
    if api == "anthropic":
        # The API takes a key in x-api-key (what our adapter sends) or as a bearer token (what
        # the anthropic SDK 2.x sends).
        if not headers.get("x-api-key", "").strip() and not bearer:
            raise Refused("auth", "x-api-key header is required")
        if not headers.get("anthropic-version", "").strip():
            raise Refused("invalid", "anthropic-version: header is required")
    elif api == "openai":
        if not bearer:
            raise Refused("auth", "You didn't provide an API key. Send it in an "
                                  "Authorization header as `Bearer YOUR_KEY`.")
    else:
        if bearer:
            return  # a Bedrock API key
        authorization = headers.get("authorization", "")
        if not authorization:
            raise Refused("auth", "Missing Authentication Token", "MissingAuthenticationTokenException")
        scope = re.search(r"Credential=[^/]+/\d{8}/[^/]+/([^/]+)/aws4_request", authorization)
        if (not authorization.startswith("AWS4-HMAC-SHA256 ") or not scope
                or "SignedHeaders=" not in authorization or "Signature=" not in authorization
                or not headers.get("x-amz-date")):
            raise Refused("auth", "Authorization header requires Credential, SignedHeaders and "
                                  "Signature, and the request an X-Amz-Date header.",
                          "IncompleteSignatureException")
        if scope.group(1) != "bedrock":
            raise Refused("auth", "Credential should be scoped to correct service: 'bedrock'.",
                          "InvalidSignatureException")


def ratelimit_headers(api: str, limited: bool, wait: float) -> dict:
    """The rate limit headers Anthropic and OpenAI send on every response."""
    headers = {}
    if api == "anthropic":
        reset = (datetime.now(timezone.utc) + timedelta(seconds=max(wait, 1)))
        for name, limit in (("requests", 1000), ("tokens", 450000), ("input-tokens", 400000),
                            ("output-tokens", 50000)):
            prefix = f"anthropic-ratelimit-{name}"
            headers[f"{prefix}-limit"] = str(limit)
            headers[f"{prefix}-remaining"] = "0" if limited and name == "requests" else str(limit - 1)
            headers[f"{prefix}-reset"] = reset.isoformat(timespec="seconds").replace("+00:00", "Z")
    elif api == "openai":
        reset = f"{int(wait * 1000)}ms" if wait < 1 else f"{wait:g}s"
        for name, limit in (("requests", 10000), ("tokens", 2000000)):
            headers[f"x-ratelimit-limit-{name}"] = str(limit)
            headers[f"x-ratelimit-remaining-{name}"] = "0" if limited and name == "requests" else str(limit - 1)
            headers[f"x-ratelimit-reset-{name}"] = reset if limited else "6ms"
    return headers


# --- the server ----------------------------------------------------------------------------------

ROUTES = [
    (re.compile(r"^/v1/messages$"), "anthropic", None),
    (re.compile(r"^(/v1)?/chat/completions$"), "openai", None),
    (re.compile(r"^/model/([^/]+)/converse$"), "bedrock", False),
    (re.compile(r"^/model/([^/]+)/converse-stream$"), "bedrock", True),
]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked streams, as the providers do
    server: "StandIn"

    def log_message(self, format, *args):  # one line per request is printed by `_log` instead
        pass

    def do_GET(self):
        if self.path.split("?")[0] == "/_stats":
            self._whole(200, {"content-type": "application/json"},
                        json.dumps(self.server.stats.snapshot()).encode())
        else:
            self._whole(404, {"content-type": "application/json"}, b'{"message":"Not Found"}')

    def do_POST(self):
        path = urllib.parse.urlsplit(self.path).path
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        for pattern, api, stream in ROUTES:
            match = pattern.match(path)
            if match:
                break
        else:
            self._whole(404, {"content-type": "application/json"}, b'{"message":"Not Found"}')
            self._log(f"POST {path} -> 404 (no such API here)")
            return
        model = urllib.parse.unquote(match.group(1)) if api == "bedrock" and match.lastindex else None
        self.directive, self.outcome = Directive(), "ok"
        try:
            try:
                note = self._answer(api, raw, bool(stream), model)
            except (Refused, BadRequest) as refusal:
                if isinstance(refusal, BadRequest):
                    refusal = Refused("invalid", str(refusal))
                status, headers, body = ERRORS[api](refusal.kind, refusal.message, refusal.code)
                headers["content-type"] = "application/json"
                self._count(api, str(status))
                note = refusal.message
                self._whole(status, headers, body)
        except (BrokenPipeError, ConnectionResetError) as e:
            # It gave up (a timeout) or broke off; what it met has been counted.
            self.server.stats.client_gone()
            note = f"the client went away: {e}"
        outcome, directive = self.outcome, self.directive
        self._log(f"{api} POST {path} -> {outcome}: {note}" + (f" [id={directive.id}]" if directive.id else ""))

    def _count(self, api: str, outcome: str) -> None:
        self.outcome = outcome
        self.server.stats.record(api, outcome, self.directive.id)

    def _answer(self, api: str, raw: bytes, stream: bool, model: str | None) -> str:
        """Answers a request; returns a note for the log. Raises Refused or BadRequest for one
        the provider would refuse."""
        check_auth(api, self.headers)
        try:
            body = json.loads(raw)
        except ValueError as e:
            raise Refused("invalid", f"The request body is not valid JSON: {e}") from None
        if not isinstance(body, dict):
            raise Refused("invalid", "The request body must be a JSON object")
        try:
            request = conversation.read(api, body, stream, model)
        except (TypeError, AttributeError, KeyError) as e:  # a field of an unexpected type
            raise Refused("invalid", f"The request body has an unexpected shape: {e!r}") from None
        directive = self.directive = parse_directive(
            f"{self.headers.get('x-stand-in', '')} {request.markers}")
        settings = self.server.settings
        attempt = self.server.stats.next_attempt(request.fingerprint)
        fault = self._fault(request, directive, attempt)
        wait = directive.retry_after if directive.retry_after is not None else settings.retry_after
        if fault in ("429", "overloaded", "500"):
            status, headers, body = ERRORS[api](fault, FAULT_MESSAGES[api][fault], None)
            headers.update(ratelimit_headers(api, fault == "429", wait))
            if fault == "429" and api != "bedrock":  # Bedrock sends no retry-after
                headers["retry-after"] = f"{wait:g}"
            headers["content-type"] = "application/json"
            self._count(api, fault)
            self._whole(status, headers, body)
            return f"attempt {attempt}: HTTP {status}" + (f", retry-after {wait:g}s" if "retry-after" in headers else "")
        reply = conversation.answer(request, directive.tools, directive.words)
        self._count(api, fault or "ok")
        ttft = directive.ttft if directive.ttft is not None else settings.ttft
        tps = directive.tps if directive.tps is not None else settings.tps
        stall = directive.stall if directive.stall is not None else settings.stall
        latency_ms = int(1000 * (ttft + max(reply.output_tokens - 1, 0) / tps))
        headers = ratelimit_headers(api, False, 0)
        if api == "anthropic":
            headers["request-id"] = "req_" + uuid.uuid4().hex[:24]
        elif api == "openai":
            headers["x-request-id"] = "req_" + uuid.uuid4().hex
            headers["openai-processing-ms"] = str(latency_ms)
        else:
            headers["x-amzn-RequestId"] = str(uuid.uuid4())
        if request.stream:
            if api == "anthropic":
                pieces = wire.anthropic_stream(reply, request.model)
            elif api == "openai":
                pieces = wire.openai_stream(reply, request.model, request.include_usage)
            else:
                pieces = wire.bedrock_stream(reply, latency_ms)
            headers["content-type"] = ("application/vnd.amazon.eventstream" if api == "bedrock"
                                       else "text/event-stream; charset=utf-8")
            headers["cache-control"] = "no-cache"
            self._stream(headers, pieces, ttft, tps, fault, directive.at, stall)
        else:
            if api == "anthropic":
                body = wire.anthropic_message(reply, request.model)
            elif api == "openai":
                body = wire.openai_completion(reply, request.model)
            else:
                body = wire.bedrock_converse(reply, latency_ms)
            headers["content-type"] = "application/json"
            time.sleep(latency_ms / 1000)  # the whole reply is ready only once it is written
            self._whole(200, headers, body, fault, stall)
        kind = "stream" if request.stream else "reply"
        note = (f"attempt {attempt}: {kind} of {reply.output_tokens} tokens, {reply.stop}, "
                f"ttft {ttft:g}s, {tps:g} tokens/s")
        if fault:
            note += f", {fault}" + (f" {stall:g}s" if fault == "stall" else "")
        return note

    def _fault(self, request, directive: Directive, attempt: int) -> str | None:
        if directive.fault:
            return directive.fault if directive.times is None or attempt <= directive.times else None
        shares = self.server.settings.faults
        if not shares:
            return None
        # Drawn from the request and its attempt, so a run with the same seed and the same
        # requests meets the same faults whatever order concurrent requests arrive in.
        draw = random.Random(f"{self.server.settings.seed}:{request.fingerprint}:{attempt}").random()
        for fault, share in shares.items():
            if draw < share:
                return fault
            draw -= share
        return None

    # --- writing -------------------------------------------------------------------------------

    def _head(self, status: int, headers: dict, length: int | None) -> None:
        self.send_response_only(status)
        self.send_header("date", self.date_time_string())
        for name, value in headers.items():
            self.send_header(name, value)
        if length is None:
            self.send_header("transfer-encoding", "chunked")
        else:
            self.send_header("content-length", str(length))
        self.end_headers()

    def _whole(self, status, headers, body: bytes, fault=None, stall=0.0) -> None:
        self._head(status, headers, len(body))
        if fault in ("reset", "stall"):
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            if fault == "reset":
                self._reset()
                return
            time.sleep(stall)
            body = body[len(body) // 2:]
        self.wfile.write(body)

    def _stream(self, headers, pieces, ttft, tps, fault, at, stall) -> None:
        self._head(200, headers, None)
        paced = sum(p.paced for p in pieces)
        strike = min(at if at is not None else paced // 2, max(paced - 1, 0))
        first, count = None, 0
        for piece in pieces:
            if piece.paced:
                if fault and count == strike:
                    if fault == "reset":
                        self._reset()
                        return
                    time.sleep(stall)
                    first = time.monotonic() - ttft - count / tps  # go on at the same pace
                now = time.monotonic()
                if first is None:
                    time.sleep(ttft)
                    first = time.monotonic()
                else:
                    time.sleep(max(0.0, first + count / tps - now))
                count += 1
            self._chunk(piece.data)
        self._chunk(b"")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _reset(self) -> None:
        """Drops the connection with a TCP reset, as a proxy or a crashed server does."""
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.wfile.close()
        self.rfile.close()
        self.connection.close()  # the last reference: the socket closes now, with a reset
        self.wfile = io.BytesIO()  # what the server still flushes and closes after the handler

    def _log(self, line: str) -> None:
        if not self.server.log:
            return
        with self.server.print_lock:
            print(f"stand-in: {line}", flush=True)


class StandIn(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # a soak opens many connections at once

    def __init__(self, address, settings: Settings, log: bool = True):
        super().__init__(address, Handler)
        self.settings = settings
        self.log = log
        self.stats = Stats()
        self.print_lock = threading.Lock()


# --- the command line ----------------------------------------------------------------------------


def parse_faults(text: str) -> dict[str, float]:
    """`429=0.05,overloaded=0.02,reset=0.01` to {fault: share}."""
    shares = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, share = item.partition("=")
        name = FAULT_ALIASES.get(name, name)
        if name not in FAULTS:
            raise ValueError(f"`{name}` is not a fault (known: {', '.join(FAULTS)})")
        try:
            shares[name] = float(share)
        except ValueError:
            raise ValueError(f"`{item}`: the share must be a number between 0 and 1") from None
    if any(s < 0 for s in shares.values()) or sum(shares.values()) > 1:
        raise ValueError("the shares must be between 0 and 1 and add up to at most 1")
    return shares


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv=None) -> int:
    env = os.environ.get
    parser = argparse.ArgumentParser(
        description="A provider stand-in: Anthropic, OpenAI and Bedrock APIs with real latency and faults.",
        epilog="Every flag has an environment variable: STAND_IN_ and its name in capitals "
               "(STAND_IN_TTFT=0.2). Per request: [[stand-in: key=value ...]] in the last user "
               "message or an x-stand-in header; see infra/README.md.")
    parser.add_argument("--host", default=env("STAND_IN_HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(env("STAND_IN_PORT", "8710")),
                        help="0 picks a free port (printed on start)")
    parser.add_argument("--ttft", type=float, default=float(env("STAND_IN_TTFT", "0.6")),
                        help="seconds to the first token (default 0.6)")
    parser.add_argument("--tps", type=float, default=float(env("STAND_IN_TPS", "60")),
                        help="tokens per second after the first (default 60)")
    parser.add_argument("--retry-after", type=float, default=float(env("STAND_IN_RETRY_AFTER", "2")),
                        help="seconds a 429 asks to wait (default 2)")
    parser.add_argument("--stall", type=float, default=float(env("STAND_IN_STALL", "10")),
                        help="seconds a stalled stream stays silent (default 10)")
    parser.add_argument("--faults", default=env("STAND_IN_FAULTS", ""),
                        help="shares of requests that meet each fault, e.g. 429=0.05,overloaded=0.02,"
                             "500=0.01,reset=0.01,stall=0.01")
    parser.add_argument("--seed", type=int, default=int(env("STAND_IN_SEED", "0")),
                        help="seed of the fault draws")
    parser.add_argument("--stats", action="store_true", default=bool(env("STAND_IN_STATS")),
                        help="print the counts by outcome (as GET /_stats gives them) on exit")
    parser.add_argument("--exit-with-stdin", action="store_true",
                        help="exit when stdin closes (a test harness that dies takes the stand-in with it)")
    args = parser.parse_args(argv)
    try:
        faults = parse_faults(args.faults)
    except ValueError as e:
        parser.error(f"--faults: {e}")
    if args.tps <= 0 or args.ttft < 0 or args.stall < 0 or args.retry_after < 0:
        parser.error("--tps must be above 0, --ttft, --stall and --retry-after at least 0")
    settings = Settings(ttft=args.ttft, tps=args.tps, retry_after=args.retry_after,
                        stall=args.stall, faults=faults, seed=args.seed)
    server = StandIn((args.host, args.port), settings)
    host, port = server.server_address[:2]
    print(f"stand-in: listening on http://{host}:{port}", flush=True)
    if args.exit_with_stdin:
        def watch():
            sys.stdin.buffer.read()
            os._exit(0)
        threading.Thread(target=watch, daemon=True).start()
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        if args.stats:
            print("stand-in: stats " + json.dumps(server.stats.snapshot()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

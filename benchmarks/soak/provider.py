"""The provider stand-in (infra/provider/stand_in.py) as the soak runs it, with two additions:

- a JSON line per request in `--requests FILE`: when it started, how long the stand-in took to
  answer it (its own time, the model's time as the soak counts it), what it met (`ok`, `429`,
  `reset`, ...), whether the client went away before the answer was written, and which
  conversation and turn it belongs to (read from the `cNNN-tNN` tags the soak writes into its
  user messages; the newest tag in a request is the turn it serves);
- a `sleep` call asks for 2 to 6 seconds (the stand-in would fill in the schema's minimum, 0,
  which returns at once), so a sleeping turn waits on the relay queue as a real one would.

Everything else (latency, faults, directives, `GET /_stats`) is the stand-in's:

    .venv/bin/python benchmarks/soak/provider.py --requests requests.jsonl -- --port 0 --faults 429=0.05
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../infra/provider"))

import conversation  # noqa: E402
import stand_in  # noqa: E402

TAG = re.compile(r"\bc(\d{3,})-t(\d{2,})\b")
SLEEP_SECONDS = (2, 6)

_write_lock = threading.Lock()
_requests_file = None


def _turn_of(raw: bytes) -> tuple[int | None, int | None]:
    """The conversation and turn a request serves: the newest tag among its messages."""
    best = None
    for match in TAG.finditer(raw.decode("utf-8", "replace")):
        conv, turn = int(match.group(1)), int(match.group(2))
        if best is None or turn > best[1]:
            best = (conv, turn)
    return best if best else (None, None)


_original_answer = conversation.answer


def _answer(request, tools_asked, words):
    reply = _original_answer(request, tools_asked, words)
    low, high = SLEEP_SECONDS
    for call in reply.calls:
        if call.name == "sleep":
            seconds = low + int(request.fingerprint[:8], 16) % (high - low + 1)
            call.arguments = json.dumps({"seconds": seconds})
    return reply


conversation.answer = _answer


class TimedHandler(stand_in.Handler):
    """The stand-in's handler, timing each request and writing a line for it."""

    def do_POST(self):
        self._soak = {"started": time.time()}
        began = time.monotonic()
        try:
            super().do_POST()
        finally:
            record = self._soak
            record["seconds"] = round(time.monotonic() - began, 4)
            record.setdefault("outcome", getattr(self, "outcome", None))
            if _requests_file is not None:
                line = json.dumps(record, separators=(",", ":"))
                with _write_lock:
                    _requests_file.write(line + "\n")
                    _requests_file.flush()

    def _answer(self, api, raw, stream, model):
        conv, turn = _turn_of(raw)
        try:
            body = json.loads(raw)
            messages = body.get("messages") or []
            last = messages[-1] if messages else {}
            content = last.get("content")
            after_tool = isinstance(content, list) and any(
                isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
        except (ValueError, AttributeError):
            messages, after_tool = [], False
        self._soak.update(conv=conv, turn=turn, messages=len(messages), after_tool=after_tool)
        return super()._answer(api, raw, stream, model)

    def _count(self, api, outcome):
        super()._count(api, outcome)
        self._soak["outcome"] = outcome

    def _log(self, line):
        self._soak["note"] = line
        if "client went away" in line:
            self._soak["gone"] = True
        super()._log(line)


def main() -> int:
    global _requests_file
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", required=True, help="where the JSON line per request goes")
    parser.add_argument("stand_in_args", nargs=argparse.REMAINDER,
                        help="after --: the stand-in's own flags")
    args = parser.parse_args()
    rest = args.stand_in_args[1:] if args.stand_in_args[:1] == ["--"] else args.stand_in_args
    _requests_file = open(args.requests, "a", encoding="utf-8")
    stand_in.Handler = TimedHandler
    return stand_in.main(rest)


if __name__ == "__main__":
    sys.exit(main())

"""A counting proxy between `infinity-local` and the emulator: what the AWS bill is made of.

`infinity-local` runs with `AWS_ENDPOINT_URL` pointing here; every request is forwarded to the
emulator unchanged but for one field, and counted:

- SQS: requests by action and queue (FIFO or standard); messages a `ReceiveMessage` returned;
- DynamoDB: requests by action, and the read and write capacity units DynamoDB itself reports
  (`ReturnConsumedCapacity: TOTAL` is added to every request that can take it: the one change
  made on the way; the SDK ignores the extra field in the answer);
- invocations as Lambda would bill them: from a `ReceiveMessage` of the input or relay queue
  that returned messages to the last delete or visibility change of those messages (what the
  local runner does when the handler returns), with how many messages each carried;
- commits per thread: `TransactWriteItems` that write a thread's record (`sk = R`), i.e. the
  slices that committed;
- everything else (the Scheduler's REST calls, S3) by method and path.

`GET /_meter` answers the counts as JSON (the soak reads them at the end).

    .venv/bin/python benchmarks/soak/meter.py --upstream http://127.0.0.1:4599 --port 0
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import threading
import time
import urllib.parse
from collections import Counter, defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Actions that take ReturnConsumedCapacity, and whether their units are reads or writes.
DYNAMODB_UNITS = {
    "GetItem": "read", "BatchGetItem": "read", "Query": "read", "Scan": "read",
    "TransactGetItems": "read", "PutItem": "write", "UpdateItem": "write",
    "DeleteItem": "write", "BatchWriteItem": "write", "TransactWriteItems": "write",
}
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
              "proxy-authorization", "proxy-authenticate", "content-length", "host",
              "accept-encoding"}  # answers uncompressed, so they can be read


class Meter:
    def __init__(self, watched_queues: set[str]):
        self.lock = threading.Lock()
        self.watched = watched_queues  # queue names whose receives are invocations
        self.requests: Counter = Counter()  # "sqs ReceiveMessage fifo" -> n
        self.units: Counter = Counter()  # "read"/"write" -> capacity units
        self.units_by_action: Counter = Counter()
        self.received: Counter = Counter()  # queue name -> messages received
        self.empty_receives: Counter = Counter()
        self.commits: Counter = Counter()  # thread id -> commits
        self.errors: Counter = Counter()  # "dynamodb TransactWriteItems 400 ...Exception" -> n
        # receipt handle -> invocation number; invocation -> [queue, start, end, messages]
        self.receipts: dict[str, int] = {}
        self.invocations: list[list] = []
        self.bytes_up = 0
        self.bytes_down = 0

    def snapshot(self) -> dict:
        with self.lock:
            invocations = defaultdict(lambda: {"count": 0, "messages": 0, "seconds": 0.0,
                                               "unfinished": 0})
            for queue, start, end, messages in self.invocations:
                entry = invocations[queue]
                entry["count"] += 1
                entry["messages"] += messages
                if end is None:
                    entry["unfinished"] += 1
                else:
                    entry["seconds"] += end - start
            return {
                "requests": dict(self.requests), "units": dict(self.units),
                "units_by_action": dict(self.units_by_action), "received": dict(self.received),
                "empty_receives": dict(self.empty_receives), "commits": dict(self.commits),
                "errors": dict(self.errors), "invocations": dict(invocations),
                "invocation_durations": [
                    [q, round(e - s, 3)] for q, s, e, _ in self.invocations if e is not None],
                "bytes_up": self.bytes_up, "bytes_down": self.bytes_down,
            }


def queue_name(url: str | None) -> str:
    return (url or "").rstrip("/").rsplit("/", 1)[-1]


class Proxy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "MeterServer"

    def log_message(self, format, *args):
        pass

    def do_GET(self):
        if self.path.split("?")[0] == "/_meter":
            body = json.dumps(self.server.meter.snapshot()).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self._forward()

    def do_POST(self):
        self._forward()

    def do_PUT(self):
        self._forward()

    def do_DELETE(self):
        self._forward()

    def do_HEAD(self):
        self._forward()

    def _upstream(self) -> http.client.HTTPConnection:
        conn = getattr(self, "_conn", None)
        if conn is None:
            parts = urllib.parse.urlsplit(self.server.upstream)
            conn = self._conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
        return conn

    def _forward(self):
        meter = self.server.meter
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        target = self.headers.get("x-amz-target", "")
        service, action, request = self._classify(target, body)
        if service == "dynamodb" and action in DYNAMODB_UNITS and request is not None:
            if "ReturnConsumedCapacity" not in request:
                request["ReturnConsumedCapacity"] = "TOTAL"
                body = json.dumps(request).encode()
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        headers["content-length"] = str(len(body))
        started = time.monotonic()
        for attempt in (1, 2):
            conn = self._upstream()
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                response = conn.getresponse()
                data = response.read()
                break
            except (http.client.HTTPException, OSError):
                conn.close()
                self._conn = None
                if attempt == 2:
                    self.send_error(502, "upstream unreachable")
                    return
        now = time.monotonic()
        self._count(service, action, request, response.status, data, started, now)
        self.send_response_only(response.status)
        for name, value in response.getheaders():
            if name.lower() not in HOP_BY_HOP:
                self.send_header(name, value)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        with meter.lock:
            meter.bytes_up += len(body)
            meter.bytes_down += len(data)

    def _classify(self, target: str, body: bytes):
        if target.startswith("DynamoDB_"):
            service, action = "dynamodb", target.split(".", 1)[-1]
        elif target.startswith("AmazonSQS."):
            service, action = "sqs", target.split(".", 1)[-1]
        else:
            path = urllib.parse.urlsplit(self.path).path
            first = path.strip("/").split("/", 1)[0]
            return "other", f"{self.command} /{first}", None
        try:
            request = json.loads(body) if body else {}
        except ValueError:
            request = None
        return service, action, request

    def _count(self, service, action, request, status, data, started, now):
        meter = self.server.meter
        try:
            answer = json.loads(data) if data and service != "other" else {}
        except ValueError:
            answer = {}
        with meter.lock:
            key = f"{service} {action}"
            if service == "sqs" and request is not None:
                queue = queue_name(request.get("QueueUrl"))
                key += " fifo" if queue.endswith(".fifo") else " standard"
            meter.requests[key] += 1
            if status >= 400:
                kind = answer.get("__type", "") if isinstance(answer, dict) else ""
                meter.errors[f"{key} {status} {kind.rsplit('#', 1)[-1]}"] += 1
                return
            if service == "dynamodb":
                self._count_dynamodb(meter, action, request, answer)
            elif service == "sqs" and request is not None:
                self._count_sqs(meter, action, request, answer, now)

    @staticmethod
    def _count_dynamodb(meter, action, request, answer):
        consumed = answer.get("ConsumedCapacity") if isinstance(answer, dict) else None
        if isinstance(consumed, dict):
            consumed = [consumed]
        units = sum(c.get("CapacityUnits", 0) for c in consumed or [] if isinstance(c, dict))
        kind = DYNAMODB_UNITS.get(action)
        if kind:
            meter.units[kind] += units
            meter.units_by_action[action] += units
        if action == "TransactWriteItems" and isinstance(request, dict):
            for item in request.get("TransactItems", []):
                put = item.get("Put") or {}
                update = item.get("Update") or {}
                key = put.get("Item") or update.get("Key") or {}
                pk = (key.get("pk") or {}).get("S", "")
                sk = (key.get("sk") or {}).get("S", "")
                if sk == "R" and pk.startswith("T#"):
                    meter.commits[pk[2:]] += 1

    @staticmethod
    def _count_sqs(meter, action, request, answer, now):
        queue = queue_name(request.get("QueueUrl"))
        if action == "ReceiveMessage":
            messages = answer.get("Messages") or []
            if not messages:
                meter.empty_receives[queue] += 1
                return
            meter.received[queue] += len(messages)
            if queue in meter.watched:
                meter.invocations.append([queue, now, None, len(messages)])
                number = len(meter.invocations) - 1
                for m in messages:
                    meter.receipts[m.get("ReceiptHandle", "")] = number
            return
        if action in ("DeleteMessageBatch", "ChangeMessageVisibilityBatch"):
            handles = [e.get("ReceiptHandle", "") for e in request.get("Entries", [])]
        elif action in ("DeleteMessage", "ChangeMessageVisibility"):
            handles = [request.get("ReceiptHandle", "")]
        else:
            return
        for handle in handles:
            number = meter.receipts.get(handle)
            if number is not None:
                meter.invocations[number][2] = now


class MeterServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address, upstream: str, meter: Meter):
        super().__init__(address, Proxy)
        self.upstream = upstream
        self.meter = meter


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", required=True, help="the emulator, e.g. http://127.0.0.1:4599")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--watch", action="append", default=[],
                        help="a queue name whose receives are invocations (input, relay)")
    args = parser.parse_args()
    server = MeterServer(("127.0.0.1", args.port), args.upstream, Meter(set(args.watch)))
    print(f"meter: listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

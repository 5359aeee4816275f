"""The soak: many conversations through the local stack on LocalStack, with a model that takes
seconds, calls tools, rate-limits and drops connections, and a handler killed with `kill -9`
now and then. docs/benchmarks.md ("The soak") says what it measures and how to read it.

    make bench-soak                                   # 200 conversations x 10 turns, 10 kills
    .venv/bin/python benchmarks/soak/soak.py --quick  # 10 x 3, 2 kills: a few minutes

What runs, each in its own process, all stopped at the end:
- LocalStack in host mode on a port of its own (default 4599), with a copy of the file system
  `INFINITY_EMULATOR=localstack infra/local/install.sh` prepared, and a fresh stack from
  template.yaml (`infra/local/bootstrap.py`);
- the provider stand-in (benchmarks/soak/provider.py over infra/provider/stand_in.py) as the
  agent's Anthropic endpoint;
- the counting proxy (benchmarks/soak/meter.py) between the handler and LocalStack;
- `infinity-local` (a copy of target/debug/infinity-local unless --runner says otherwise), with
  the function timeout enforced, killed with SIGKILL --kills times and started again each time.

This script is the people: it sends each conversation's turns to the input FIFO queue as the
CLI and the API do (group = thread, deduplication id = input id), waits for each reply on the
output queue (dropping copies by event id, as every reader must), then checks everything
against the table. Results: a summary on standard output, everything in RUN_DIR/results.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import boto3
from botocore.config import Config

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
PYTHON = REPO / ".venv/bin/python"
LS_PYTHON = REPO / ".venv-localstack/bin/python"
LS_PREPARED = REPO / "infra/local/run/localstack"

# us-east-1 on-demand list prices, as docs/benchmarks.md ("Estimated AWS cost per million
# slices") uses them: verify before relying on them.
PRICE = {
    "dynamodb_wru": 0.625e-6,
    "dynamodb_rru": 0.125e-6,
    "sqs_fifo": 0.50e-6,
    "sqs_standard": 0.40e-6,
    "lambda_invocation": 0.20e-6,
    "lambda_gb_second": 0.0000133334,  # arm64
}
AGENT_MEMORY_GB = 128 / 1024  # template.yaml sets no MemorySize on the functions: Lambda's 128 MB

# What the people say. No word is a tool's name, so only the turns meant to call a tool do.
WORDS = ("harbour lights morning tide lantern copper garden river mountain letter market bread "
         "violin compass orchard winter summer kettle station bridge island meadow window ladder "
         "painting ferry candle pebble village forest cloud ribbon").split()


def log(message: str) -> None:
    stamp = dt.datetime.now().strftime("%H:%M:%S")
    print(f"[soak {stamp}] {message}", file=sys.stderr, flush=True)


def quantile(values: list[float], q: float) -> float | None:
    """Nearest-rank quantile; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 1))))
    return ordered[rank - 1]


def parse_at(text: str) -> float:
    """An RFC 3339 time (the events' `at`) as a Unix time."""
    text = re.sub(r"(\.\d{6})\d+", r"\1", text.replace("Z", "+00:00"))
    return dt.datetime.fromisoformat(text).timestamp()


def pair(text: str) -> tuple[float, float]:
    low, _, high = text.partition(",")
    return float(low), float(high or low)


# --- processes -----------------------------------------------------------------------------------


class Processes:
    """The processes this run started, stopped (by their own pid) at the end."""

    def __init__(self):
        self.started: list[tuple[str, subprocess.Popen]] = []

    def start(self, name: str, argv: list[str], log_path: Path, env=None, cwd=None) -> subprocess.Popen:
        out = open(log_path, "ab")
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=env, cwd=cwd)
        out.close()
        self.started.append((name, process))
        return process

    def stop_all(self) -> None:
        for name, process in reversed(self.started):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def wait_for_line(path: Path, pattern: str, process: subprocess.Popen, timeout: float) -> re.Match:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if path.exists():
            match = re.search(pattern, path.read_text(errors="replace"))
            if match:
                return match
        if process.poll() is not None:
            raise SystemExit(f"soak: {path.name}: the process exited:\n{path.read_text(errors='replace')[-2000:]}")
        time.sleep(0.2)
    raise SystemExit(f"soak: {path.name}: no line matching {pattern!r} within {timeout:g}s")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=2).read()
        return True
    except Exception as e:  # noqa: BLE001 - any answer, even an error status, is an answer
        return hasattr(e, "code")


def start_localstack(procs: Processes, run: Path, port: int) -> str:
    url = f"http://127.0.0.1:{port}"
    if answers(f"{url}/_localstack/health"):
        raise SystemExit(f"soak: something already answers on port {port}; pick another with --port")
    if not (LS_PYTHON.exists() and (LS_PREPARED / "server.test.pem").exists()):
        log("preparing LocalStack (INFINITY_EMULATOR=localstack infra/local/install.sh)")
        subprocess.run(["bash", str(REPO / "infra/local/install.sh")], check=True,
                       env={**os.environ, "INFINITY_EMULATOR": "localstack"})
    root = run / "localstack-root"
    shutil.rmtree(root, ignore_errors=True)  # a run folder used again starts from a fresh copy
    shutil.copytree(LS_PREPARED / "root", root, symlinks=True)
    # The gateway on 127.0.0.1 only: an IPv4 GATEWAY_LISTEN listens on every interface whatever its
    # host; an IPv6 one (here 127.0.0.1 mapped into IPv6) is bound as given (infra/README.md).
    env = {**os.environ, "GATEWAY_LISTEN": f"[::ffff:127.0.0.1]:{port}", "LOCALSTACK_HOST": f"127.0.0.1:{port}",
           "SERVICES": "sqs,dynamodb,scheduler,ssm,secretsmanager,sts,s3",
           "SQS_ENDPOINT_STRATEGY": "path", "OVERRIDE_IN_DOCKER": "0", "FILESYSTEM_ROOT": str(root),
           "SKIP_SSL_CERT_DOWNLOAD": "1", "CUSTOM_SSL_CERT_PATH": str(LS_PREPARED / "server.test.pem"),
           "DISABLE_EVENTS": "1"}
    process = procs.start("localstack", [str(LS_PYTHON), "-m", "localstack.runtime.main"],
                          run / "localstack.log", env=env, cwd=run)
    deadline = time.time() + 120
    while not answers(f"{url}/_localstack/health"):
        if process.poll() is not None or time.time() > deadline:
            raise SystemExit(f"soak: LocalStack did not start; see {run / 'localstack.log'}")
        time.sleep(0.5)
    return url


def bootstrap(run: Path, prefix: str, port: int) -> dict[str, str]:
    env_file = run / "env.sh"
    subprocess.run([str(PYTHON), str(REPO / "infra/local/bootstrap.py"), "--prefix", prefix,
                    "--env-file", str(env_file)], check=True, stdout=subprocess.DEVNULL,
                   stderr=open(run / "bootstrap.log", "w"),
                   env={**os.environ, "INFINITY_EMULATOR": "localstack",
                        "INFINITY_LOCAL_LOCALSTACK_PORT": str(port)})
    env = {}
    for line in env_file.read_text().splitlines():
        if line.startswith("export ") and "=" in line:
            name, _, value = line[len("export "):].partition("=")
            env[name] = value.strip().strip("'\"")
    return env


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process, from /proc (0 when it cannot be read)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


class Runner:
    """One `infinity-local` (a Lambda instance, with its four pollers), started again after
    each kill."""

    def __init__(self, procs: Processes, binary: Path, env: dict, run: Path, number: int):
        self.procs, self.binary, self.env, self.run, self.number = procs, binary, env, run, number
        self.incarnation = 0
        self.process: subprocess.Popen | None = None
        self.cpu = 0.0  # CPU seconds of the incarnations that ended
        self.exits: list[str] = []  # incarnations that ended by themselves, and how

    def start(self) -> None:
        self.incarnation += 1
        log_path = self.run / f"runner-{self.number}-{self.incarnation:02d}.log"
        self.process = self.procs.start("infinity-local", [str(self.binary)], log_path, env=self.env)

    def kill(self) -> None:
        assert self.process is not None
        self.check()
        self.cpu += cpu_seconds(self.process.pid)
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def check(self) -> None:
        """Notes an incarnation that ended by itself (it should only end when killed)."""
        if self.process is not None and self.process.poll() not in (None, -signal.SIGKILL):
            note = f"infinity-local {self.number} incarnation {self.incarnation} exited with {self.process.returncode}"
            if note not in self.exits:
                self.exits.append(note)
                log(note)

    def cpu_now(self) -> float:
        return self.cpu + (cpu_seconds(self.process.pid) if self.process and self.process.poll() is None else 0.0)


def runner_logs(run: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in sorted(run.glob("runner-*.log")))


# --- the people ----------------------------------------------------------------------------------


@dataclass
class Turn:
    number: int
    kind: str  # plain | sleep | tool
    input_id: str
    text: str
    sent: float | None = None
    replied: float | None = None  # when the reply was read off the output queue
    reply_at: float | None = None  # the reply event's own `at`
    reply_ids: list[str] = field(default_factory=list)  # distinct ids of reply events
    sleep_until: float | None = None  # when the turn's sleep was due (its `sleeping` event)


@dataclass
class Conversation:
    number: int
    thread_id: str
    turns: list[Turn]
    current: int = -1  # index of the turn awaiting its reply
    done: threading.Event = field(default_factory=threading.Event)
    replied: threading.Event = field(default_factory=threading.Event)
    events: Counter = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    stray_replies: list[dict] = field(default_factory=list)
    abandoned: bool = False


def make_turns(rng: random.Random, conv: int, prefix: str, count: int, sleep_share: float,
               tool_share: float, words: tuple[int, int]) -> list[Turn]:
    turns = []
    for t in range(1, count + 1):
        tag = f"c{conv:03d}-t{t:02d}"
        draw = rng.random()
        kind = "sleep" if draw < sleep_share else "tool" if draw < sleep_share + tool_share else "plain"
        said = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 14)))
        ask = {"plain": "", "sleep": " please sleep a moment first,",
               "tool": " please look at schedule_list first,"}[kind]
        length = int(round(words[0] * (words[1] / words[0]) ** rng.random()))  # log-uniform
        marker = (f"[[stand-in: words={length} ttft={rng.uniform(0.5, 1.0):.2f} "
                  f"tps={rng.uniform(50, 80):.0f} id={tag}]]")
        turns.append(Turn(t, kind, f"{prefix}-{tag}", f"{tag}{ask} {said} {marker}"))
    return turns


class People:
    """Sends the conversations' turns and reads the replies off the output queue."""

    def __init__(self, sqs, input_url: str, output_url: str, conversations: list[Conversation],
                 think: tuple[float, float], turn_timeout: float, seed: int):
        self.sqs, self.input_url, self.output_url = sqs, input_url, output_url
        self.conversations = {c.thread_id: c for c in conversations}
        self.think, self.turn_timeout = think, turn_timeout
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.seen: set[str] = set()
        self.copies = 0  # output messages dropped as copies of an event already read (same id)
        self.read = 0
        self.stop = threading.Event()
        # The people's own SQS requests (on AWS: the API function's and the web page's reader).
        self.requests = Counter()
        self.began = time.time()

    def converse(self, conv: Conversation, start_after: float) -> None:
        rng = random.Random(f"{self.rng.random()}")
        time.sleep(start_after)
        for index, turn in enumerate(conv.turns):
            if index:
                time.sleep(rng.uniform(*self.think))
            body = json.dumps({"type": "user_message", "thread_id": conv.thread_id,
                               "id": turn.input_id, "text": turn.text})
            with self.lock:
                conv.current = index
                conv.replied.clear()
                turn.sent = time.time()
            self.sqs.send_message(QueueUrl=self.input_url, MessageBody=body,
                                  MessageGroupId=conv.thread_id, MessageDeduplicationId=turn.input_id)
            with self.lock:
                self.requests["sqs SendMessage fifo"] += 1
            if not conv.replied.wait(self.turn_timeout):
                log(f"{conv.thread_id}: no reply to turn {turn.number} within {self.turn_timeout:g}s; "
                    "the conversation stops here")
                conv.abandoned = True
                break
        conv.done.set()

    def read_outputs(self) -> None:
        while not self.stop.is_set():
            got = self.sqs.receive_message(QueueUrl=self.output_url, MaxNumberOfMessages=10,
                                           WaitTimeSeconds=2, VisibilityTimeout=60)
            messages = got.get("Messages") or []
            now = time.time()
            for message in messages:
                self.on_event(message["Body"], now)
            with self.lock:
                self.requests["sqs ReceiveMessage standard" if messages else "empty receives"] += 1
            if messages:
                self.sqs.delete_message_batch(QueueUrl=self.output_url, Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)])
                with self.lock:
                    self.requests["sqs DeleteMessageBatch standard"] += 1

    def on_event(self, body: str, now: float) -> None:
        event = json.loads(body)
        with self.lock:
            self.read += 1
            if event.get("id") in self.seen:
                self.copies += 1
                return
            self.seen.add(event.get("id"))
            conv = self.conversations.get(event.get("thread_id"))
            if conv is None:
                return
            kind = event.get("type")
            conv.events[kind] += 1
            if kind == "error":
                conv.errors.append(event.get("text", ""))
            if kind == "sleeping" and event.get("until") and conv.current >= 0:
                conv.turns[conv.current].sleep_until = parse_at(event["until"])
            if kind != "assistant_text":
                return
            text = event.get("text") or ""
            tag = re.match(r"You said: (c\d{3,}-t(\d{2,}))", text)
            if tag:
                index = int(tag.group(2)) - 1
            elif text.startswith("Got it:"):
                index = conv.current  # a tool turn's reply names no turn: the one awaited
            else:
                return  # the text before a tool call
            if not 0 <= index < len(conv.turns):
                return
            turn = conv.turns[index]
            expected = "plain" if tag else ("sleep", "tool")
            if turn.kind not in expected or index != conv.current or turn.replied is not None:
                turn.reply_ids.append(event["id"])
                conv.stray_replies.append({"turn": index + 1, "id": event["id"], "text": text[:80],
                                           "read": now})
                return
            turn.reply_ids.append(event["id"])
            turn.replied, turn.reply_at = now, parse_at(event["at"])
            conv.replied.set()


class Killer:
    """Kills one of the runners (chosen at random) with SIGKILL at random moments, and starts
    it again a moment later, as Lambda starts a new instance."""

    def __init__(self, runners: list[Runner], kills: int, every: tuple[float, float], seed: int,
                 finished: threading.Event):
        self.runners, self.kills, self.every, self.finished = runners, kills, every, finished
        self.rng = random.Random(seed + 7)
        self.times: list[float] = []
        self.victims: list[int] = []

    def run(self) -> None:
        for _ in range(self.kills):
            if self.finished.wait(self.rng.uniform(*self.every)):
                return
            runner = self.rng.choice(self.runners)
            runner.kill()
            self.times.append(time.time())
            self.victims.append(runner.number)
            log(f"kill -9 number {len(self.times)}: infinity-local {runner.number}")
            time.sleep(self.rng.uniform(0.2, 2.0))
            runner.start()


# --- the checks at the end ------------------------------------------------------------------------


def audit_table(dynamodb, table: str, conversations: list[Conversation], dump: Path) -> dict:
    """Reads every thread from the table: the inputs in its history, the replies after each, the
    record's version (one per commit), and what is left in outboxes or set aside. Each thread's
    history goes to `dump` (a JSON line per thread), the evidence for whatever is found."""
    out = {}
    dump_file = open(dump, "w", encoding="utf-8")
    for conv in conversations:
        items, start = [], None
        while True:
            args = {"TableName": table, "KeyConditionExpression": "pk = :p",
                    "ExpressionAttributeValues": {":p": {"S": f"T#{conv.thread_id}"}}, "ConsistentRead": True}
            if start:
                args["ExclusiveStartKey"] = start
            page = dynamodb.query(**args)
            items += page.get("Items", [])
            start = page.get("LastEvaluatedKey")
            if not start:
                break
        record, entries, left, markers = None, [], Counter(), 0
        for item in items:
            sk = item["sk"]["S"]
            if sk == "R":
                record = item
            elif sk.startswith("E#"):
                entries.append(json.loads(item["body"]["S"]))
            elif sk.startswith("P#"):
                markers += 1  # a processed input's marker: the deduplication key, kept until its TTL
            else:
                left[sk.split("#", 1)[0]] += 1  # an outbox item, something set aside, ...
        entries.sort(key=lambda e: e["seq"])
        history_len = json.loads(record["body"]["S"]).get("history_len") if record else 0
        entries = [e for e in entries if e["seq"] < (history_len or 0)]
        dump_file.write(json.dumps({"thread_id": conv.thread_id, "record": json.loads(record["body"]["S"])
                                    if record else None, "entries": entries}) + "\n")
        inputs = Counter()  # input id -> times it entered the history
        replies = defaultdict(int)  # input id -> model replies ("You said" / "Got it") after it
        completions = defaultdict(int)  # input id -> model completions (non-synthetic) for it
        current = None
        ours = {t.input_id for t in conv.turns}
        for entry in entries:
            item = entry.get("item") or {}
            kind = item.get("type")
            if kind == "message" and entry.get("input_id") in ours:
                current = entry["input_id"]
                inputs[current] += 1
            elif kind == "assistant" and not item.get("synthetic") and current:
                completions[current] += 1
                text = item.get("text") or ""
                if text.startswith("You said:") or text.startswith("Got it:"):
                    replies[current] += 1
        out[conv.thread_id] = {
            "version": int(record["v"]["N"]) if record and "v" in record else None,
            "entries": len(entries), "inputs": dict(inputs), "replies": dict(replies),
            "completions": dict(completions), "left": dict(left), "markers": markers,
        }
    dump_file.close()
    return out


def queue_depth(sqs, url: str) -> int:
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
        "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed"])["Attributes"]
    return sum(int(v) for v in attributes.values())


def dlq_bodies(sqs, url: str) -> list[str]:
    bodies = []
    for _ in range(20):
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                  VisibilityTimeout=300).get("Messages") or []
        if not got:
            break
        bodies += [m["Body"][:300] for m in got]
    return bodies


# --- main ----------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10 conversations x 3 turns, 2 kills")
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--kill-every", default="15,35", help="seconds between kills: LOW,HIGH (uniform)")
    parser.add_argument("--function-timeout", type=int, default=20,
                        help="the agent function's timeout infinity-local enforces, seconds")
    parser.add_argument("--completion-timeout", type=int, default=8,
                        help="INFINITY_COMPLETION_TIMEOUT_SECONDS: the longest one completion may take")
    parser.add_argument("--visibility", type=int, default=120,
                        help="the input queue's visibility timeout (template.yaml: 1800), seconds")
    parser.add_argument("--sleep-share", type=float, default=0.15, help="turns that ask for a sleep")
    parser.add_argument("--tool-share", type=float, default=0.2, help="turns that call schedule_list")
    parser.add_argument("--words", default="20,300", help="reply length in tokens: LOW,HIGH (log-uniform)")
    parser.add_argument("--faults", default="429=0.05,reset=0.02,overloaded=0.01,stall=0.005",
                        help="the stand-in's fault shares")
    parser.add_argument("--think", default="3,15", help="seconds a person takes between a reply and the next turn")
    parser.add_argument("--ramp", type=float, default=60, help="conversations start over this many seconds")
    parser.add_argument("--turn-timeout", type=float, default=900,
                        help="a conversation gives up on a turn with no reply after this long")
    parser.add_argument("--drain", type=float, default=240,
                        help="after the last reply, keep reading the output queue this long")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--port", type=int, default=4599, help="LocalStack's port for this run")
    parser.add_argument("--runner", help="the infinity-local binary (default: target/release's, else target/debug's)")
    parser.add_argument("--instances", type=int, default=4,
                        help="infinity-local processes side by side (Lambda instances; 4 pollers each)")
    parser.add_argument("--out", help="the run's folder (default target/soak/<time>)")
    args = parser.parse_args()
    if args.quick:
        args.conversations, args.turns, args.kills, args.instances = 10, 3, 2, 2
        args.kill_every, args.ramp, args.drain, args.think = "15,40", 10, 60, "1,4"

    started = time.time()
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    run = (Path(args.out) if args.out else REPO / "target/soak" / stamp).resolve()
    run.mkdir(parents=True, exist_ok=True)
    prefix = f"soak{stamp[-6:]}"
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    binary = Path(args.runner) if args.runner else next(
        (p for p in (target / "release/infinity-local", target / "debug/infinity-local") if p.exists()),
        target / "release/infinity-local")
    args.runner = str(binary)
    if not binary.exists():
        raise SystemExit(f"soak: {binary} is missing: cargo build -p infinity-aws --bin infinity-local")
    frozen = run / "infinity-local"
    shutil.copy2(binary, frozen)  # a rebuild during the run must not change what is restarted
    procs = Processes()
    try:
        return soak(args, run, prefix, frozen, procs, started)
    finally:
        log("stopping what the soak started")
        procs.stop_all()


def soak(args, run: Path, prefix: str, binary: Path, procs: Processes, started: float) -> int:
    rng = random.Random(args.seed)
    log(f"run folder {run}")
    endpoint = start_localstack(procs, run, args.port)
    log(f"LocalStack on {endpoint}")
    stack = bootstrap(run, prefix, args.port)
    session = boto3.session.Session(aws_access_key_id="test", aws_secret_access_key="test",
                                    region_name="us-east-1")
    config = Config(max_pool_connections=64, retries={"mode": "standard", "max_attempts": 5})
    sqs = session.client("sqs", endpoint_url=endpoint, config=config)
    dynamodb = session.client("dynamodb", endpoint_url=endpoint, config=config)
    input_url, output_url = stack["INFINITY_INPUT_QUEUE_URL"], stack["INFINITY_OUTPUT_QUEUE_URL"]
    sqs.set_queue_attributes(QueueUrl=input_url, Attributes={"VisibilityTimeout": str(args.visibility)})
    input_dlq = sqs.get_queue_url(QueueName=f"{prefix}-InputDLQ.fifo")["QueueUrl"]
    relay_dlq = sqs.get_queue_url(QueueName=f"{prefix}-RelayDLQ")["QueueUrl"]

    # The model.
    provider_log = run / "provider.log"
    provider = procs.start("stand-in", [
        str(PYTHON), str(HERE / "provider.py"), "--requests", str(run / "requests.jsonl"), "--",
        "--port", "0", "--ttft", "0.75", "--tps", "65", "--retry-after", "2", "--stall", "10",
        "--faults", args.faults, "--seed", str(args.seed)], provider_log)
    model_url = wait_for_line(provider_log, r"listening on (http://\S+)", provider, 30).group(1)
    # The meter, between the handler and LocalStack.
    meter_log = run / "meter.log"
    queue_names = [stack[v].rsplit("/", 1)[-1] for v in ("INFINITY_INPUT_QUEUE_URL", "INFINITY_RELAY_QUEUE_URL")]
    meter = procs.start("meter", [str(PYTHON), str(HERE / "meter.py"), "--upstream", endpoint,
                                  *sum((["--watch", q] for q in queue_names), [])], meter_log)
    meter_url = wait_for_line(meter_log, r"listening on (http://\S+)", meter, 30).group(1)

    agent = run / "agent.yaml"
    agent.write_text("name: soak\nmodel: anthropic:claude-sonnet-4-5\n"
                     "system: You answer people briefly, and use a tool when they ask for one.\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "INFINITY_", "ANTHROPIC_", "OPENAI_"))}
    env.update(stack)
    env.update({
        "AWS_ENDPOINT_URL": meter_url, "INFINITY_AGENT_FILE": str(agent),
        "ANTHROPIC_BASE_URL": model_url, "ANTHROPIC_API_KEY": "soak-stand-in",
        "INFINITY_LOCAL_FUNCTION_TIMEOUT_SECONDS": str(args.function_timeout),
        "INFINITY_COMPLETION_TIMEOUT_SECONDS": str(args.completion_timeout),
        "RUST_LOG": os.environ.get("RUST_LOG", "info"),
    })
    runners = []
    for n in range(1, args.instances + 1):
        # Each instance serves tool-server callbacks on a port of its own (none are used here).
        port = free_port()
        own = {**env, "INFINITY_CALLBACK_URL": f"http://127.0.0.1:{port}/", "INFINITY_LOCAL_CALLBACK_PORT": str(port)}
        runners.append(Runner(procs, binary, own, run, n))
    for runner in runners:
        runner.start()
    time.sleep(2)
    for runner in runners:
        if runner.process.poll() is not None:
            raise SystemExit(f"soak: infinity-local {runner.number} exited at start:\n{runner_logs(run)[-2000:]}")
    log(f"stack {prefix}: stand-in {model_url}, meter {meter_url}, {args.instances} infinity-local")

    conversations = [
        Conversation(i, f"{prefix}-c{i:03d}", make_turns(rng, i, prefix, args.turns, args.sleep_share,
                                                        args.tool_share, tuple(map(int, pair(args.words)))))
        for i in range(1, args.conversations + 1)]
    people = People(sqs, input_url, output_url, conversations, pair(args.think), args.turn_timeout, args.seed)
    readers = [threading.Thread(target=people.read_outputs, daemon=True) for _ in range(4)]
    for reader in readers:
        reader.start()
    finished = threading.Event()
    killer = Killer(runners, args.kills, pair(args.kill_every), args.seed, finished)
    killer_thread = threading.Thread(target=killer.run, daemon=True)
    talking = [threading.Thread(target=people.converse, args=(c, rng.uniform(0, args.ramp)), daemon=True)
               for c in conversations]
    began = people.began = time.time()
    log(f"{len(conversations)} conversations x {args.turns} turns; {args.kills} kills, every "
        f"{args.kill_every} s; function timeout {args.function_timeout} s, completion timeout "
        f"{args.completion_timeout} s, input visibility {args.visibility} s")
    for thread in talking:
        thread.start()
    killer_thread.start()
    last_report = time.time()
    while not all(c.done.is_set() for c in conversations):
        time.sleep(1)
        for runner in runners:
            runner.check()
        if time.time() - last_report > 30:
            last_report = time.time()
            turns_done = sum(1 for c in conversations for t in c.turns if t.replied)
            log(f"{turns_done}/{args.conversations * args.turns} turns answered, "
                f"{sum(c.done.is_set() for c in conversations)} conversations done, {len(killer.times)} kills")
    talked = time.time() - began
    finished.set()
    killer_thread.join()
    log(f"all conversations ended after {talked:.0f} s; draining the output queue for {args.drain:g} s")
    time.sleep(args.drain)
    people.stop.set()
    for reader in readers:
        reader.join(timeout=10)

    # Counts.
    meter_counts = json.loads(urllib.request.urlopen(f"{meter_url}/_meter", timeout=30).read())
    stand_in_stats = json.loads(urllib.request.urlopen(f"{model_url}/_stats", timeout=30).read())
    depths = {"input_dlq": queue_depth(sqs, input_dlq), "relay_dlq": queue_depth(sqs, relay_dlq),
              "input": queue_depth(sqs, input_url), "relay": queue_depth(sqs, stack["INFINITY_RELAY_QUEUE_URL"])}
    dead = {"input_dlq": dlq_bodies(sqs, input_dlq) if depths["input_dlq"] else [],
            "relay_dlq": dlq_bodies(sqs, relay_dlq) if depths["relay_dlq"] else []}
    table = audit_table(dynamodb, stack["INFINITY_TABLE"], conversations, run / "history.jsonl")
    requests = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines() if line]
    handler_cpu = sum(r.cpu_now() for r in runners)
    for runner in runners:
        runner.check()
    people.runner_exits = [e for r in runners for e in r.exits]
    results = report(args, conversations, people, killer, meter_counts, stand_in_stats, depths, dead,
                     table, requests, runner_logs(run), handler_cpu, talked, time.time() - started)
    (run / "results.json").write_text(json.dumps(results, indent=2, default=str))
    print_summary(results)
    log(f"results in {run / 'results.json'}")
    return 0


def report(args, conversations, people, killer, meter, stand_in_stats, depths, dead, table, requests,
           logs, handler_cpu, talked, wall) -> dict:
    turns = [(c, t) for c in conversations for t in c.turns]
    sent = [(c, t) for c, t in turns if t.sent is not None]
    answered = [(c, t) for c, t in sent if t.replied is not None]
    lost = [f"{c.thread_id} turn {t.number}" for c, t in sent if t.replied is None]

    # The model's own time per turn: the stand-in's time on every request of the turn.
    model_time = defaultdict(float)
    calling_ended = {}  # (conv, turn) -> when the newest whole first completion of the turn ended
    faulted = set()
    completions = defaultdict(int)  # (conv, turn, messages) -> completions delivered whole
    cut = 0
    for r in requests:
        if r.get("conv") is None:
            continue
        key = (r["conv"], r["turn"])
        model_time[key] += r.get("seconds", 0.0)
        if r.get("outcome") != "ok" or r.get("gone"):
            faulted.add(key)
        if r.get("outcome") == "ok" and not r.get("gone"):
            completions[(r["conv"], r["turn"], r["messages"])] += 1
            if not r.get("after_tool"):
                calling_ended[key] = max(calling_ended.get(key, 0.0), r["started"] + r["seconds"])
        elif r.get("outcome") == "ok":
            cut += 1
    rerun = {f"c{k[0]:03d}-t{k[1]:02d} (request of {k[2]} messages)": n
             for k, n in completions.items() if n > 1}

    def crossed_kill(t: Turn) -> bool:
        return any(t.sent <= k <= (t.replied or t.sent) for k in killer.times)

    overhead, quiet, killed, faulty, per_turn = [], [], [], [], []
    latency = []
    by_kind = defaultdict(list)
    for c, t in answered:
        total = t.replied - t.sent
        # A sleeping turn also waits for its sleep: from the end of the completion that called
        # it to the time it was due (see docs/benchmarks.md, "The soak", on when a sleep starts).
        slept = 0.0
        if t.sleep_until is not None and (c.number, t.number) in calling_ended:
            slept = max(0.0, t.sleep_until - calling_ended[(c.number, t.number)])
        extra = total - model_time[(c.number, t.number)] - slept
        per_turn.append({"thread_id": c.thread_id, "turn": t.number, "kind": t.kind, "sent": t.sent,
                         "replied": t.replied, "reply_at": t.reply_at, "model": model_time[(c.number, t.number)],
                         "slept": slept, "overhead": extra, "crossed_kill": crossed_kill(t),
                         "met_fault": (c.number, t.number) in faulted})
        latency.append(total)
        overhead.append(extra)
        by_kind[t.kind].append(extra)
        if crossed_kill(t):
            killed.append(extra)
        elif (c.number, t.number) in faulted:
            faulty.append(extra)
        else:
            quiet.append(extra)

    # Doubles: a second reply event (another id) for one input; an input or reply twice in the
    # history; a completion delivered whole twice for the same request.
    doubled_events = {f"{c.thread_id} turn {t.number}": t.reply_ids for c, t in turns if len(t.reply_ids) > 1}
    stray = {c.thread_id: c.stray_replies for c in conversations if c.stray_replies}
    history_doubles, history_missing, history_no_reply = [], [], []
    for c, t in sent:
        audit = table[c.thread_id]
        n = audit["inputs"].get(t.input_id, 0)
        if n == 0:
            history_missing.append(t.input_id)
        elif n > 1:
            history_doubles.append(f"{t.input_id} entered {n} times")
        replies = audit["replies"].get(t.input_id, 0)
        if replies > 1:
            history_doubles.append(f"{t.input_id} has {replies} replies")
        elif replies == 0 and n:
            history_no_reply.append(t.input_id)

    commits = meter.get("commits", {})
    slices = [commits.get(c.thread_id, 0) for c in conversations]
    versions = [table[c.thread_id]["version"] or 0 for c in conversations]
    left = Counter()
    for audit in table.values():
        left.update(audit["left"])

    # Cost, from the request counts.
    def sqs_cost(counts: dict) -> tuple[float, int]:
        """The price of the SQS requests in `counts` ("sqs ACTION fifo|standard" -> n)."""
        cost, n = 0.0, 0
        for key, value in counts.items():
            if key.startswith("sqs "):
                n += value
                cost += value * PRICE["sqs_fifo" if key.endswith(" fifo") else "sqs_standard"]
        return cost, n

    # The handler's SQS requests, less the receives that found nothing: those depend on the
    # poller (the local runner waits 1 s per receive, Lambda's pollers 20 s) and on nothing a
    # conversation does, so they are priced apart, as the cost of keeping a deployment polled.
    empty = meter.get("empty_receives", {})
    empty_fifo = sum(v for q, v in empty.items() if q.endswith(".fifo"))
    empty_standard = sum(empty.values()) - empty_fifo
    empty_cost = empty_fifo * PRICE["sqs_fifo"] + empty_standard * PRICE["sqs_standard"]
    sqs_all_cost, sqs_all_n = sqs_cost(meter.get("requests", {}))
    sqs_handler_cost, sqs_handler_n = sqs_all_cost - empty_cost, sqs_all_n - empty_fifo - empty_standard
    units = meter.get("units", {})
    ddb_cost = units.get("write", 0) * PRICE["dynamodb_wru"] + units.get("read", 0) * PRICE["dynamodb_rru"]
    invocations = meter.get("invocations", {})
    n_invocations = sum(v["count"] for v in invocations.values())
    gb_seconds = sum(v["seconds"] for v in invocations.values()) * AGENT_MEMORY_GB
    lambda_cost = n_invocations * PRICE["lambda_invocation"] + gb_seconds * PRICE["lambda_gb_second"]
    client_requests = dict(people.requests)
    client_cost, client_n = sqs_cost(client_requests)
    per_conv = len(conversations)
    handoffs = logs.count("hands itself on")
    results = {
        "settings": {k: v for k, v in vars(args).items()},
        "machine": {"cpus": os.cpu_count(), "load_average": os.getloadavg()},
        "wall_seconds": round(wall, 1), "talk_seconds": round(talked, 1),
        "turns": {"planned": len(turns), "sent": len(sent), "answered": len(answered),
                  "by_kind": dict(Counter(t.kind for _, t in sent)),
                  "abandoned_conversations": [c.thread_id for c in conversations if c.abandoned]},
        "lost": lost,
        "doubled": {"reply_events": doubled_events, "stray_replies": stray,
                    "history": history_doubles, "completions_rerun": rerun,
                    "completions_cut": cut},
        "history": {"inputs_missing": history_missing, "inputs_without_reply": history_no_reply,
                    "items_left": dict(left),
                    "processed_markers": sum(a["markers"] for a in table.values())},
        "output": {"events_read": people.read, "copies_dropped": people.copies,
                   "error_events": {c.thread_id: c.errors for c in conversations if c.errors}},
        "dlq": depths, "dlq_bodies": dead,
        "kills": {"done": len(killer.times), "instances": killer.victims,
                  "at_seconds": [round(k - people.began, 1) for k in killer.times]},
        "slices_per_conversation": {"mean": sum(slices) / per_conv, "min": min(slices), "max": max(slices),
                                    "p50": quantile(slices, 0.5), "record_versions_mean": sum(versions) / per_conv},
        "handoffs": handoffs,
        "runner_exits": getattr(people, "runner_exits", []),
        "function_timeouts": logs.count("reached its function timeout"),
        "model_retries_in_slice": logs.count("model unavailable; asking again"),
        "latency_seconds": {"p50": quantile(latency, 0.5), "p99": quantile(latency, 0.99)},
        "overhead_seconds": {
            "all": {"p50": quantile(overhead, 0.5), "p99": quantile(overhead, 0.99), "n": len(overhead)},
            "quiet": {"p50": quantile(quiet, 0.5), "p99": quantile(quiet, 0.99), "n": len(quiet)},
            "met_a_fault": {"p50": quantile(faulty, 0.5), "p99": quantile(faulty, 0.99), "n": len(faulty)},
            "crossed_a_kill": {"p50": quantile(killed, 0.5), "p99": quantile(killed, 0.99), "n": len(killed)},
            "by_kind": {k: {"p50": quantile(v, 0.5), "p99": quantile(v, 0.99), "n": len(v)} for k, v in by_kind.items()},
        },
        "per_turn": per_turn,
        "stand_in": stand_in_stats,
        "meter": {k: v for k, v in meter.items() if k not in ("commits", "invocation_durations")},
        "client_requests": client_requests,
        "handler_cpu_seconds": round(handler_cpu, 1),
        "handler_cpu_ms_per_slice": round(1000 * handler_cpu / max(1, sum(slices)), 2),
        "cost_usd": {
            "dynamodb": ddb_cost, "sqs_handler": sqs_handler_cost, "lambda": lambda_cost,
            "sqs_client": client_cost, "sqs_empty_polls": empty_cost,
            "per_conversation": {
                "dynamodb": ddb_cost / per_conv, "sqs_handler": sqs_handler_cost / per_conv,
                "lambda": lambda_cost / per_conv, "sqs_client": client_cost / per_conv,
                "total": (ddb_cost + sqs_handler_cost + lambda_cost + client_cost) / per_conv,
            },
            "counts": {"sqs_handler_requests": sqs_handler_n, "sqs_empty_receives": empty_fifo + empty_standard,
                       "sqs_client_requests": client_n, "wru": units.get("write", 0),
                       "rru": units.get("read", 0), "invocations": n_invocations,
                       "gb_seconds": gb_seconds,
                       "scheduler_pump_requests": sum(v for k, v in meter.get("requests", {}).items()
                                                      if k.startswith("other") and "schedules" in k)},
        },
    }
    return results


def print_summary(r: dict) -> None:
    def s(x):
        return "-" if x is None else f"{x:.2f}"

    o = r["overhead_seconds"]
    c = r["cost_usd"]["per_conversation"]
    lines = [
        f"turns: {r['turns']['answered']}/{r['turns']['sent']} answered of {r['turns']['planned']} planned "
        f"({r['turns']['by_kind']}); wall {r['wall_seconds']} s",
        f"lost: {len(r['lost'])}; doubled replies: {len(r['doubled']['reply_events'])}, in the history: "
        f"{len(r['doubled']['history'])}; completions run twice: {len(r['doubled']['completions_rerun'])}, "
        f"cut by a kill or timeout: {r['doubled']['completions_cut']}",
        f"DLQ: input {r['dlq']['input_dlq']}, relay {r['dlq']['relay_dlq']}; left on queues: input "
        f"{r['dlq']['input']}, relay {r['dlq']['relay']}; kills {r['kills']['done']}",
        f"output events read {r['output']['events_read']}, copies dropped by id {r['output']['copies_dropped']}",
        f"table: items left besides records and entries {r['history']['items_left'] or 'none'}, "
        f"processed-input markers {r['history']['processed_markers']}",
        f"slices per conversation: mean {r['slices_per_conversation']['mean']:.1f} "
        f"(min {r['slices_per_conversation']['min']}, max {r['slices_per_conversation']['max']}); "
        f"hand-offs {r['handoffs']}, function timeouts {r['function_timeouts']}",
        f"message to reply, beyond the model's own time (s): all p50 {s(o['all']['p50'])} p99 {s(o['all']['p99'])}; "
        f"quiet p50 {s(o['quiet']['p50'])} p99 {s(o['quiet']['p99'])} (n={o['quiet']['n']}); "
        f"met a fault p50 {s(o['met_a_fault']['p50'])} p99 {s(o['met_a_fault']['p99'])} (n={o['met_a_fault']['n']}); "
        f"crossed a kill p50 {s(o['crossed_a_kill']['p50'])} p99 {s(o['crossed_a_kill']['p99'])} (n={o['crossed_a_kill']['n']})",
        f"AWS cost per conversation: ${c['total']:.6f} (DynamoDB ${c['dynamodb']:.6f}, SQS handler "
        f"${c['sqs_handler']:.6f}, Lambda ${c['lambda']:.6f}, SQS client ${c['sqs_client']:.6f})",
    ]
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())

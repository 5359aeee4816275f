#!/usr/bin/env python3
"""Send one message through a deployed Infinity stack and wait for the agent's reply.

After `make deploy`, with the same AWS credentials and region:

    make smoke STACK=infinity-prod
    .venv/bin/python infra/smoke_deployed.py --stack infinity-prod [--timeout 180]

It reads the stack's outputs (input queue, table) from CloudFormation, sends a message to a new
thread with `infinity send`, and polls `infinity thread show --json` until the thread has an
assistant reply after it: exit 0 and the reply, or exit 1 saying what it saw last and where to
look. With `--env-file FILE` (e.g. infra/local/env.sh after `make local-up`) it runs against the
stack that file describes instead, which is how it is tried without an AWS account.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Stack output -> the variable the CLI reads.
OUTPUTS = {
    "InputQueueUrl": "INFINITY_INPUT_QUEUE_URL",
    "ThreadsTableName": "INFINITY_TABLE",
    "OutputQueueUrl": "INFINITY_OUTPUT_QUEUE_URL",
}


def stack_env(stack: str) -> dict[str, str]:
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        found = boto3.client("cloudformation").describe_stacks(StackName=stack)["Stacks"]
    except (BotoCoreError, ClientError) as e:
        sys.exit(f"smoke: cannot read stack {stack}: {e}")
    outputs = {o["OutputKey"]: o["OutputValue"] for o in found[0].get("Outputs", [])}
    missing = [key for key in OUTPUTS if key not in outputs]
    if missing:
        sys.exit(f"smoke: stack {stack} has no output {', '.join(missing)}; was it deployed from template.yaml?")
    return {var: outputs[key] for key, var in OUTPUTS.items()}


def file_env(path: Path) -> dict[str, str]:
    env = {}
    for line in path.read_text().splitlines():
        words = shlex.split(line, comments=True)
        if len(words) == 2 and words[0] == "export" and "=" in words[1]:
            name, value = words[1].split("=", 1)
            env[name] = value
    return env


def infinity() -> str:
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    if not target.is_absolute():
        target = REPO / target
    binary = target / "debug" / "infinity"
    if not binary.exists():
        sys.exit(f"smoke: {binary} is missing; run `cargo build -p infinity-cli` first")
    return str(binary)


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--stack", help="the CloudFormation stack `make deploy` created")
    where.add_argument("--env-file", type=Path, help="an env file such as infra/local/env.sh")
    parser.add_argument("--timeout", type=float, default=180, help="seconds to wait (default 180)")
    parser.add_argument("--message", default="Say hello in one short sentence.")
    args = parser.parse_args()

    env = dict(os.environ)
    env.update(stack_env(args.stack) if args.stack else file_env(args.env_file))
    cli = infinity()
    thread = f"smoke-{uuid.uuid4().hex[:10]}"
    sent = run([cli, "send", "--thread", thread, args.message], env)
    if sent.returncode != 0:
        print(f"smoke: sending failed: {sent.stderr.strip()}", file=sys.stderr)
        return 1
    print(f"smoke: {sent.stdout.strip()}")

    deadline = time.monotonic() + args.timeout
    last = "the thread does not exist yet (the agent function has not run)"
    while time.monotonic() < deadline:
        shown = run([cli, "thread", "show", thread, "--json"], env)
        if shown.returncode == 0:
            items = [entry["item"] for entry in json.loads(shown.stdout)["history"]]
            kinds = [item.get("type") for item in items]
            last = f"{len(items)} entries: {', '.join(map(str, kinds))}"
            for item in items:
                if item.get("type") == "assistant" and (item.get("text") or "").strip():
                    waited = args.timeout - (deadline - time.monotonic())
                    print(f"smoke: reply after {waited:.1f}s: {item['text'].strip()}")
                    return 0
                if item.get("type") == "notice" and item.get("is_error"):
                    print(f"smoke: the thread recorded an error: {item.get('text')}", file=sys.stderr)
                    return 1
        time.sleep(2)
    print(
        f"smoke: no reply within {args.timeout:.0f}s; last seen: {last}. Look at the agent "
        f"function's logs (sam logs) and `infinity thread outbox {thread}`.",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())

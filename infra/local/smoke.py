#!/usr/bin/env python3
"""Check the local emulators do what the Infinity AWS host relies on.

Run after emulators.sh start and bootstrap.py, with bootstrap's environment loaded:

    set -a; . infra/local/run/env.sh; set +a
    .venv/bin/python infra/local/smoke.py

It talks to the endpoints and resources named by the environment only, as the Rust code will.
Each check prints `ok` or `FAILED`; lines starting with `note` record emulator behaviour that
differs from AWS without failing. Leaves no items, messages or schedules behind.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from botocore.exceptions import ClientError

RUN = uuid.uuid4().hex[:8]
results = {"passed": 0, "failed": 0}


def check(name: str, condition: bool, detail: Any = "") -> None:
    results["passed" if condition else "failed"] += 1
    print(f"{'ok    ' if condition else 'FAILED'} {name}{f': {detail}' if detail else ''}")


def note(text: str) -> None:
    print(f"note   {text}")


def error_code(call: Callable[[], Any]) -> str | None:
    try:
        call()
    except ClientError as error:
        return error.response["Error"]["Code"]
    return None


def receive(sqs: Any, url: str, wait: int = 1, **extra: Any) -> list[dict[str, Any]]:
    return sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=wait, **extra
    ).get("Messages", [])


def drain(sqs: Any, url: str) -> None:
    # A short visibility, not 0: LocalStack takes the receipt of a message received with
    # VisibilityTimeout=0 as expired at once and refuses to delete by it.
    while messages := receive(sqs, url, wait=0, VisibilityTimeout=5):
        for message in messages:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def dynamodb_checks(ddb: Any, table: str) -> None:
    description = ddb.describe_table(TableName=table)["Table"]
    keys = {k["AttributeName"]: k["KeyType"] for k in description["KeySchema"]}
    check("table key schema pk HASH, sk RANGE", keys == {"pk": "HASH", "sk": "RANGE"}, keys)
    billing = description.get("BillingModeSummary", {}).get("BillingMode")
    check("table billing mode PAY_PER_REQUEST", billing == "PAY_PER_REQUEST", billing)
    ttl = ddb.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
    check("table TTL enabled on ttl", ttl.get("AttributeName") == "ttl", ttl)

    pk = {"S": f"thread#{RUN}"}
    ddb.put_item(TableName=table, Item={"pk": pk, "sk": {"S": "record"}, "version": {"N": "1"}})
    item = ddb.get_item(TableName=table, Key={"pk": pk, "sk": {"S": "record"}}, ConsistentRead=True)
    check("put_item then get_item", item.get("Item", {}).get("version") == {"N": "1"})

    def commit(expected: str) -> None:
        ddb.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": table,
                        "Key": {"pk": pk, "sk": {"S": "record"}},
                        "UpdateExpression": "SET version = :next",
                        "ConditionExpression": "version = :expected",
                        "ExpressionAttributeValues": {
                            ":expected": {"N": expected},
                            ":next": {"N": str(int(expected) + 1)},
                        },
                    }
                },
                {
                    "Put": {
                        "TableName": table,
                        "Item": {"pk": pk, "sk": {"S": f"entry#{expected}"}},
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            ]
        )

    check(
        "TransactWriteItems with ConditionExpression commits",
        error_code(lambda: commit("1")) is None,
    )
    try:
        commit("1")
        check("a stale TransactWriteItems is cancelled", False, "it committed")
    except ClientError as error:
        reasons = [r.get("Code") for r in error.response.get("CancellationReasons", [])]
        check(
            "a stale TransactWriteItems is cancelled",
            error.response["Error"]["Code"] == "TransactionCanceledException",
            f"{error.response['Error']['Code']}, CancellationReasons {reasons}",
        )
    rows = ddb.query(
        TableName=table,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
        ExpressionAttributeValues={":pk": pk, ":prefix": {"S": "entry#"}},
        ConsistentRead=True,
    )["Items"]
    check("query by pk and sk prefix", len(rows) == 1, len(rows))
    for sk in ("record", "entry#1"):
        ddb.delete_item(TableName=table, Key={"pk": pk, "sk": {"S": sk}})


def fifo_checks(sqs: Any, url: str) -> None:
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    check(
        "input queue FIFO, content-based dedup, visibility 1800",
        (
            attributes.get("FifoQueue"),
            attributes.get("ContentBasedDeduplication"),
            attributes.get("VisibilityTimeout"),
        )
        == ("true", "true", "1800"),
    )
    redrive = json.loads(attributes.get("RedrivePolicy", "{}"))
    check(
        "input queue redrive to the FIFO DLQ, 5 receives",
        redrive.get("deadLetterTargetArn", "").endswith("-InputDLQ.fifo")
        and int(redrive.get("maxReceiveCount", 0)) == 5,
        redrive,
    )

    drain(sqs, url)
    code = error_code(lambda: sqs.send_message(QueueUrl=url, MessageBody="no group"))
    check("FIFO send without MessageGroupId is refused", code is not None, code)

    for n in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=f"{RUN} a{n}", MessageGroupId=f"a-{RUN}")
    sqs.send_message(QueueUrl=url, MessageBody=f"{RUN} a0", MessageGroupId=f"a-{RUN}")  # duplicate
    sqs.send_message(QueueUrl=url, MessageBody=f"{RUN} b0", MessageGroupId=f"b-{RUN}")
    first = receive(sqs, url, AttributeNames=["All"])
    bodies = [m["Body"].split()[1] for m in first]
    check(
        "FIFO keeps order within a group",
        [b for b in bodies if b[0] == "a"] == ["a0", "a1", "a2"],
        bodies,
    )
    check("content-based dedup drops the repeated body", bodies.count("a0") == 1, bodies)
    # While group a's messages are in flight, nothing more of group a may be delivered; other
    # groups go on.
    sqs.send_message(QueueUrl=url, MessageBody=f"{RUN} a3", MessageGroupId=f"a-{RUN}")
    sqs.send_message(QueueUrl=url, MessageBody=f"{RUN} c0", MessageGroupId=f"c-{RUN}")
    second = [m["Body"].split()[1] for m in receive(sqs, url)]
    check(
        "FIFO holds a group back while its messages are in flight, not other groups",
        second == ["c0"],
        second,
    )
    for message in first:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    code = error_code(
        lambda: sqs.send_message(
            QueueUrl=url, MessageBody=f"{RUN} d0", MessageGroupId=f"d-{RUN}", DelaySeconds=5
        )
    )
    note(f"FIFO send with a per-message DelaySeconds: {code or 'accepted'} (AWS: refused)")
    drain(sqs, url)


def standard_checks(sqs: Any, relay_url: str) -> None:
    drain(sqs, relay_url)
    sqs.send_message(QueueUrl=relay_url, MessageBody=f"{RUN} delayed", DelaySeconds=3)
    early = receive(sqs, relay_url, wait=1)
    time.sleep(2.5)
    late = receive(sqs, relay_url, wait=2)
    check(
        "standard queue honours DelaySeconds",
        not early and len(late) == 1,
        f"{len(early)} before, {len(late)} after the delay",
    )
    for message in late:
        sqs.delete_message(QueueUrl=relay_url, ReceiptHandle=message["ReceiptHandle"])
    code = error_code(
        lambda: sqs.send_message(QueueUrl=relay_url, MessageBody="x", DelaySeconds=901)
    )
    note(f"DelaySeconds 901: {code or 'accepted'} (AWS: refused, 900 is the most)")
    drain(sqs, relay_url)

    # Redrive: the sixth receive moves the message to the DLQ.
    attributes = sqs.get_queue_attributes(QueueUrl=relay_url, AttributeNames=["All"])["Attributes"]
    dlq_arn = json.loads(attributes["RedrivePolicy"])["deadLetterTargetArn"]
    dlq_url = sqs.get_queue_url(QueueName=dlq_arn.rsplit(":", 1)[1])["QueueUrl"]
    drain(sqs, dlq_url)
    sqs.send_message(QueueUrl=relay_url, MessageBody=f"{RUN} poison")
    receives = 0
    for _ in range(8):
        if not receive(sqs, relay_url, wait=1, VisibilityTimeout=0):
            break
        receives += 1
    dead = receive(sqs, dlq_url, wait=1)
    check(
        "relay queue redrives to its DLQ after 5 receives",
        receives == 5 and len(dead) == 1,
        f"{receives} receives, {len(dead)} in the DLQ",
    )
    drain(sqs, dlq_url)


def scheduler_checks(
    scheduler: Any, sqs: Any, group: str, relay_url: str, relay_arn: str, role_arn: str
) -> None:
    name = f"timer-{RUN}"
    due = datetime.now(UTC) + timedelta(seconds=3)
    expression = f"at({due.strftime('%Y-%m-%dT%H:%M:%S')})"
    payload = json.dumps({"thread_id": RUN, "kind": "timer"})
    scheduler.create_schedule(
        Name=name,
        GroupName=group,
        ScheduleExpression=expression,
        ScheduleExpressionTimezone="UTC",
        FlexibleTimeWindow={"Mode": "OFF"},
        ActionAfterCompletion="DELETE",
        Target={"Arn": relay_arn, "RoleArn": role_arn, "Input": payload},
    )
    check("create_schedule at(...) with ActionAfterCompletion DELETE", True)
    got = scheduler.get_schedule(Name=name, GroupName=group)
    check(
        "get_schedule returns ScheduleExpression",
        got.get("ScheduleExpression") == expression,
        got.get("ScheduleExpression"),
    )
    check(
        "get_schedule returns Target Input and Arn",
        got.get("Target", {}).get("Input") == payload and got["Target"].get("Arn") == relay_arn,
    )
    check(
        "get_schedule returns ActionAfterCompletion",
        got.get("ActionAfterCompletion") == "DELETE",
        got.get("ActionAfterCompletion"),
    )
    check(
        "get_schedule returns FlexibleTimeWindow OFF",
        got.get("FlexibleTimeWindow", {}).get("Mode") == "OFF",
    )
    names = [s["Name"] for s in scheduler.list_schedules(GroupName=group)["Schedules"]]
    check("list_schedules in the group", name in names, names)
    code = error_code(
        lambda: scheduler.create_schedule(
            Name=name,
            GroupName=group,
            ScheduleExpression=expression,
            FlexibleTimeWindow={"Mode": "OFF"},
            Target={"Arn": relay_arn, "RoleArn": role_arn, "Input": payload},
        )
    )
    check(
        "creating the same schedule again is a ConflictException", code == "ConflictException", code
    )

    drain(sqs, relay_url)
    time.sleep(5)
    fired = [m for m in receive(sqs, relay_url, wait=1) if RUN in m["Body"]]
    still_there = error_code(lambda: scheduler.get_schedule(Name=name, GroupName=group)) is None
    note(
        f"3 s after it was due the schedule delivered {len(fired)} message(s) and "
        f"{'still exists' if still_there else 'was deleted'} (the emulator "
        f"{'fires' if fired else 'never fires'} schedules)"
    )
    drain(sqs, relay_url)

    for label, expression in (
        ("a malformed at()", "at(tomorrow)"),
        ("an at() in the past", "at(2001-01-01T00:00:00)"),
    ):
        code = error_code(
            lambda expression=expression: scheduler.create_schedule(
                Name=f"{name}-probe",
                GroupName=group,
                ScheduleExpression=expression,
                FlexibleTimeWindow={"Mode": "OFF"},
                Target={"Arn": relay_arn, "RoleArn": role_arn, "Input": payload},
            )
        )
        note(f"create_schedule with {label}: {code or 'accepted'}")
        if code is None:
            scheduler.delete_schedule(Name=f"{name}-probe", GroupName=group)
    code = error_code(
        lambda: scheduler.create_schedule(
            Name=f"{name}-probe",
            GroupName=f"missing-{RUN}",
            ScheduleExpression=expression,
            FlexibleTimeWindow={"Mode": "OFF"},
            Target={"Arn": relay_arn, "RoleArn": role_arn, "Input": payload},
        )
    )
    note(
        f"create_schedule in a group that does not exist: {code or 'accepted'} "
        "(AWS: ResourceNotFoundException)"
    )

    scheduler.delete_schedule(Name=name, GroupName=group)
    code = error_code(lambda: scheduler.get_schedule(Name=name, GroupName=group))
    check(
        "get_schedule after delete_schedule is ResourceNotFoundException",
        code == "ResourceNotFoundException",
        code,
    )
    code = error_code(lambda: scheduler.delete_schedule(Name=name, GroupName=group))
    check(
        "deleting it again is ResourceNotFoundException", code == "ResourceNotFoundException", code
    )


def main() -> None:
    env = os.environ
    ddb = boto3.client("dynamodb")
    sqs = boto3.client("sqs")
    scheduler = boto3.client("scheduler")
    dynamodb_checks(ddb, env["INFINITY_TABLE"])
    fifo_checks(sqs, env["INFINITY_INPUT_QUEUE_URL"])
    standard_checks(sqs, env["INFINITY_RELAY_QUEUE_URL"])
    scheduler_checks(
        scheduler,
        sqs,
        env["INFINITY_SCHEDULE_GROUP"],
        env["INFINITY_RELAY_QUEUE_URL"],
        env["INFINITY_RELAY_QUEUE_ARN"],
        env["INFINITY_SCHEDULER_ROLE_ARN"],
    )
    print(f"{results['passed']} passed, {results['failed']} failed")
    raise SystemExit(1 if results["failed"] else 0)


if __name__ == "__main__":
    main()

"""Checks template.yaml's alarms and dashboard against the stack they watch (make template-check).

cfn-lint and sam validate check that the alarms are well-formed; this checks that they watch the
right things:

- every dead-letter queue, the input queue's age, and every function's errors, throttles and
  duration (at 90 % of that function's own timeout) have an alarm, so a queue or a function added
  later without one fails here;
- each metric an alarm or the dashboard reads is one its service publishes, with the dimension it
  publishes it under (the tables below, from the services' CloudWatch documentation), and each
  dimension names a resource of the right type in the template;
- every alarm notifies the topic when one is given, and the dashboard shows every alarm.

It then breaks the template in three ways and fails unless each is caught: a check that could not
fail would prove nothing.

With `--live` (run by `make unit-localstack`, on the LocalStack it started) it also makes a stack
from the template on the emulator, creates the alarms and the dashboard there with the stack's
names, puts a message in each dead-letter queue and in the input queue, and waits until the
metric each alarm watches shows it, under the name the alarm resolves to: the alarms watch the
metrics this stack's resources publish. LocalStack publishes the SQS queue counts; it publishes
no ApproximateAgeOfOldestMessage and runs no Lambda function, table or schedule of ours, so those
alarms are created and named but their metrics are not seen here (the check says which).
"""

from __future__ import annotations

import copy
import json
import os
import re
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "local"))
import bootstrap  # noqa: E402  (the same reader and creator the local stack uses)
from bootstrap import load_template  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

# What each service publishes, by namespace: metric name -> the dimension it is published under,
# and the resource type that dimension names (AWS/SQS, AWS/Lambda, AWS/DynamoDB and AWS/Scheduler
# metric lists in the services' CloudWatch documentation).
PUBLISHED: dict[str, tuple[str, str, set[str]]] = {
    "AWS/SQS": (
        "QueueName",
        "AWS::SQS::Queue",
        {
            "ApproximateNumberOfMessagesVisible",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
            "ApproximateAgeOfOldestMessage",
        },
    ),
    "AWS/Lambda": (
        "FunctionName",
        "AWS::Serverless::Function",
        {"Errors", "Throttles", "Duration", "Invocations"},
    ),
    "AWS/DynamoDB": (
        "TableName",
        "AWS::DynamoDB::Table",
        {
            "ReadThrottleEvents",
            "WriteThrottleEvents",
            "ConsumedReadCapacityUnits",
            "ConsumedWriteCapacityUnits",
        },
    ),
    "AWS/Scheduler": (
        "ScheduleGroup",
        "AWS::Scheduler::ScheduleGroup",
        {"InvocationAttemptCount", "InvocationDroppedCount", "TargetErrorCount"},
    ),
}


def named_resource(value: Any) -> str | None:
    """The logical id a dimension value names: `!Ref X`, `!GetAtt X.QueueName`, or `${X...}`."""
    if isinstance(value, dict):
        if "Ref" in value:
            return value["Ref"]
        if "Fn::GetAtt" in value:
            return value["Fn::GetAtt"][0]
    if isinstance(value, str):
        found = re.fullmatch(r"\$\{([A-Za-z0-9]+)(\.[A-Za-z]+)?\}", value)
        if found:
            return found.group(1)
    return None


def metric_problems(
    where: str, namespace: str, metric: str, dimensions: dict[str, Any], resources: dict
) -> list[str]:
    published = PUBLISHED.get(namespace)
    if published is None:
        return [f"{where}: {namespace} is not a namespace this stack's alarms know"]
    dimension, resource_type, metrics = published
    problems = []
    if metric not in metrics:
        problems.append(f"{where}: {namespace} publishes no {metric} (it has {sorted(metrics)})")
    if set(dimensions) != {dimension}:
        problems.append(
            f"{where}: {namespace} {metric} is published under {dimension}, not {sorted(dimensions)}"
        )
    else:
        target = named_resource(dimensions[dimension])
        kind = resources.get(target, {}).get("Type")
        if kind != resource_type:
            problems.append(
                f"{where}: {dimension} names {target!r}, which is a {kind}, not a {resource_type}"
            )
    return problems


def alarm_metrics(properties: dict) -> list[tuple[str, str, dict[str, Any], str, int]]:
    """(namespace, metric, dimensions, statistic, period) of every metric an alarm reads."""
    if "MetricName" in properties:
        dims = {d["Name"]: d["Value"] for d in properties.get("Dimensions", [])}
        return [
            (
                properties["Namespace"],
                properties["MetricName"],
                dims,
                properties.get("Statistic", ""),
                properties.get("Period", 0),
            )
        ]
    found = []
    for query in properties.get("Metrics", []):
        stat = query.get("MetricStat")
        if stat:
            metric = stat["Metric"]
            dims = {d["Name"]: d["Value"] for d in metric.get("Dimensions", [])}
            found.append(
                (metric["Namespace"], metric["MetricName"], dims, stat["Stat"], stat["Period"])
            )
    return found


def watches(alarms: dict, namespace: str, metric: str, target: str) -> list[tuple[str, dict]]:
    """The alarms that read `metric` for the resource `target`."""
    found = []
    for name, properties in alarms.items():
        for ns, name_of_metric, dims, _, _ in alarm_metrics(properties):
            if ns == namespace and name_of_metric == metric:
                if any(named_resource(v) == target for v in dims.values()):
                    found.append((name, properties))
    return found


def dashboard_metrics(widget: dict) -> list[tuple[str, str, dict[str, Any]]]:
    """The metrics a metric widget reads, its `.` shorthand (same as the row above) expanded."""
    rows = []
    previous: list[Any] = []
    for row in widget["properties"].get("metrics", []):
        parts = [p for p in row if not isinstance(p, dict)]
        parts = [previous[i] if p == "." else p for i, p in enumerate(parts)]
        previous = parts
        namespace, metric, *pairs = parts
        rows.append((namespace, metric, dict(zip(pairs[::2], pairs[1::2]))))
    return rows


def check(template: dict) -> list[str]:
    resources = template["Resources"]
    problems: list[str] = []
    alarms = {
        name: r["Properties"]
        for name, r in resources.items()
        if r["Type"] == "AWS::CloudWatch::Alarm"
    }
    for name, properties in alarms.items():
        for namespace, metric, dims, _, _ in alarm_metrics(properties):
            problems += metric_problems(f"alarm {name}", namespace, metric, dims, resources)
        for key in ("AlarmActions", "OKActions"):
            action = properties.get(key)
            wanted = {"Fn::If": ["HasAlarmTopic", [{"Ref": "AlarmTopicArn"}], {"Ref": "AWS::NoValue"}]}
            if action != wanted:
                problems.append(f"alarm {name}: {key} is not the alarm topic when one is given")

    # Every dead-letter queue has an alarm on its first message.
    for name, r in resources.items():
        redrive = r.get("Properties", {}).get("RedrivePolicy")
        if r["Type"] == "AWS::SQS::Queue" and redrive:
            dlq = redrive["deadLetterTargetArn"]["Fn::GetAtt"][0]
            found = watches(alarms, "AWS/SQS", "ApproximateNumberOfMessagesVisible", dlq)
            if not any(p.get("Threshold") == 0 for _, p in found):
                problems.append(f"no alarm on the first message in {dlq}, {name}'s dead-letter queue")
    if not watches(alarms, "AWS/SQS", "ApproximateAgeOfOldestMessage", "InputQueue"):
        problems.append("no alarm on the age of the input queue's oldest message")

    # Every function: errors, throttles, and its longest run against its own timeout.
    for name, r in resources.items():
        if r["Type"] != "AWS::Serverless::Function":
            continue
        for metric in ("Errors", "Throttles"):
            if not watches(alarms, "AWS/Lambda", metric, name):
                problems.append(f"no alarm on {name}'s {metric}")
        durations = watches(alarms, "AWS/Lambda", "Duration", name)
        timeout_ms = r["Properties"]["Timeout"] * 1000
        if not durations:
            problems.append(f"no alarm on {name}'s Duration")
        for alarm, properties in durations:
            if properties.get("Statistic") != "Maximum" or properties.get("Threshold") != timeout_ms * 0.9:
                problems.append(
                    f"alarm {alarm}: watch the Maximum Duration at 90 % of {name}'s timeout "
                    f"({timeout_ms * 0.9:g} ms), not {properties.get('Statistic')} at "
                    f"{properties.get('Threshold')}"
                )
    tables = [n for n, r in resources.items() if r["Type"] == "AWS::DynamoDB::Table"]
    for table in tables:
        if not watches(alarms, "AWS/DynamoDB", "WriteThrottleEvents", table):
            problems.append(f"no alarm on throttled writes of {table}")
    for group in [n for n, r in resources.items() if r["Type"] == "AWS::Scheduler::ScheduleGroup"]:
        if not watches(alarms, "AWS/Scheduler", "InvocationDroppedCount", group):
            problems.append(f"no alarm on dropped deliveries of {group}")

    # The dashboard: valid JSON once substituted, every alarm on it, every metric published.
    dashboards = [r for r in resources.values() if r["Type"] == "AWS::CloudWatch::Dashboard"]
    if len(dashboards) != 1:
        problems.append(f"{len(dashboards)} dashboards, not one")
        return problems
    body_text = dashboards[0]["Properties"]["DashboardBody"]["Fn::Sub"]
    for reference in re.findall(r"\$\{([A-Za-z0-9]+)[.}]", body_text):
        if reference != "AWS" and reference not in resources:
            problems.append(f"dashboard: ${{{reference}}} names no resource")
    try:
        body = json.loads(body_text)
    except json.JSONDecodeError as error:
        return problems + [f"dashboard: not JSON: {error}"]
    shown = set()
    for widget in body["widgets"]:
        if widget["type"] == "alarm":
            shown |= {named_resource(a) for a in widget["properties"]["alarms"]}
        elif widget["type"] == "metric":
            title = widget["properties"].get("title", "?")
            for namespace, metric, dims in dashboard_metrics(widget):
                problems += metric_problems(f"dashboard {title!r}", namespace, metric, dims, resources)
    for name in alarms:
        if name not in shown:
            problems.append(f"dashboard: alarm {name} is not on it")
    return problems


def broken(template: dict, change) -> dict:
    copied = copy.deepcopy(template)
    change(copied["Resources"])
    return copied


def live(template: dict) -> list[str]:
    """Creates a stack with its alarms and dashboard on LocalStack; checks the SQS metrics."""
    import boto3
    from botocore.config import Config

    port = os.environ.get("INFINITY_LOCAL_LOCALSTACK_PORT", "4567")
    endpoint = f"http://127.0.0.1:{port}"
    config = Config(retries={"max_attempts": 2}, connect_timeout=5, read_timeout=30)
    clients = {
        service: boto3.client(
            service,
            endpoint_url=endpoint,
            region_name=bootstrap.REGION,
            config=config,
            **bootstrap.CREDENTIALS,
        )
        for service in ("dynamodb", "sqs", "scheduler", "s3", "cloudwatch")
    }
    prefix = f"alarms-{uuid.uuid4().hex[:8]}"
    resolver = bootstrap.Resolver(template, prefix)
    resources = template["Resources"]
    # What the emulator does not run stands in by name: the functions (infinity-local runs their
    # handlers) and the role.
    for name, r in resources.items():
        if r["Type"] in ("AWS::Serverless::Function", "AWS::IAM::Role"):
            resolver.resources[name] = {"Ref": resolver.name(name), "Arn": f"arn:aws:x::{name}"}
    bootstrap.create_all(template, resolver, clients)
    cloudwatch = clients["cloudwatch"]
    problems: list[str] = []
    watched: list[tuple[str, str, str]] = []  # (alarm, metric, queue name)
    for name, r in resources.items():
        if r["Type"] != "AWS::CloudWatch::Alarm":
            continue
        properties = resolver.resolve(r["Properties"])
        # A parameter resolves to text; the API takes a number (botocore checks the types).
        properties["Threshold"] = float(properties["Threshold"])
        cloudwatch.put_metric_alarm(**properties)
        arn = cloudwatch.describe_alarms(AlarmNames=[properties["AlarmName"]])["MetricAlarms"]
        if not arn:
            problems.append(f"alarm {name}: not created on the emulator")
            continue
        resolver.resources[name] = {"Ref": properties["AlarmName"], "Arn": arn[0]["AlarmArn"]}
        for namespace, metric, dims, _, _ in alarm_metrics(properties):
            if namespace == "AWS/SQS":
                watched.append((name, metric, dims["QueueName"]))
    dashboard = next(r for r in resources.values() if r["Type"] == "AWS::CloudWatch::Dashboard")
    body = resolver.resolve(dashboard["Properties"]["DashboardBody"])
    cloudwatch.put_dashboard(DashboardName=prefix, DashboardBody=body)
    if json.loads(cloudwatch.get_dashboard(DashboardName=prefix)["DashboardBody"]) != json.loads(body):
        problems.append("dashboard: the emulator keeps another body than was put")

    # Something in each queue an alarm watches: a dead-letter queue's first message, an input.
    sqs = clients["sqs"]
    for queue in sorted({q for _, _, q in watched}):
        url = sqs.get_queue_url(QueueName=queue)["QueueUrl"]
        extra = {"MessageGroupId": "check", "MessageDeduplicationId": uuid.uuid4().hex}
        sqs.send_message(
            QueueUrl=url, MessageBody="{}", **(extra if queue.endswith(".fifo") else {})
        )
    published = {"ApproximateNumberOfMessagesVisible"}
    waiting = {(a, m, q) for a, m, q in watched if m in published}
    deadline = time.monotonic() + float(os.environ.get("INFINITY_ALARM_CHECK_SECONDS", "90"))
    while waiting and time.monotonic() < deadline:
        for alarm, metric, queue in sorted(waiting):
            points = cloudwatch.get_metric_statistics(
                Namespace="AWS/SQS",
                MetricName=metric,
                Dimensions=[{"Name": "QueueName", "Value": queue}],
                StartTime=time.time() - 600,
                EndTime=time.time() + 60,
                Period=60,
                Statistics=["Maximum"],
            )["Datapoints"]
            if any(p["Maximum"] >= 1 for p in points):
                print(f"check_alarms: {alarm} sees {metric} of {queue}")
                waiting.discard((alarm, metric, queue))
        if waiting:
            time.sleep(2)
    for alarm, metric, queue in sorted(waiting):
        problems.append(f"alarm {alarm}: {metric} of {queue} never showed the message")
    unseen = sorted({f"{a} ({m})" for a, m, _ in watched if m not in published})
    others = sorted(
        name
        for name, r in resources.items()
        if r["Type"] == "AWS::CloudWatch::Alarm" and name not in {a for a, _, _ in watched}
    )
    print(
        "check_alarms: created on the emulator but not seen firing here (it does not publish "
        f"their metrics): {', '.join(unseen + others)}"
    )
    return problems


def main() -> int:
    arguments = [a for a in sys.argv[1:] if not a.startswith("--")]
    path = Path(arguments[0]) if arguments else REPO / "template.yaml"
    template = load_template(path)
    problems = check(template)
    for problem in problems:
        print(f"check_alarms: {path.name}: {problem}", file=sys.stderr)
    if problems:
        return 1

    # The check sees what it is for: each of these must be reported.
    def new_function(r: dict) -> None:
        r["SweepFunction"] = copy.deepcopy(r["RelayFunction"])

    def timeout_raised(r: dict) -> None:
        r["AgentFunction"]["Properties"]["Timeout"] = 600

    def wrong_dimension(r: dict) -> None:
        r["InputDLQMessages"]["Properties"]["Dimensions"][0]["Value"] = {"Ref": "ThreadsTable"}

    for what, change, expected in [
        ("a function without alarms", new_function, "no alarm on SweepFunction's Errors"),
        ("a timeout raised without its alarm", timeout_raised, "90 % of AgentFunction's timeout"),
        ("a dimension naming the table", wrong_dimension, "which is a AWS::DynamoDB::Table"),
    ]:
        seen = check(broken(template, change))
        if not any(expected in p for p in seen):
            print(f"check_alarms: {what} was not caught: {seen}", file=sys.stderr)
            return 1
    alarms = sum(1 for r in template["Resources"].values() if r["Type"] == "AWS::CloudWatch::Alarm")
    print(f"check_alarms: {alarms} alarms and the dashboard watch what the stack runs")
    if "--live" in sys.argv[1:]:
        problems = live(template)
        for problem in problems:
            print(f"check_alarms: on the emulator: {problem}", file=sys.stderr)
        if problems:
            return 1
        print("check_alarms: on the emulator, each SQS alarm's metric shows its queue's message")
    return 0


if __name__ == "__main__":
    sys.exit(main())

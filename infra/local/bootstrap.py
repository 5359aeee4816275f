#!/usr/bin/env python3
"""Create template.yaml's bucket, table, queues and schedule group on the local emulators.

Reads the SAM template, creates every AWS::S3::Bucket, AWS::DynamoDB::Table, AWS::SQS::Queue and
AWS::Scheduler::ScheduleGroup in it with the template's properties, named <prefix>-<LogicalId>
(FIFO queues get the required .fifo suffix), and prints the shell `export` lines that point the
AWS SDK and the Infinity code at them. Running it again is fine: what exists is kept (queue
attributes are brought up to date).

    eval "$(.venv/bin/python infra/local/bootstrap.py)"
    .venv/bin/python infra/local/bootstrap.py --env-file infra/local/run/env.sh
    .venv/bin/python infra/local/bootstrap.py --endpoint http://localhost:4566   # LocalStack
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shlex
import sys
from pathlib import Path
from typing import Any

import boto3
import yaml
from botocore.config import Config
from botocore.exceptions import ClientError

REPO = Path(__file__).resolve().parents[2]
REGION = "us-east-1"
# The emulator's default account: moto's, or LocalStack's.
ACCOUNT = "000000000000" if os.environ.get("INFINITY_EMULATOR") == "localstack" else "123456789012"
CREDENTIALS = {"aws_access_key_id": "test", "aws_secret_access_key": "test"}

# The variables the Rust code reads (see template.yaml). The local environment sets all but these:
# the agent file is given by whoever runs the agent, and the thresholds keep the code's defaults
# unless a test sets them.
CONTRACT = [
    "INFINITY_TABLE",
    "INFINITY_INPUT_QUEUE_URL",
    "INFINITY_RELAY_QUEUE_URL",
    "INFINITY_RELAY_QUEUE_ARN",
    "INFINITY_OUTPUT_QUEUE_URL",
    "INFINITY_SCHEDULE_GROUP",
    "INFINITY_SCHEDULER_ROLE_ARN",
    "INFINITY_AGENT_YAML",
    "INFINITY_MODEL_KEY_PARAMETER",
    "INFINITY_RELAY_THRESHOLD_SECONDS",
    "INFINITY_SCHEDULE_EARLY_SECONDS",
]
NOT_EXPORTED = {
    "INFINITY_AGENT_YAML",
    # Locally the secret is generated here and exported as INFINITY_CALLBACK_SECRET.
    "INFINITY_CALLBACK_SECRET_PARAMETER",
    "INFINITY_RELAY_THRESHOLD_SECONDS",
    "INFINITY_SCHEDULE_EARLY_SECONDS",
}

# CloudFormation queue properties that are SQS queue attributes under the same name.
QUEUE_ATTRIBUTES = [
    "FifoQueue",
    "ContentBasedDeduplication",
    "DeduplicationScope",
    "FifoThroughputLimit",
    "DelaySeconds",
    "MaximumMessageSize",
    "MessageRetentionPeriod",
    "ReceiveMessageWaitTimeSeconds",
    "VisibilityTimeout",
    "RedrivePolicy",
    "RedriveAllowPolicy",
    "SqsManagedSseEnabled",
]
TABLE_PROPERTIES = [
    "AttributeDefinitions",
    "KeySchema",
    "BillingMode",
    "ProvisionedThroughput",
    "GlobalSecondaryIndexes",
    "LocalSecondaryIndexes",
    "StreamSpecification",
]
CREATED_TYPES = {
    "AWS::S3::Bucket",
    "AWS::DynamoDB::Table",
    "AWS::SQS::Queue",
    "AWS::Scheduler::ScheduleGroup",
}


def log(message: str) -> None:
    print(message, file=sys.stderr)


# --- Reading the template -----------------------------------------------------------------------


class TemplateLoader(yaml.SafeLoader):
    """A YAML loader that turns CloudFormation's short tags into their long form."""


def _short_tag(loader: TemplateLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    if suffix == "Ref":
        return {"Ref": value}
    if suffix == "Condition":
        return {"Condition": value}
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {f"Fn::{suffix}": value}


TemplateLoader.add_multi_constructor("!", _short_tag)


def load_template(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8") as file:
        return yaml.load(file, Loader=TemplateLoader)  # a SafeLoader subclass


# --- Resolving intrinsic functions against the local resources ----------------------------------

NO_VALUE = object()


class Resolver:
    """Evaluates the intrinsic functions of the template with local names and ARNs."""

    def __init__(self, template: dict[str, Any], prefix: str) -> None:
        self.template = template
        self.prefix = prefix
        # logical id -> {"Ref": ..., "Arn": ..., ...} for what exists locally
        self.resources: dict[str, dict[str, str]] = {}
        self.pseudo = {
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT,
            "AWS::Partition": "aws",
            "AWS::StackName": prefix,
            "AWS::URLSuffix": "amazonaws.com",
        }

    def name(self, logical_id: str) -> str:
        return f"{self.prefix}-{logical_id}"

    def ref(self, target: str) -> Any:
        if target == "AWS::NoValue":
            return NO_VALUE
        if target in self.pseudo:
            return self.pseudo[target]
        parameter = self.template.get("Parameters", {}).get(target)
        if parameter is not None:
            if "Default" not in parameter:
                raise SystemExit(f"bootstrap: parameter {target} has no default")
            return str(parameter["Default"])
        return self.attribute(target, "Ref")

    def attribute(self, logical_id: str, name: str) -> str:
        known = self.resources.get(logical_id)
        if known is None or name not in known:
            raise SystemExit(f"bootstrap: {logical_id}.{name} does not exist locally")
        return known[name]

    def condition(self, name: str) -> bool:
        return bool(self.resolve(self.template["Conditions"][name]))

    def sub(self, argument: Any) -> str:
        text, variables = (argument, {}) if isinstance(argument, str) else argument
        variables = {key: self.resolve(value) for key, value in variables.items()}

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in variables:
                return str(variables[name])
            if "." in name and not name.startswith("AWS::"):
                return self.attribute(*name.split(".", 1))
            return str(self.ref(name))

        return re.sub(r"\$\{([^}]+)\}", replace, text)

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            items = [self.resolve(item) for item in value]
            return [item for item in items if item is not NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, argument),) = value.items()
            function = {
                "Ref": lambda a: self.ref(a),
                "Condition": lambda a: self.condition(a),
                "Fn::GetAtt": lambda a: self.attribute(a[0], a[1]),
                "Fn::Sub": lambda a: self.sub(a),
                "Fn::Join": lambda a: str(a[0]).join(str(x) for x in self.resolve(a[1])),
                "Fn::Select": lambda a: self.resolve(a[1])[int(self.resolve(a[0]))],
                "Fn::Split": lambda a: str(self.resolve(a[1])).split(a[0]),
                "Fn::Equals": lambda a: self.resolve(a[0]) == self.resolve(a[1]),
                "Fn::Not": lambda a: not self.resolve(a[0]),
                "Fn::And": lambda a: all(self.resolve(x) for x in a),
                "Fn::Or": lambda a: any(self.resolve(x) for x in a),
                "Fn::If": lambda a: self.resolve(a[1] if self.condition(a[0]) else a[2]),
            }.get(key)
            # Ref and Condition take a name; a one-key mapping with other content is plain data.
            plain = key in ("Ref", "Condition") and not isinstance(argument, str)
            if function is not None and not plain:
                return function(argument)
        resolved = {key: self.resolve(item) for key, item in value.items()}
        return {key: item for key, item in resolved.items() if item is not NO_VALUE}


def references(value: Any) -> set[str]:
    """Logical ids that a property value refers to (Ref, Fn::GetAtt, ${...} in Fn::Sub)."""
    found: set[str] = set()
    if isinstance(value, list):
        for item in value:
            found |= references(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key == "Ref" and isinstance(item, str):
                found.add(item)
            elif key == "Fn::GetAtt":
                found.add(item[0])
            elif key == "Fn::Sub":
                text = item if isinstance(item, str) else item[0]
                found |= {m.split(".")[0] for m in re.findall(r"\$\{([^}!]+)\}", text)}
                found |= references(item if isinstance(item, list) else [])
            else:
                found |= references(item)
    return found


# --- Creating the resources ---------------------------------------------------------------------


def attribute_string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def create_table(client: Any, name: str, properties: dict[str, Any]) -> dict[str, str]:
    arguments = {key: properties[key] for key in TABLE_PROPERTIES if key in properties}
    try:
        client.create_table(TableName=name, **arguments)
        log(f"table {name}: created")
    except ClientError as error:
        if error.response["Error"]["Code"] != "ResourceInUseException":
            raise
        log(f"table {name}: exists")
    client.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1})
    ttl = properties.get("TimeToLiveSpecification")
    if ttl and ttl.get("Enabled"):
        current = client.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
        if current.get("TimeToLiveStatus") not in ("ENABLED", "ENABLING"):
            client.update_time_to_live(
                TableName=name,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl["AttributeName"]},
            )
            log(f"table {name}: time to live on attribute {ttl['AttributeName']}")
    arn = client.describe_table(TableName=name)["Table"]["TableArn"]
    return {"Ref": name, "Arn": arn}


def create_queue(client: Any, name: str, properties: dict[str, Any]) -> dict[str, str]:
    attributes = {
        key: attribute_string(properties[key]) for key in QUEUE_ATTRIBUTES if key in properties
    }
    if properties.get("FifoQueue"):
        name += ".fifo"
    try:
        url = client.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        log(f"queue {name}: ready")
    except ClientError as error:
        if error.response["Error"]["Code"] not in ("QueueAlreadyExists", "QueueNameExists"):
            raise
        # It exists with other attributes: bring them up to date (FifoQueue cannot change).
        url = client.get_queue_url(QueueName=name)["QueueUrl"]
        attributes.pop("FifoQueue", None)
        client.set_queue_attributes(QueueUrl=url, Attributes=attributes)
        log(f"queue {name}: exists, attributes updated")
    arn = client.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    return {"Ref": url, "Arn": arn, "QueueName": name, "QueueUrl": url}


def create_schedule_group(client: Any, name: str, _properties: dict[str, Any]) -> dict[str, str]:
    # Look first: moto replaces an existing group on create, dropping its schedules.
    try:
        arn = client.get_schedule_group(Name=name)["Arn"]
        log(f"schedule group {name}: exists")
    except ClientError as error:
        if error.response["Error"]["Code"] != "ResourceNotFoundException":
            raise
        arn = client.create_schedule_group(Name=name)["ScheduleGroupArn"]
        log(f"schedule group {name}: created")
    return {"Ref": name, "Arn": arn}


def create_bucket(client: Any, name: str, _properties: dict[str, Any]) -> dict[str, str]:
    # Bucket names are lowercase; creating one that exists (ours) is not an error.
    name = name.lower()
    try:
        client.create_bucket(Bucket=name)
        log(f"bucket {name}: created")
    except ClientError as error:
        if error.response["Error"]["Code"] not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
            raise
        log(f"bucket {name}: exists")
    return {"Ref": name, "Arn": f"arn:aws:s3:::{name}"}


CREATORS = {
    "AWS::S3::Bucket": ("s3", create_bucket),
    "AWS::DynamoDB::Table": ("dynamodb", create_table),
    "AWS::SQS::Queue": ("sqs", create_queue),
    "AWS::Scheduler::ScheduleGroup": ("scheduler", create_schedule_group),
}


def create_all(template: dict[str, Any], resolver: Resolver, clients: dict[str, Any]) -> None:
    resources = template.get("Resources", {})
    wanted = {}
    for logical_id, resource in resources.items():
        if resource["Type"] not in CREATED_TYPES:
            continue
        if "Condition" in resource and not resolver.condition(resource["Condition"]):
            continue
        wanted[logical_id] = resource
    # Create in dependency order: a queue after the dead-letter queue it names.
    while wanted:
        ready = [
            logical_id
            for logical_id, resource in wanted.items()
            if not (references(resource.get("Properties", {})) & wanted.keys())
        ]
        if not ready:
            raise SystemExit(f"bootstrap: circular references among {sorted(wanted)}")
        for logical_id in ready:
            resource = wanted.pop(logical_id)
            service, create = CREATORS[resource["Type"]]
            properties = resolver.resolve(resource.get("Properties", {}))
            resolver.resources[logical_id] = create(
                clients[service], resolver.name(logical_id), properties
            )


# --- The environment ----------------------------------------------------------------------------


def infinity_variables(template: dict[str, Any], resolver: Resolver) -> dict[str, str]:
    """The INFINITY_* variables of the functions (Globals first), resolved locally."""
    declared: dict[str, Any] = {}
    globals_env = template.get("Globals", {}).get("Function", {}).get("Environment", {})
    declared.update(globals_env.get("Variables", {}))
    for resource in template.get("Resources", {}).values():
        if resource["Type"] == "AWS::Serverless::Function":
            env = resource.get("Properties", {}).get("Environment", {})
            declared.update(env.get("Variables", {}))
    missing = [name for name in CONTRACT if name not in declared]
    if missing:
        raise SystemExit(f"bootstrap: template.yaml does not set {', '.join(missing)}")
    return {
        name: str(resolver.resolve(value))
        for name, value in declared.items()
        if name.startswith("INFINITY_") and name not in NOT_EXPORTED
    }


def local_ports(args: argparse.Namespace) -> dict[str, str]:
    """The INFINITY_LOCAL_*_PORT variables of the emulators and local stand-ins used."""
    ports = {
        "INFINITY_LOCAL_CALLBACK_PORT": str(args.callback_port),
        "INFINITY_LOCAL_API_PORT": str(args.api_port),
    }
    if os.environ.get("INFINITY_EMULATOR") == "localstack":
        ports["INFINITY_EMULATOR"] = "localstack"
        ports["INFINITY_LOCAL_LOCALSTACK_PORT"] = os.environ.get(
            "INFINITY_LOCAL_LOCALSTACK_PORT", "4567"
        )
    elif not args.endpoint:
        ports["INFINITY_LOCAL_MOTO_PORT"] = str(args.moto_port)
        ports["INFINITY_LOCAL_DYNAMODB"] = args.dynamodb
        if args.dynamodb == "local":
            ports["INFINITY_LOCAL_DDB_PORT"] = str(args.ddb_port)
    return ports


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--template", type=Path, default=REPO / "template.yaml")
    parser.add_argument(
        "--prefix", default="infinity-local", help="name prefix (default %(default)s)"
    )
    parser.add_argument("--env-file", type=Path, help="write the export lines here, not to stdout")
    parser.add_argument(
        "--endpoint",
        help="one endpoint for every service, e.g. LocalStack's http://localhost:4566",
    )
    parser.add_argument(
        "--moto-port",
        type=int,
        default=int(os.environ.get("INFINITY_LOCAL_MOTO_PORT", "4566")),
        help="moto server port, for SQS and Scheduler (default $INFINITY_LOCAL_MOTO_PORT or 4566)",
    )
    parser.add_argument(
        "--ddb-port",
        type=int,
        default=int(os.environ.get("INFINITY_LOCAL_DDB_PORT", "8000")),
        help="DynamoDB Local's port (default $INFINITY_LOCAL_DDB_PORT or 8000)",
    )
    parser.add_argument(
        "--dynamodb",
        choices=("local", "moto"),
        default=os.environ.get("INFINITY_LOCAL_DYNAMODB", "local"),
        help="DynamoDB Local or moto (default $INFINITY_LOCAL_DYNAMODB or local)",
    )
    parser.add_argument(
        "--callback-port",
        type=int,
        default=int(os.environ.get("INFINITY_LOCAL_CALLBACK_PORT", "8790")),
        help="where infinity-local takes tool server callbacks, standing in for the callback "
        "function's URL (default $INFINITY_LOCAL_CALLBACK_PORT or 8790)",
    )
    parser.add_argument(
        "--api-port",
        type=int,
        default=int(os.environ.get("INFINITY_LOCAL_API_PORT", "8700")),
        help="where `infinity serve --aws` serves the API locally, standing in for the API "
        "function's URL (default $INFINITY_LOCAL_API_PORT or 8700)",
    )
    args = parser.parse_args()

    if not args.endpoint and os.environ.get("INFINITY_EMULATOR") == "localstack":
        port = os.environ.get("INFINITY_LOCAL_LOCALSTACK_PORT", "4567")
        args.endpoint = f"http://127.0.0.1:{port}"
    if args.endpoint:
        endpoints = dict.fromkeys(("dynamodb", "sqs", "scheduler", "s3"), args.endpoint)
        env = {"AWS_ENDPOINT_URL": args.endpoint}
    else:
        moto = f"http://127.0.0.1:{args.moto_port}"
        endpoints = {
            "dynamodb": moto if args.dynamodb == "moto" else f"http://127.0.0.1:{args.ddb_port}",
            "sqs": moto,
            "scheduler": moto,
            "s3": moto,
        }
        env = {
            "AWS_ENDPOINT_URL_DYNAMODB": endpoints["dynamodb"],
            "AWS_ENDPOINT_URL_SQS": endpoints["sqs"],
            "AWS_ENDPOINT_URL_SCHEDULER": endpoints["scheduler"],
            "AWS_ENDPOINT_URL_S3": endpoints["s3"],
        }

    config = Config(retries={"max_attempts": 2}, connect_timeout=5, read_timeout=30)
    clients = {
        service: boto3.client(
            service, endpoint_url=url, region_name=REGION, config=config, **CREDENTIALS
        )
        for service, url in endpoints.items()
    }

    template = load_template(args.template)
    resolver = Resolver(template, args.prefix)
    # IAM is not emulated: the scheduler role is a name that nothing checks locally.
    role = f"{args.prefix}-scheduler"
    resolver.resources["SchedulerRole"] = {
        "Ref": role,
        "Arn": f"arn:aws:iam::{ACCOUNT}:role/{role}",
    }
    # The callback function's Function URL: infinity-local serves its handler on this port.
    callback_url = f"http://127.0.0.1:{args.callback_port}/"
    resolver.resources["CallbackFunctionUrl"] = {"FunctionUrl": callback_url}
    # The API function's Function URL: `infinity serve --aws --port N` serves the API locally.
    resolver.resources["ApiFunctionUrl"] = {"FunctionUrl": f"http://127.0.0.1:{args.api_port}/"}
    create_all(template, resolver, clients)

    exports = {
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,  # what boto3 and the AWS CLI read
        "AWS_ACCESS_KEY_ID": CREDENTIALS["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": CREDENTIALS["aws_secret_access_key"],
        **env,
        **infinity_variables(template, resolver),
        # What Secrets Manager generates on AWS; fresh for each local stack.
        "INFINITY_CALLBACK_SECRET": secrets.token_hex(32),
        # The ports this stack was made on, so that tools run after `source env.sh` alone
        # (emulators.sh, smoke.py, a second bootstrap) reach these emulators, not the defaults.
        **local_ports(args),
    }
    text = "".join(f"export {name}={shlex.quote(value)}\n" for name, value in exports.items())
    if args.env_file:
        args.env_file.parent.mkdir(parents=True, exist_ok=True)
        args.env_file.write_text(text, encoding="utf-8")
        log(f"wrote {args.env_file}")
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()

"""Checks model request bodies against the providers' own definitions (definitions.py) and the
rules their APIs enforce beyond them (rules.py).

    validate.py serve [--cache DIR]            one JSON request a line on stdin, one verdict a
                                               line on stdout (what the Rust tests use)
    validate.py check PROVIDER FILE... [--cache DIR]
                                               bodies in files; exit status 1 if any is invalid

A request line is {"provider": "anthropic" | "openai" | "bedrock", "body": {...}}; its verdict
is {"errors": ["path: rule", ...]} (empty when the body is valid) or {"failure": "..."} when
the request itself was not understood.

The definitions are read from the SDKs once and cached as JSON (in --cache, by default
$TMPDIR/infinity-validate), keyed by the SDKs' versions and this folder's sources; a start with
a cache imports no SDK.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
import sys
import tempfile
from pathlib import Path

import rules

HERE = Path(__file__).resolve().parent
PROVIDERS = ("anthropic", "openai", "bedrock")
# The distribution whose definitions each provider's graph is read from.
SDKS = {"anthropic": "anthropic", "openai": "openai", "bedrock": "botocore"}


def _installed(distribution: str) -> str:
    """The installed version of `distribution`, from its `.dist-info` folder's name
    (importlib.metadata would cost more than the rest of a start)."""
    for entry in sys.path:
        for info in Path(entry or ".").glob(f"{distribution}-*.dist-info"):
            return info.name[len(distribution) + 1 : -len(".dist-info")]
    raise RuntimeError(f"{distribution} is not installed in {sys.prefix}: run `make tools`")


def _cache_key(provider: str) -> str:
    version = _installed(SDKS[provider])
    digest = hashlib.sha256(version.encode())
    for source in sorted(HERE.glob("*.py")):
        digest.update(source.read_bytes())
    return f"{provider}-{version}-{digest.hexdigest()[:12]}"


def load_graph(provider: str, cache: Path) -> dict:
    """The provider's definition graph, from the cache or built from its SDK (and cached)."""
    path = cache / f"{_cache_key(provider)}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        pass
    import definitions

    graph = getattr(definitions, provider)()
    cache.mkdir(parents=True, exist_ok=True)
    # Written aside and renamed: test binaries running at once may build the same file.
    with tempfile.NamedTemporaryFile("w", dir=cache, delete=False, suffix=".tmp") as out:
        json.dump(graph, out)
    os.replace(out.name, path)
    for stale in cache.glob(f"{provider}-*.json"):
        if stale != path:
            stale.unlink(missing_ok=True)
    return graph


def _join(path: str, key) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def _kind(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _shown(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


class Checker:
    """Walks a body along a definition graph, collecting "path: rule" errors."""

    def __init__(self, graph: dict):
        self.graph = graph
        self.types = graph["types"]
        self.patterns: dict[str, re.Pattern] = {}

    def check(self, body) -> list[str]:
        errors: list[str] = []
        self.node(self.graph["root"], body, "", errors)
        return errors

    def fits(self, node: dict, value) -> bool:
        """Whether `value` is the JSON kind `node` describes (its details aside)."""
        k = node["k"]
        if k == "any":
            return True
        if k == "union":
            return any(self.fits(n, value) for n in node["of"])
        if k == "lit":
            return any(type(v) is type(value) for v in node["v"])
        return {
            "str": isinstance(value, str),
            "b64": isinstance(value, str),
            "int": isinstance(value, int) and not isinstance(value, bool),
            "float": isinstance(value, (int, float)) and not isinstance(value, bool),
            "bool": isinstance(value, bool),
            "null": value is None,
            "list": isinstance(value, list),
            "map": isinstance(value, dict),
            "ref": isinstance(value, dict),
        }.get(k, False)

    def node(self, node: dict, value, path: str, errors: list[str]) -> None:
        at = path or "(body)"
        k = node["k"]
        if k == "any":
            return
        if k == "union":
            self.union(node, value, path, errors)
            return
        if not self.fits(node, value):
            errors.append(f"{at}: expected {self.describe(node)}, got {_kind(value)}")
            return
        if k == "lit":
            if not any(type(v) is type(value) and v == value for v in node["v"]):
                allowed = ", ".join(json.dumps(v) for v in node["v"])
                errors.append(f"{at}: {_shown(value)} is not one of {allowed}")
        elif k == "str":
            self.limits(node, len(value), at, "characters", errors)
            if "enum" in node and value not in node["enum"]:
                errors.append(f"{at}: {_shown(value)} is not one of {', '.join(node['enum'])}")
            if "pattern" in node and not self.pattern(node["pattern"]).fullmatch(value):
                errors.append(f"{at}: {_shown(value)} does not match the pattern {node['pattern']}")
        elif k in ("int", "float"):
            if "min" in node and value < node["min"]:
                errors.append(f"{at}: {value} is below the minimum {node['min']}")
            if "max" in node and value > node["max"]:
                errors.append(f"{at}: {value} is above the maximum {node['max']}")
        elif k == "b64":
            try:
                decoded = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                errors.append(f"{at}: bytes must be base64 (standard alphabet, padded)")
                return
            self.limits(node, len(decoded), at, "bytes", errors)
        elif k == "list":
            self.limits(node, len(value), at, "items", errors)
            for i, item in enumerate(value):
                self.node(node["of"], item, _join(path, i), errors)
        elif k == "map":
            self.limits(node, len(value), at, "entries", errors)
            for key, item in value.items():
                if "key" in node:
                    self.node(node["key"], key, _join(path, key), errors)
                self.node(node["of"], item, _join(path, key), errors)
        elif k == "ref":
            self.object(self.types[node["to"]], value, path, errors)

    def limits(self, node: dict, size: int, at: str, unit: str, errors: list[str]) -> None:
        if "min" in node and size < node["min"]:
            errors.append(f"{at}: {size} {unit}, fewer than the minimum {node['min']}")
        if "max" in node and size > node["max"]:
            errors.append(f"{at}: {size} {unit}, more than the maximum {node['max']}")

    def pattern(self, pattern: str) -> re.Pattern:
        if pattern not in self.patterns:
            self.patterns[pattern] = re.compile(pattern)
        return self.patterns[pattern]

    def object(self, spec: dict, value: dict, path: str, errors: list[str]) -> None:
        for key in spec["required"]:
            if key not in value:
                errors.append(f"{_join(path, key)}: a required field is missing")
        for key, item in value.items():
            field = spec["fields"].get(key)
            if field is None:
                if not spec["extra"]:
                    errors.append(f"{_join(path, key)}: unknown field (extra inputs are not permitted)")
                continue
            self.node(field, item, _join(path, key), errors)
        if spec["one"]:
            set_keys = [key for key in value if key in spec["fields"]]
            if len(set_keys) != 1:
                errors.append(
                    f"{path or '(body)'}: exactly one of {', '.join(spec['fields'])} must be set, "
                    f"found {len(set_keys)}"
                )

    def union(self, node: dict, value, path: str, errors: list[str]) -> None:
        """Valid when one alternative takes the value; otherwise the errors of the alternative
        it was most likely meant as: of the right JSON kind, its literal fields (`type`,
        `role`) matching, the fewest errors."""
        candidates = [n for n in node["of"] if self.fits(n, value)]
        if isinstance(value, dict):
            scored = [(self.discriminated(n, value), n) for n in candidates]
            best = max((s for s, _ in scored), default=0)
            candidates = [n for s, n in scored if s == best and s >= 0]
        fewest = None
        for candidate in candidates:
            found: list[str] = []
            self.node(candidate, value, path, found)
            if not found:
                return
            if fewest is None or len(found) < len(fewest):
                fewest = found
        if fewest is None:
            choices = "; ".join(self.describe(n) for n in node["of"])
            errors.append(f"{path or '(body)'}: {_kind(value)} is none of: {choices}")
        else:
            errors.extend(fewest)

    def discriminated(self, node: dict, value: dict) -> int:
        """How many of an object type's tag fields (a literal of one value: `"type": "text"`)
        `value` matches; -1 if one differs."""
        if node["k"] != "ref":
            return 0
        score = 0
        for key, field in self.types[node["to"]]["fields"].items():
            if field["k"] == "lit" and len(field["v"]) == 1 and key in value:
                if value[key] not in field["v"]:
                    return -1
                score += 1
        return score

    def describe(self, node: dict) -> str:
        k = node["k"]
        if k == "ref":
            name = node["to"].rsplit(".", 1)[-1]
            literal = [
                f"{key}={json.dumps(f['v'][0])}"
                for key, f in self.types[node["to"]]["fields"].items()
                if f["k"] == "lit" and len(f["v"]) == 1
            ]
            return f"{name} ({', '.join(literal)})" if literal else name
        if k == "union":
            return " or ".join(self.describe(n) for n in node["of"])
        if k == "lit":
            return "one of " + ", ".join(json.dumps(v) for v in node["v"])
        return {
            "str": "a string", "b64": "base64 bytes", "int": "an integer", "float": "a number",
            "bool": "a boolean", "null": "null", "list": "an array", "map": "an object",
            "never": "nothing JSON holds",
        }.get(k, k)


class Validator:
    def __init__(self, cache: Path):
        self.cache = cache
        self.checkers: dict[str, Checker] = {}

    def errors(self, provider: str, body) -> list[str]:
        if provider not in self.checkers:
            self.checkers[provider] = Checker(load_graph(provider, self.cache))
        errors = self.checkers[provider].check(body)
        if isinstance(body, dict):
            errors += getattr(rules, provider)(body)
        return errors


def _cache_dir(args: list[str]) -> Path:
    if "--cache" in args:
        at = args.index("--cache")
        directory = args[at + 1]
        del args[at : at + 2]
        return Path(directory)
    return Path(tempfile.gettempdir()) / "infinity-validate"


def serve(validator: Validator) -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            provider = request["provider"]
            if provider not in PROVIDERS:
                raise ValueError(f"unknown provider {provider!r} (one of {', '.join(PROVIDERS)})")
            verdict = {"errors": validator.errors(provider, request["body"])}
        except Exception as failure:  # the verdict says what went wrong; the loop goes on
            verdict = {"failure": f"{type(failure).__name__}: {failure}"}
        sys.stdout.write(json.dumps(verdict) + "\n")
        sys.stdout.flush()


def check_files(validator: Validator, provider: str, files: list[str]) -> int:
    invalid = 0
    for name in files:
        errors = validator.errors(provider, json.loads(Path(name).read_text()))
        print(f"{name}: {'valid' if not errors else f'{len(errors)} errors'}")
        for error in errors:
            print(f"  {error}")
        invalid += bool(errors)
    return 1 if invalid else 0


def main(args: list[str]) -> int:
    cache = _cache_dir(args)
    validator = Validator(cache)
    if args[:1] == ["serve"]:
        serve(validator)
        return 0
    if args[:1] == ["check"] and len(args) >= 3 and args[1] in PROVIDERS:
        return check_files(validator, args[1], args[2:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The providers' request definitions as plain data, read from their own SDKs.

Each provider's request type becomes one graph of nodes (dicts, so it can be cached as JSON and
read back without importing an SDK again):

    {"k": "str" | "int" | "float" | "bool" | "null" | "any"}   a JSON scalar, or anything
    {"k": "never", "why": ...}     a Python type no JSON value is (a file handle)
    {"k": "lit", "v": [...]}       one of these values
    {"k": "list", "of": node}      an array (min/max: its length)
    {"k": "map", "of": node}       an object with any keys
    {"k": "union", "of": [node]}   one of these
    {"k": "ref", "to": name}       the object type `name` in the graph's "types"
    {"k": "b64"}                   bytes, base64 in JSON (min/max: the decoded length)

and an object type is {"fields": {key: node}, "required": [key], "extra": bool, "one": bool}
("extra": unknown keys allowed; "one": exactly one field is set, a Smithy union). Strings,
numbers and arrays may carry "min", "max", "pattern" and "enum" where the definition has them.

Anthropic and OpenAI: the SDKs' TypedDicts for `messages.create` / `chat.completions.create`
with `stream: true`, annotations walked one by one. (pydantic's TypeAdapter is not used: it
refuses a config for a TypedDict, the SDK's own config does not forbid unknown keys, and it
validates `Iterable[...]` fields lazily, so a bad message in `messages` would pass unseen.)
Unknown keys are errors unless the SDK says a type allows them (`extra: allow`), as the APIs
answer "Extra inputs are not permitted".

Bedrock: botocore's `bedrock-runtime` service model, the input shape of `Converse` (the same
as `ConverseStream`'s but for the operation), with every length, pattern and enum it states.
"""

from __future__ import annotations

import collections.abc
import datetime
import types
import typing

import typing_extensions as te

_WRAPPERS = {"Required", "NotRequired", "ReadOnly"}


def anthropic() -> dict:
    from anthropic.types.message_create_params import MessageCreateParamsStreaming

    return _SdkGraph().build(MessageCreateParamsStreaming)


def openai() -> dict:
    from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming

    return _SdkGraph().build(CompletionCreateParamsStreaming)


def bedrock(operation: str = "Converse") -> dict:
    import botocore.loaders

    model = botocore.loaders.Loader().load_service_model("bedrock-runtime", "service-2")
    return _ShapeGraph(model["shapes"]).build(model["operations"][operation]["input"]["shape"])


def _name(form) -> str:
    return getattr(form, "_name", None) or getattr(form, "__name__", "") or ""


class _SdkGraph:
    """SDK TypedDicts to nodes."""

    def __init__(self):
        self.types: dict[str, dict | None] = {}

    def build(self, root) -> dict:
        return {"root": self.node(root), "types": self.types}

    def node(self, hint) -> dict:
        hint, _ = _unwrap(hint)
        origin, args = te.get_origin(hint), te.get_args(hint)
        if hint is typing.Any or hint is object:
            return {"k": "any"}
        if hint is type(None) or hint is None:
            return {"k": "null"}
        for python, kind in ((bool, "bool"), (int, "int"), (float, "float"), (str, "str")):
            if hint is python:
                return {"k": kind}
        if hint in (datetime.datetime, datetime.date):
            return {"k": "str"}
        if origin is typing.Literal or origin is te.Literal:
            return {"k": "lit", "v": list(args)}
        if origin is typing.Union or origin is types.UnionType:
            return {"k": "union", "of": [self.node(a) for a in args]}
        if te.is_typeddict(hint):
            return {"k": "ref", "to": self.typed_dict(hint)}
        if hint in (list, tuple) or origin in (list, tuple, collections.abc.Iterable,
                                                collections.abc.Sequence) \
                or _name(origin) == "SequenceNotStr":
            return {"k": "list", "of": self.node(args[0]) if args else {"k": "any"}}
        if hint is dict or origin in (dict, collections.abc.Mapping):
            return {"k": "map", "of": self.node(args[1]) if len(args) == 2 else {"k": "any"}}
        return {"k": "never", "why": f"{hint!r} is no JSON value"}

    def typed_dict(self, cls) -> str:
        name = f"{cls.__module__}.{cls.__qualname__}"
        if name in self.types:
            return name
        self.types[name] = None  # a recursive reference finds the name taken
        hints = te.get_type_hints(cls, include_extras=True)
        totality = _totality(cls)
        fields, required = {}, []
        for key, hint in hints.items():
            inner, marks = _unwrap(hint)
            wire = _alias(hint) or key
            fields[wire] = self.node(inner)
            if "Required" in marks or ("NotRequired" not in marks and totality.get(key, True)):
                required.append(wire)
        config = getattr(cls, "__pydantic_config__", None) or {}
        self.types[name] = {
            "fields": fields,
            "required": required,
            "extra": config.get("extra") == "allow",
            "one": False,
        }
        return name


def _unwrap(hint):
    """The type inside `Annotated`, `Required`, `NotRequired`, and the wrappers seen."""
    marks = set()
    while True:
        origin = te.get_origin(hint)
        if origin is te.Annotated or origin is typing.Annotated:
            hint = te.get_args(hint)[0]
        elif origin is not None and _name(origin) in _WRAPPERS:
            marks.add(_name(origin))
            hint = te.get_args(hint)[0]
        else:
            return hint, marks


def _alias(hint) -> str | None:
    """The wire name an SDK gives a field (`PropertyInfo(alias=...)`), if any."""
    while te.get_origin(hint) is not None:
        if te.get_origin(hint) in (te.Annotated, typing.Annotated):
            for meta in getattr(hint, "__metadata__", ()):
                if getattr(meta, "alias", None):
                    return meta.alias
        hint = te.get_args(hint)[0] if te.get_args(hint) else None
    return None


def _totality(cls) -> dict[str, bool]:
    """Whether each key of a TypedDict is required by its class's `total`: the class that
    declares a key decides (its annotations minus its bases')."""
    result: dict[str, bool] = {}
    for base in getattr(cls, "__orig_bases__", ()):
        if te.is_typeddict(base):
            result.update(_totality(base))
    inherited = set(result)
    for key in getattr(cls, "__annotations__", {}):
        if key not in inherited:
            result[key] = getattr(cls, "__total__", True)
    return result


class _ShapeGraph:
    """botocore shapes to nodes, with the REST JSON body's rules: members sent in the URL or in
    headers are not in the body."""

    def __init__(self, shapes: dict):
        self.shapes = shapes
        self.types: dict[str, dict | None] = {}

    def build(self, root: str) -> dict:
        return {"root": {"k": "ref", "to": self.structure(root, body=True)}, "types": self.types}

    def node(self, name: str) -> dict:
        shape = self.shapes[name]
        kind = shape["type"]
        limits = {k: shape[k] for k in ("min", "max", "pattern", "enum") if k in shape}
        if kind == "structure":
            if shape.get("document"):
                return {"k": "any"}
            return {"k": "ref", "to": self.structure(name)}
        if kind == "list":
            return {"k": "list", "of": self.node(shape["member"]["shape"]), **limits}
        if kind == "map":
            return {"k": "map", "of": self.node(shape["value"]["shape"]),
                    "key": self.node(shape["key"]["shape"]), **limits}
        if kind == "string":
            return {"k": "str", **limits}
        if kind in ("integer", "long"):
            return {"k": "int", **limits}
        if kind in ("float", "double"):
            return {"k": "float", **limits}
        if kind == "boolean":
            return {"k": "bool"}
        if kind == "blob":
            return {"k": "b64", **limits}
        if kind == "timestamp":
            return {"k": "float"}
        return {"k": "never", "why": f"shape type {kind}"}

    def structure(self, name: str, body: bool = False) -> str:
        if name in self.types:
            return name
        self.types[name] = None
        shape = self.shapes[name]
        members = {
            spec.get("jsonName", key): spec
            for key, spec in shape.get("members", {}).items()
            if not (body and spec.get("location"))
        }
        self.types[name] = {
            "fields": {key: self.node(spec["shape"]) for key, spec in members.items()},
            "required": [
                spec.get("jsonName", key)
                for key, spec in shape.get("members", {}).items()
                if key in shape.get("required", []) and not (body and spec.get("location"))
            ],
            "extra": False,
            "one": bool(shape.get("union")),
        }
        return name

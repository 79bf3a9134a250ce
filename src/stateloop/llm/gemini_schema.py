"""JSON Schemas turned into the OpenAPI subset Gemini's function declarations and response
schemas take.

Gemini refuses a request whose schema holds a keyword it does not know
(``additionalProperties``, ``$ref``, ``const``, ...), a list of types, or an object with empty
``properties``. So: ``$ref`` is inlined from ``$defs`` (a recursive definition is cut to a
plain object at the point it recurs), a ``null`` branch of ``anyOf`` or of a type list
becomes ``nullable``, ``const`` becomes a one-value ``enum``, ``allOf`` of one schema is
merged, and every other keyword outside the subset is dropped. What is dropped only loosens
the schema: the tool still checks its arguments against its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The fields of Gemini's ``Schema`` object kept as they are (the rest are converted or dropped).
_KEPT = {"description", "title", "format", "enum", "maxItems", "minItems", "minProperties",
         "maxProperties", "minLength", "maxLength", "pattern", "minimum", "maximum",
         "propertyOrdering"}
_FORMATS: dict[Any, set[str]] = {"string": {"enum", "date-time"},
                                 "integer": {"int32", "int64"}, "number": {"float", "double"}}
_MAX_DEPTH = 32  # Gemini nests schemas no deeper in practice; a cycle stops here at worst
# Inlining references can multiply a schema (each definition using the next twice doubles
# it): past this many schemas the tool is refused rather than the event loop held.
MAX_NODES = 5_000


class SchemaTooLarge(ValueError):
    """A schema that grows past ``MAX_NODES`` schemas once its references are inlined."""


def gemini_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` (a JSON Schema) as a Gemini ``Schema``."""
    defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}
    return _Converter(defs).convert(schema, (), 0)


class _Converter:
    __slots__ = ("defs", "nodes")

    def __init__(self, defs: Mapping[str, Any]) -> None:
        self.defs = defs
        self.nodes = 0

    def convert(self, schema: Any, seen: tuple[str, ...], depth: int) -> dict[str, Any]:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise SchemaTooLarge(f"the schema grows past {MAX_NODES} schemas once its "
                                 f"$refs are inlined")
        return _convert(self, schema, seen, depth)


def _convert(converter: _Converter, schema: Any, seen: tuple[str, ...],
             depth: int) -> dict[str, Any]:
    defs = converter.defs
    if not isinstance(schema, Mapping) or depth > _MAX_DEPTH:
        return {"type": "object"}
    schema = _merged_all_of(schema)
    ref = schema.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        if name in seen or name not in defs:  # a cycle, or a reference we cannot follow
            return {"type": "object", **_described(schema)}
        target = {**defs[name], **{k: v for k, v in schema.items() if k != "$ref"}}
        return converter.convert(target, (*seen, name), depth + 1)
    out: dict[str, Any] = {k: v for k, v in schema.items() if k in _KEPT}
    nullable = bool(schema.get("nullable"))
    kind = schema.get("type")
    if isinstance(kind, list):
        nullable = nullable or "null" in kind
        rest = [k for k in kind if k != "null"]
        if len(rest) == 1:
            kind = rest[0]
        else:  # several types: each becomes a branch
            kind = None
            out["anyOf"] = [{"type": k} for k in rest]
    branches = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(branches, list):
        kept = [b for b in branches if not (isinstance(b, Mapping) and b.get("type") == "null")]
        nullable = nullable or len(kept) < len(branches)
        converted = [converter.convert(b, seen, depth + 1) for b in kept]
        if len(converted) == 1:  # Optional[X]: X, nullable
            out = {**converted[0], **{k: v for k, v in out.items() if k == "description"}}
        elif converted:
            out["anyOf"] = converted
    if "const" in schema:
        out["enum"] = [schema["const"]]
    if isinstance(kind, str) and kind != "null":
        out["type"] = kind
    if "enum" in out:  # Gemini's enums are strings
        out["enum"] = [v if isinstance(v, str) else str(v) for v in out["enum"] if v is not None]
        out["type"] = "string"
    if out.get("format") not in _FORMATS.get(out.get("type"), ()):
        out.pop("format", None)
    properties = schema.get("properties")
    if isinstance(properties, Mapping) and properties:
        out["type"] = "object"
        out["properties"] = {name: converter.convert(value, seen, depth + 1)
                             for name, value in properties.items()}
        required = [n for n in schema.get("required") or () if n in properties]
        if required:
            out["required"] = required
    items = schema.get("items")
    if isinstance(items, Mapping):
        out["items"] = converter.convert(items, seen, depth + 1)
    elif out.get("type") == "array":
        out["items"] = {"type": "string"}  # Gemini needs the items' type
    if nullable:
        out["nullable"] = True
    return out


def _merged_all_of(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    parts = schema.get("allOf")
    if not isinstance(parts, list) or not parts:
        return schema
    merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
    for part in parts:
        if isinstance(part, Mapping):
            for key, value in part.items():
                merged.setdefault(key, value)
    return merged


def _described(schema: Mapping[str, Any]) -> dict[str, Any]:
    description = schema.get("description")
    return {"description": description} if isinstance(description, str) else {}


def parameters(schema: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A tool's ``parameters`` for a function declaration; None for a tool without any
    (Gemini refuses an object schema with no properties)."""
    if not schema or not schema.get("properties"):
        return None
    return gemini_schema(schema)

"""A source tool's JSON schema read from its syntax tree, without running the source.

The function's signature gives the parameters (annotations of the common types become JSON
schema, literal defaults become defaults) and its docstring the descriptions, as
``Tool.from_function`` would derive them from the live function. An annotation that cannot
be read without running code (a class the source defines, a call) is refused by name: the
caller may give ``json_schema`` instead.
"""

from __future__ import annotations

import ast
from typing import Any

from ..errors import ToolDefinitionError
from .docstrings import parse_docstring

_SCALARS: dict[str, dict[str, Any]] = {
    "str": {"type": "string"}, "int": {"type": "integer"}, "float": {"type": "number"},
    "bool": {"type": "boolean"}, "None": {"type": "null"}, "NoneType": {"type": "null"},
    "Any": {}, "object": {},
    "list": {"type": "array", "items": {}}, "List": {"type": "array", "items": {}},
    "Sequence": {"type": "array", "items": {}},
    "dict": {"type": "object", "additionalProperties": True},
    "Dict": {"type": "object", "additionalProperties": True},
    "Mapping": {"type": "object", "additionalProperties": True},
}
_ARRAYS = {"list", "List", "Sequence", "set", "Set", "frozenset", "tuple", "Tuple"}
_OBJECTS = {"dict", "Dict", "Mapping"}


def find_function(tree: ast.Module, name: str | None
                  ) -> ast.FunctionDef | ast.AsyncFunctionDef:
    """The top-level function named ``name`` (default: the last one defined)."""
    defined = {node.name: node for node in tree.body
               if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}
    wanted = name or (list(defined)[-1] if defined else None)
    if wanted is None or wanted not in defined:
        raise ToolDefinitionError(f"source_code defines no function named {wanted!r} "
                                  f"(it defines: {', '.join(defined) or 'none'})")
    return defined[wanted]


def parse_source(source_code: str) -> ast.Module:
    """The syntax tree, or a ToolDefinitionError naming the line that does not compile."""
    try:
        tree = ast.parse(source_code)
        compile(tree, "<tool>", "exec")  # compiles only: catches what ast.parse lets through
    except SyntaxError as exc:
        raise ToolDefinitionError(f"source_code does not compile: line {exc.lineno}: "
                                  f"{exc.msg}") from exc
    return tree


def schema_from_source(source_code: str, name: str | None = None) -> dict[str, Any]:
    """``{"name", "description", "parameters"}`` for the function ``name`` in the source."""
    function = find_function(parse_source(source_code), name)
    summary, docs = parse_docstring(ast.get_docstring(function, clean=False))
    arguments = function.args
    if arguments.vararg or arguments.kwarg:
        star = arguments.vararg or arguments.kwarg
        assert star is not None
        raise ToolDefinitionError(
            f"tool {function.name!r}: parameter {star.arg!r} is *args/**kwargs; a tool needs "
            f"named parameters with type hints so the model can be given a JSON schema")
    positional = [*arguments.posonlyargs, *arguments.args]
    defaults: list[ast.expr | None] = [
        *[None] * (len(positional) - len(arguments.defaults)), *arguments.defaults,
        *arguments.kw_defaults]
    properties: dict[str, Any] = {}
    required: list[str] = []
    for parameter, default in zip([*positional, *arguments.kwonlyargs], defaults, strict=True):
        properties[parameter.arg] = _property(function.name, parameter, default,
                                              docs.get(parameter.arg))
        if default is None:
            required.append(parameter.arg)
    return {"name": function.name, "description": summary,
            "parameters": {"type": "object", "properties": properties, "required": required,
                           "additionalProperties": False}}


def schema_from_args(source_code: str, args_json_schema: dict[str, Any],
                     name: str | None = None) -> dict[str, Any]:
    """As ``schema_from_source``, with the parameters taken from ``args_json_schema`` (a
    pydantic model's JSON schema, as Letta's clients send for ``args_schema=``) instead of
    the annotations, which may name classes the source does not define."""
    function = find_function(parse_source(source_code), name)
    summary, docs = parse_docstring(ast.get_docstring(function, clean=False))
    properties = args_json_schema.get("properties", {})
    required = args_json_schema.get("required", [])
    if not isinstance(properties, dict) or not all(isinstance(p, dict)
                                                   for p in properties.values()):
        raise ToolDefinitionError("args_json_schema.properties must map each parameter to "
                                  "a JSON schema")
    if not isinstance(required, list) or not set(required) <= set(properties):
        raise ToolDefinitionError("args_json_schema.required must list some of its properties")
    parameters: dict[str, Any] = {"type": "object", "properties": {}, "required": required}
    for key, schema in properties.items():
        schema = {k: v for k, v in schema.items() if k != "title"}  # pydantic's, not the model's
        if key in docs and "description" not in schema:
            schema["description"] = docs[key]
        parameters["properties"][key] = schema
    if "$defs" in args_json_schema:  # the nested models the properties refer to
        parameters["$defs"] = args_json_schema["$defs"]
    return {"name": function.name, "description": summary, "parameters": parameters}


def _property(tool: str, parameter: ast.arg, default: ast.expr | None,
              description: str | None) -> dict[str, Any]:
    if parameter.annotation is None:
        raise ToolDefinitionError(
            f"tool {tool!r}: parameter {parameter.arg!r} has no type hint; add one "
            f"(e.g. '{parameter.arg}: str') so it can become a JSON schema")
    try:
        schema = _annotation(parameter.annotation)
    except ValueError as exc:
        raise ToolDefinitionError(
            f"tool {tool!r}: parameter {parameter.arg!r}: {exc}; use str, int, float, bool, "
            f"list[...], dict[...], Optional/| None or Literal, or give json_schema") from None
    if description:
        schema["description"] = description
    if default is not None:
        try:
            schema["default"] = ast.literal_eval(default)
        except ValueError:
            raise ToolDefinitionError(
                f"tool {tool!r}: parameter {parameter.arg!r}: its default "
                f"{ast.unparse(default)!r} is not a literal") from None
    return schema


def _annotation(node: ast.expr) -> dict[str, Any]:
    """JSON schema for one annotation; ValueError when it is not one of the common types."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            return _annotation(ast.parse(node.value, mode="eval").body)  # a string hint
        except SyntaxError:
            raise ValueError(f"the annotation {node.value!r} does not parse") from None
    if isinstance(node, ast.Constant) and node.value is None:
        return {"type": "null"}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _union([node.left, node.right])
    name = _name(node)
    if name in _SCALARS:
        return dict(_SCALARS[name])
    if isinstance(node, ast.Subscript):
        outer = _name(node.value)
        items = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        if outer == "Optional" and len(items) == 1:
            return _union([items[0], ast.Constant(None)])
        if outer == "Union":
            return _union(items)
        if outer == "Literal":
            return _literal(items)
        if outer == "Annotated":
            return _annotation(items[0])
        if outer in _ARRAYS:
            if outer in {"tuple", "Tuple"} and not (
                    len(items) == 2 and isinstance(items[1], ast.Constant)
                    and items[1].value is Ellipsis):
                raise ValueError(f"the annotation {ast.unparse(node)!r} is a fixed tuple")
            array: dict[str, Any] = {"type": "array", "items": _annotation(items[0])}
            if outer in {"set", "Set", "frozenset"}:
                array["uniqueItems"] = True
            return array
        if outer in _OBJECTS and len(items) == 2:
            if _name(items[0]) != "str":
                raise ValueError("object keys must be str")
            return {"type": "object", "additionalProperties": _annotation(items[1])}
    raise ValueError(f"the annotation {ast.unparse(node)!r} cannot be read without running "
                     f"the source")


def _name(node: ast.expr) -> str | None:
    """``str`` for ``str``, ``Optional`` for ``typing.Optional``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _union(members: list[ast.expr]) -> dict[str, Any]:
    flat: list[dict[str, Any]] = []
    for member in members:
        schema = _annotation(member)
        flat.extend(schema["anyOf"] if list(schema) == ["anyOf"] else [schema])
    return flat[0] if len(flat) == 1 else {"anyOf": flat}


def _literal(items: list[ast.expr]) -> dict[str, Any]:
    try:
        values = [ast.literal_eval(item) for item in items]
    except ValueError:
        raise ValueError("Literal takes constants only") from None
    schema: dict[str, Any] = {"enum": values}
    kinds = {type(value) for value in values}
    types = {str: "string", int: "integer", float: "number", bool: "boolean"}
    if len(kinds) == 1 and (kind := kinds.pop()) in types:
        schema["type"] = types[kind]
    return schema

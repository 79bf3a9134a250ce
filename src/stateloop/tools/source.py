"""Tools from Python source text, as Agent Files and Letta's API carry them."""

from __future__ import annotations

import ast
from typing import Any

from ..errors import ToolDefinitionError
from .base import Tool


def tool_from_source(source_code: str, json_schema: dict[str, Any] | None = None, *,
                     name: str | None = None) -> Tool:
    """Compile ``source_code`` and make a tool of the function it defines.

    The function named by ``name`` (or the schema's ``name``, or the last function defined)
    becomes the tool; the schema's description wins over the docstring's. The code runs in
    this process: use it only for source you trust.
    """
    try:
        tree = ast.parse(source_code)
    except SyntaxError as exc:
        raise ToolDefinitionError(f"tool source does not compile: line {exc.lineno}: "
                                  f"{exc.msg}") from exc
    defined = [node.name for node in tree.body
               if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]
    wanted = name or (json_schema or {}).get("name") or (defined[-1] if defined else None)
    if wanted not in defined:
        raise ToolDefinitionError(f"tool source defines no function named {wanted!r} "
                                  f"(it defines: {', '.join(defined) or 'none'})")
    namespace: dict[str, Any] = {"__name__": f"stateloop_tool_{wanted}"}
    exec(compile(tree, f"<tool {wanted}>", "exec"), namespace)
    description = (json_schema or {}).get("description")
    return Tool.from_function(namespace[wanted], name=wanted,
                              description=description.strip() if description else None)

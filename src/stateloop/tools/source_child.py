"""The parsing side of a tool's source: a short-lived child process that parses and compiles
source the server was sent, and answers with its tool function's signature alone.

Run as a script (``python -I source_child.py``), it imports the standard library only. It
reads ``{"source", "name", "memory_mb", "cpu_seconds"}`` as JSON on its stdin, limits its
own address space and CPU time, and writes one JSON object to its stdout: ``{"signature":
text}``, the function with its parameters, their hints and defaults and its docstring (no
decorators, no body), nesting at most ``MAX_DEPTH`` levels and at most ``MAX_SIGNATURE``
characters long; or ``{"error": text}`` naming what is wrong with the source. CPython's
parser and compiler can exhaust the stack, the memory or the time on a small pathological
source; here that ends this process, never the server.
"""

from __future__ import annotations

import ast
import json
import resource
import sys
from typing import Any

MAX_DEPTH = 100  # levels of syntax in a signature: hints and defaults nest a few
MAX_SIGNATURE = 64 * 1024  # characters of a signature with its docstring


class SourceError(Exception):
    """What is wrong with the source, in words for the client."""


def signature(source: str, name: str | None) -> str:
    """The function ``name`` (default: the last defined at the top level) as a stub."""
    try:
        tree = ast.parse(source)
        compile(tree, "<tool>", "exec")  # compiles only: catches what ast.parse lets through
    except SyntaxError as exc:
        raise SourceError(f"source_code does not compile: line {exc.lineno}: "
                          f"{exc.msg}") from None
    except ValueError as exc:  # a NUL byte, say
        raise SourceError(f"source_code does not compile: {exc}") from None
    except (RecursionError, MemoryError):
        raise SourceError("source_code nests too deeply to compile") from None
    defined = {node.name: node for node in tree.body
               if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}
    wanted = name or (list(defined)[-1] if defined else None)
    if wanted is None or wanted not in defined:
        raise SourceError(f"source_code defines no function named {wanted!r} "
                          f"(it defines: {', '.join(defined) or 'none'})")
    function = defined[wanted]
    docstring = ast.get_docstring(function, clean=False)
    function.body = [ast.Expr(ast.Constant(docstring)) if docstring is not None else ast.Pass()]
    function.decorator_list, function.returns = [], None
    if _depth(function) > MAX_DEPTH:
        raise SourceError(f"the signature of {wanted!r} nests more than {MAX_DEPTH} levels "
                          f"deep")
    text = ast.unparse(function)
    if len(text) > MAX_SIGNATURE:
        raise SourceError(f"the signature and docstring of {wanted!r} are longer than "
                          f"{MAX_SIGNATURE} characters")
    return text


def _depth(root: ast.AST) -> int:
    deepest, pending = 0, [(root, 1)]
    while pending:
        node, depth = pending.pop()
        deepest = max(deepest, depth)
        if deepest > MAX_DEPTH:
            break
        pending.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def main() -> None:
    request: dict[str, Any] = json.loads(sys.stdin.buffer.read())
    memory = int(request["memory_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    cpu = int(request["cpu_seconds"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    try:
        answer = {"signature": signature(request["source"], request["name"])}
    except SourceError as exc:
        answer = {"error": str(exc)}
    sys.stdout.write(json.dumps(answer))


if __name__ == "__main__":
    main()

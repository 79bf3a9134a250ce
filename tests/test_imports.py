"""Imports point down: the import graph of ``src/stateloop``, read from the source, has no
cycle; the server's folders are layered (models under services under routes); an import
inside a function is there only for a dependency that is optional or slow to load, with the
reason on its line (``# lazy: <why>``); and every module's docstring names its job.

The graph counts imports made inside functions (they are dependencies all the same) and
leaves out those under ``if TYPE_CHECKING:`` (annotations only). ``from pkg import name`` is
an edge to ``pkg.name`` when that is a module, else to ``pkg``.
"""

from __future__ import annotations

import ast
import functools
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "stateloop"
LAZY = "# lazy:"


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    line: int
    text: str  # the statement as written
    targets: tuple[str, ...]  # absolute names it imports
    in_function: bool
    lazy: bool  # a "# lazy: <why>" comment on one of its lines


def module_names(root: Path) -> dict[str, tuple[Path, bool]]:
    """Every module of the package: dotted name -> (file, whether it is a package)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        found[".".join(parts)] = (path, is_package)
    return found


# A line that may start an import, and a top-level definition (a statement boundary).
_IMPORT_LINE = re.compile(r"^[ \t]*(?:from[ \t]+[\w.]+[ \t]+import\b|import[ \t]+\w)", re.M)
_TOP_DEFINITION = re.compile(r"^(?:def |async def |class |@)", re.M)
_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")  # where statements nest


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def parse(source: str, path: Path) -> ast.Module:
    """The module's syntax tree, read only up to the first top-level definition after its
    last line that could start an import (nothing past it imports): parsing is most of the
    cost. A cut that falls inside a string fails to parse, and the whole file is read."""
    starts = [found.end() for found in _IMPORT_LINE.finditer(source)]
    cut = _TOP_DEFINITION.search(source, starts[-1] if starts else 0)
    if cut is not None:
        try:
            return ast.parse(source[:cut.start()], str(path))
        except SyntaxError:
            pass
    return ast.parse(source, str(path))


def imports_of(module: str, path: Path, is_package: bool,
               modules: dict[str, tuple[Path, bool]]) -> Iterator[Import]:
    """The imports ``module`` makes at run time (not those under ``if TYPE_CHECKING:``)."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    base = module if is_package else module.rpartition(".")[0]

    def targets(node: ast.Import | ast.ImportFrom) -> tuple[str, ...]:
        if isinstance(node, ast.Import):
            return tuple(alias.name for alias in node.names)
        if node.level:
            anchor = base
            for _ in range(node.level - 1):
                anchor = anchor.rpartition(".")[0]
            source_module = ".".join(p for p in (anchor, node.module) if p)
        else:
            source_module = node.module or ""
        return tuple(f"{source_module}.{alias.name}"
                     if f"{source_module}.{alias.name}" in modules else source_module
                     for alias in node.names)

    def walk(body: list[ast.stmt], in_function: bool) -> Iterator[Import]:
        """Statements only: an import is a statement, so expressions need no visit."""
        for child in body:
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                span = lines[child.lineno - 1:(child.end_lineno or child.lineno)]
                yield Import(module, child.lineno, " ".join(s.strip() for s in span),
                             targets(child), in_function, any(LAZY in s for s in span))
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                yield from walk(child.orelse, in_function)  # the else branch runs
            else:
                inside = in_function or isinstance(child, (ast.FunctionDef,
                                                           ast.AsyncFunctionDef))
                for field in _BODIES:
                    nested = getattr(child, field, None)
                    if nested:
                        for item in nested:
                            if isinstance(item, ast.stmt):
                                yield from walk([item], inside)
                            else:  # an except handler or a match case
                                yield from walk(item.body, inside)

    yield from walk(parse(source, path).body, False)


def owner(name: str, modules: dict[str, tuple[Path, bool]]) -> str | None:
    """The package module ``name`` is in (``stateloop.x.Y`` -> ``stateloop.x``), if any."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


@functools.cache
def import_graph(root: Path = PACKAGE) -> tuple[dict[str, set[str]], list[Import]]:
    """Edges between the package's modules, and every import read."""
    modules = module_names(root)
    edges: dict[str, set[str]] = {name: set() for name in modules}
    every: list[Import] = []
    for name, (path, is_package) in modules.items():
        for found in imports_of(name, path, is_package, modules):
            every.append(found)
            for target in found.targets:
                module = owner(target, modules)
                if module is not None and module != name:
                    edges[name].add(module)
    return edges, every


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_package_has_no_import_cycle() -> None:
    started = time.process_time()  # the CPU it takes, whatever else the machine runs
    edges, _ = import_graph()
    found = cycles(edges)
    assert time.process_time() - started < 1
    assert len(edges) > 200  # the package was read
    described = [" <-> ".join(component) for component in found]
    assert not found, "import cycles (imports inside functions count):\n" + "\n".join(described)


def test_every_function_level_import_says_why_it_is_lazy() -> None:
    _, every = import_graph()
    checked = [found for found in every if found.in_function]
    assert checked, "no function-level import at all: the reader missed them"
    unexplained = [f"{found.module}:{found.line}: {found.text}"
                   for found in checked if not found.lazy]
    assert not unexplained, (f"imports inside functions without a '{LAZY} <why>' comment "
                             f"(move them to the top, or say why they wait):\n"
                             + "\n".join(unexplained))


def test_the_reader_finds_cycles_and_unexplained_imports(tmp_path: Path) -> None:
    """The checks themselves: a cycle through a function-level import and a relative
    ``from . import sub`` is found; an import under TYPE_CHECKING is no edge; a lazy import
    with its reason passes, one without fails."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from .c import C\n"
        "def f():\n    from .b import g  # dodges the cycle\n    return g\n")
    (package / "b.py").write_text("from . import a\n\ndef g():\n"
                                  "    import json  # lazy: only this path needs it\n")
    (package / "c.py").write_text("from .sub import leaf\nC = 1\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "leaf.py").write_text("from .. import c\n")
    edges, every = import_graph(package)
    assert edges["pkg.a"] == {"pkg.b"}  # the TYPE_CHECKING import is no edge
    assert edges["pkg.b"] == {"pkg.a"}
    assert edges["pkg.c"] == {"pkg.sub.leaf"}  # from a package, a module
    assert edges["pkg.sub.leaf"] == {"pkg.c"}  # relative, two levels
    assert cycles(edges) == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.sub.leaf"]]
    inner = {found.line: found.lazy for found in every if found.in_function}
    assert inner == {5: False, 4: True}  # a.py's dodge, b.py's reasoned lazy import


# What each folder of the server may not import: models are the bottom layer, services
# use models, routes use both, and only the app factory assembles the routes.
SERVER = "stateloop.server"
FORBIDDEN = {
    f"{SERVER}.models": (f"{SERVER}.services", f"{SERVER}.routes", f"{SERVER}.app",
                         f"{SERVER}.deps", "stateloop.cli"),
    f"{SERVER}.services": (f"{SERVER}.routes", f"{SERVER}.app", f"{SERVER}.deps",
                           "stateloop.cli"),
    f"{SERVER}.routes": (f"{SERVER}.app", "stateloop.cli"),
}


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(f"{prefix}.")


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_server_folders_import_only_downwards(layer: str) -> None:
    edges, _ = import_graph()
    modules = [module for module in edges if _within(module, layer)]
    assert modules, layer
    upward = [(module, target) for module in modules for target in sorted(edges[module])
              if any(_within(target, forbidden) for forbidden in FORBIDDEN[layer])]
    assert upward == []


def test_every_module_names_its_job() -> None:
    missing = [name for name, (path, _) in module_names(PACKAGE).items()
               if not ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))]
    assert missing == []

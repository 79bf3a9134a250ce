"""The server's and the CLI's imports, read from the source: no import cycle through either
(imports inside functions count; ``TYPE_CHECKING`` ones do not), the server's folders layered
(models under services under routes), and an import inside a function only with the reason
it is deferred (``# lazy: ...`` on its line)."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "stateloop"


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the stateloop module imported (a package, when a name is not a module)
    line: int
    in_function: bool


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def resolve(name: str) -> str | None:
    """The module ``name`` is, or lies in (``stateloop.store.Page`` is ``stateloop.store``)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str) -> list[Import]:
    path = MODULES[module]
    base = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[Import] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for other in child.orelse:
                    visit(other, in_function)
                continue
            if isinstance(child, ast.Import):
                names = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom):
                source = child.module or ""
                if child.level:
                    package = base
                    for _ in range(child.level - 1):
                        package = package.rpartition(".")[0]
                    source = f"{package}.{source}" if source else package
                names = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in MODULES
                         else source for alias in child.names]
            else:
                visit(child, in_function or isinstance(
                    child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda))
                continue
            for name in names:
                target = resolve(name) if name.startswith("stateloop") else None
                found.append(Import(module, target or name, child.lineno, in_function))

    visit(ast.parse(path.read_text()), False)
    return found


IMPORTS = {module: imports_of(module) for module in MODULES}


def ours(module: str) -> bool:
    return module.startswith(("stateloop.server", "stateloop.cli"))


def cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    edges = {module: {i.target for i in found if i.target in MODULES and i.target != module}
             for module, found in IMPORTS.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in edges[module]:
            if target not in index:
                connect(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for module in edges:
        if module not in index:
            connect(module)
    return components


def test_no_import_cycle_goes_through_the_server_or_the_cli() -> None:
    through = [component for component in cycles() if any(map(ours, component))]
    assert through == []


def test_a_cycle_is_found_when_there_is_one() -> None:
    """The check above can fail: two server modules importing each other make a cycle."""
    a, b = "stateloop.server.models.requests", "stateloop.server.models.responses"
    saved = IMPORTS[a], IMPORTS[b]
    IMPORTS[a] = [*saved[0], Import(a, b, 1, True)]
    IMPORTS[b] = [*saved[1], Import(b, a, 1, False)]
    try:
        assert [a, b] in cycles()
    finally:
        IMPORTS[a], IMPORTS[b] = saved


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


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_server_folders_import_only_downwards(layer: str) -> None:
    modules = [m for m in MODULES if m == layer or m.startswith(f"{layer}.")]
    assert modules, layer
    upward = [(i.module, i.target) for m in modules for i in IMPORTS[m]
              if any(i.target == f or i.target.startswith(f"{f}.") for f in FORBIDDEN[layer])]
    assert upward == []


def test_an_import_in_a_function_says_why_it_is_deferred() -> None:
    """Only a slow or optional dependency is imported inside a function in the server and
    the CLI, with ``# lazy: <why>`` on the import's (first) line."""
    unexplained = []
    for module, found in IMPORTS.items():
        if not ours(module):
            continue
        lines = MODULES[module].read_text().splitlines()
        unexplained += [f"{module}:{i.line}: {lines[i.line - 1].strip()}" for i in found
                        if i.in_function and "# lazy: " not in lines[i.line - 1]]
    assert unexplained == []


def test_every_server_and_cli_module_names_its_job() -> None:
    missing = [module for module, path in MODULES.items()
               if ours(module) and not ast.get_docstring(ast.parse(path.read_text()))]
    assert missing == []

"""The dependency rule (README, "Development"): the core never imports textual or rich;
the TUI never imports mlx, neither itself nor through a module it imports. Checked on the
source, so an import inside a function counts too, and once more by importing the app in
a fresh interpreter."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Front ends may print with rich: the command line and its subcommands, and the app
#: (``literal.py``: strings from data as rich Text, for both).
FRONT_ENDS = {"cli.py", "__main__.py", "literal.py"}

#: The core: decoding, sessions, statistics.
CORE = sorted(ROOT.glob("engines/*.py")) + sorted(
    p for p in ROOT.glob("specdeck/*.py")
    if p.name not in FRONT_ENDS and not p.stem.endswith(("_command", "_commands"))
)
TUI = sorted(ROOT.glob("tui/**/*.py"))

MLX = {"mlx", "mlx_lm", "optiq"}

#: Where each package's source lives (pyproject's package-dir).
PACKAGES = {"specdeck": ROOT / "specdeck", "specdeck.engines": ROOT / "engines",
            "specdeck.tui": ROOT / "tui", "specdeck.prompts": ROOT / "prompts"}


def _modules() -> dict[str, Path]:
    """Every module of the project by its import name."""
    modules = {}
    for package, folder in PACKAGES.items():
        for path in folder.glob("*.py"):
            modules[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return modules


MODULES = _modules()


def _type_checking_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _import_nodes(tree: ast.AST, module_level: bool):
    """Import statements that run: all of them, or only those that run on import (not
    inside a function); ``if TYPE_CHECKING:`` blocks never run."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        for child in ast.iter_child_nodes(node):
            if _type_checking_only(child):
                continue
            if module_level and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                   ast.Lambda)):
                continue
            stack.append(child)


def imported_names(path: Path, module_level: bool = False) -> set[str]:
    """Full names of the modules ``path`` imports (``from a import b`` gives ``a.b`` when
    that is a module of the project, else ``a``)."""
    names = set()
    for node in _import_nodes(ast.parse(path.read_text(encoding="utf-8")), module_level):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                names.add(full if full in MODULES else node.module)
    return names


def imported_roots(path: Path) -> set[str]:
    return {name.split(".")[0] for name in imported_names(path)}


def _with_parents(name: str) -> set[str]:
    """Importing ``a.b.c`` runs ``a`` and ``a.b`` first."""
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts) + 1)}


def project_graph(module_level: bool) -> dict[str, set[str]]:
    """Module -> the project modules it imports (with their packages)."""
    graph = {}
    for name, path in MODULES.items():
        targets = set()
        for imported in imported_names(path, module_level):
            targets |= {m for m in _with_parents(imported) if m in MODULES}
        graph[name] = targets - {name}
    return graph


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, stack = set(), [start]
    while stack:
        for nxt in graph[stack.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def _is_tui(name: str) -> bool:
    return name == "specdeck.tui" or name.startswith("specdeck.tui.")


TUI_MODULES = sorted(name for name in MODULES if _is_tui(name))


def test_core_exists() -> None:
    assert len(CORE) >= 10
    assert len(TUI_MODULES) >= 10


@pytest.mark.parametrize("path", CORE, ids=lambda p: str(p.relative_to(ROOT)))
def test_core_never_imports_ui_libraries(path: Path) -> None:
    assert not imported_roots(path) & {"textual", "rich"}


@pytest.mark.parametrize("path", TUI, ids=lambda p: str(p.relative_to(ROOT)))
def test_tui_never_imports_mlx(path: Path) -> None:
    assert not imported_roots(path) & MLX


@pytest.mark.parametrize("module", TUI_MODULES)
def test_tui_imports_no_module_that_imports_mlx(module: str) -> None:
    """Every project module a TUI module imports (in a function too), and every module
    those load in turn, imports no mlx on import (a function of theirs may: the engine
    host's run in the engine process)."""
    graph = project_graph(module_level=True)
    loaded = {module}
    for name in project_graph(module_level=False)[module]:
        loaded |= {name} | reachable(graph, name)
    offenders = {
        name: sorted({n.split(".")[0] for n in imported_names(MODULES[name], True)} & MLX)
        for name in loaded
    }
    assert {name: roots for name, roots in offenders.items() if roots} == {}


def test_the_graph_sees_imports_the_tui_makes() -> None:
    """The checks above are only as good as the graph: it must hold real edges."""
    graph = project_graph(module_level=True)
    assert "specdeck.engine_host" in graph["specdeck.tui.app"]
    assert "specdeck.engines.requests" in graph["specdeck.tui.settings_screen"]
    assert {"specdeck.engines.events", "specdeck"} <= reachable(graph, "specdeck.tui.app")
    # mlx is found where it is imported on import
    assert "mlx" in {n.split(".")[0] for n in imported_names(MODULES["specdeck.engines.loading"], True)}


def test_importing_every_tui_module_loads_no_mlx() -> None:
    """The same rule, observed: a fresh interpreter imports the whole app and has no mlx
    module loaded afterwards."""
    code = (
        "import importlib, sys\n"
        f"for name in {TUI_MODULES!r}: importlib.import_module(name)\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {sorted(MLX)!r}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=ROOT / "tests")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_no_import_cycle_between_the_tui_and_the_rest() -> None:
    """The front ends open the app (``specdeck.cli`` imports ``specdeck.tui``), so nothing
    the app imports, in a function or not, may import the app back."""
    graph = project_graph(module_level=False)
    assert "specdeck.tui" in reachable(graph, "specdeck.cli")  # the edge the rule is about
    cycles = sorted(
        (tui, other) for tui in TUI_MODULES for other in reachable(graph, tui)
        if not _is_tui(other) and tui in reachable(graph, other)
    )
    assert cycles == []

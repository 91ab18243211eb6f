"""The dependency rules (docs/development.md), checked on the source (an import inside a
function counts too) and once more by importing the app in a fresh interpreter:

- the core never imports textual or rich; the TUI never imports mlx, neither itself nor
  through a module it imports;
- ``engines/core`` is pure data and arithmetic: no mlx, nothing from another engines
  folder; nothing in ``engines`` imports ``specdeck.*`` outside ``specdeck.engines``;
- the commands import the shared options, never ``specdeck.cli`` (no command cycle), and
  no production code asks whether it runs under pytest."""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Front ends may print with rich: the command line, its commands, the app, what exports
#: the app's pictures and casts (and the test support that drives it).
FRONT_END_PACKAGES = ("specdeck.commands", "specdeck.safe_text.rich_text", "specdeck.cli",
                      "specdeck.__main__", "specdeck.export", "specdeck.testing")

MLX = {"mlx", "mlx_lm", "optiq"}

#: Where each package's source lives (pyproject's package-dir).
PACKAGES = {"specdeck": ROOT / "specdeck", "specdeck.engines": ROOT / "engines",
            "specdeck.tui": ROOT / "tui", "specdeck.prompts": ROOT / "prompts"}


def _modules() -> dict[str, Path]:
    """Every module of the project by its import name."""
    modules = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((package, *parts))] = path
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


@functools.cache
def project_graph(module_level: bool) -> dict[str, set[str]]:
    """Module -> the project modules it imports (with their packages); read once."""
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


def _in(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _is_tui(name: str) -> bool:
    return _in(name, "specdeck.tui") or _in(name, "specdeck.safe_text.tui")


TUI_MODULES = sorted(name for name in MODULES if _is_tui(name))
#: The core: decoding, sessions, statistics, hosts (everything but the front ends).
CORE = sorted(name for name in MODULES if not _is_tui(name)
              and not any(_in(name, front) for front in FRONT_END_PACKAGES))


def offenders(modules: list[str], forbidden) -> dict[str, list[str]]:
    """Each module with the names it imports that ``forbidden(name)`` rejects."""
    found = {name: sorted(n for n in imported_names(MODULES[name]) if forbidden(n))
             for name in modules}
    return {name: names for name, names in found.items() if names}


def test_the_rules_see_every_folder() -> None:
    assert len(CORE) >= 60 and len(TUI_MODULES) >= 20
    for folder in ("core", "decode", "proposers", "auto", "measure", "models", "runs",
                   "distributed"):
        assert f"specdeck.engines.{folder}" in MODULES
        assert any(_in(name, f"specdeck.engines.{folder}") for name in CORE), folder


def test_core_never_imports_ui_libraries() -> None:
    assert offenders(CORE, lambda n: n.split(".")[0] in ("textual", "rich")) == {}


def test_tui_never_imports_mlx() -> None:
    assert offenders(TUI_MODULES, lambda n: n.split(".")[0] in MLX) == {}


def test_engines_core_is_pure_and_imports_only_itself() -> None:
    core = [name for name in MODULES if _in(name, "specdeck.engines.core")]
    assert offenders(core, lambda n: n.split(".")[0] in MLX
                     or (_in(n, "specdeck") and not _in(n, "specdeck.engines.core"))) == {}


def test_engines_import_nothing_of_specdeck_outside_engines() -> None:
    engines = [name for name in MODULES if _in(name, "specdeck.engines")]
    assert offenders(engines, lambda n: _in(n, "specdeck") and n != "specdeck"
                     and not _in(n, "specdeck.engines")) == {}


def test_commands_never_import_the_command_line() -> None:
    commands = [name for name in MODULES if _in(name, "specdeck.commands")]
    assert len(commands) >= 8
    assert offenders(commands, lambda n: _in(n, "specdeck.cli")) == {}


def test_no_production_code_asks_whether_it_runs_under_pytest() -> None:
    assert [name for name, path in MODULES.items()
            if "PYTEST_CURRENT_TEST" in path.read_text(encoding="utf-8")] == []


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
    assert "specdeck.hosts.engine" in graph["specdeck.tui.app"]
    assert "specdeck.engines.core.requests" in graph["specdeck.tui.settings_screen"]
    assert {"specdeck.engines.core.events", "specdeck"} <= reachable(graph, "specdeck.tui.app")
    # mlx is found where it is imported on import
    assert "mlx" in {n.split(".")[0] for n in imported_names(MODULES["specdeck.engines.models.loading"], True)}


def test_importing_every_tui_module_loads_no_mlx() -> None:
    """The same rule, observed: a fresh interpreter imports the whole app, the command
    that opens it checks the models it names, the one that starts a group checks that
    they split, and no mlx module is loaded afterwards (the engine's process and the
    ranks load them; mlx-lm alone takes ~1 s to import)."""
    code = (
        "import importlib, sys\n"
        f"for name in {TUI_MODULES!r}: importlib.import_module(name)\n"
        "import specdeck.commands.playground\n"
        "from specdeck.engines.models.catalog import resolve\n"
        "from specdeck.engines.models.demo import demo_models\n"
        "resolve(str(demo_models().target))\n"
        "from specdeck.engines.distributed.splittable import refuse_unsplittable\n"
        "refuse_unsplittable(str(demo_models().target), 'tensor')\n"
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

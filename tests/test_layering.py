"""The dependency rule (README, "Development"): the core never imports textual or rich;
the TUI never imports mlx itself. Checked on the source, so an import inside a function counts too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Front ends may print with rich: the command line and its subcommands, and the app.
FRONT_ENDS = {"cli.py", "__main__.py"}

#: The core: decoding, sessions, statistics.
CORE = sorted(ROOT.glob("engines/*.py")) + sorted(
    p for p in ROOT.glob("specdeck/*.py")
    if p.name not in FRONT_ENDS and not p.stem.endswith(("_command", "_commands"))
)
TUI = sorted(ROOT.glob("tui/**/*.py"))


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            roots.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_core_exists() -> None:
    assert len(CORE) >= 10


@pytest.mark.parametrize("path", CORE, ids=lambda p: str(p.relative_to(ROOT)))
def test_core_never_imports_ui_libraries(path: Path) -> None:
    assert not imported_roots(path) & {"textual", "rich"}


@pytest.mark.parametrize("path", TUI, ids=lambda p: str(p.relative_to(ROOT)))
def test_tui_never_imports_mlx(path: Path) -> None:
    assert not imported_roots(path) & {"mlx", "mlx_lm", "optiq"}

"""A wheel install: everything under the ``specdeck`` namespace, the demo family carried,
and the command working from any directory.

PyPI already has packages named ``engines``, ``tui`` and ``prompts``; the folders keep
their place in the repository but install as ``specdeck.engines`` and so on.
"""

from __future__ import annotations

import fcntl
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Building the wheel takes a while; one worker builds it (pip builds in the source tree).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("wheel")]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory, worker_id: str) -> Path:
    """The wheel, built once a session. pip builds in the source tree (``build/``), and
    two builds at once collide ("File exists: build/bdist..."), and the xdist group that
    keeps both tests on one worker is ignored by pytest 9.2 (pytest-xdist#1386), so the
    workers take turns under a lock in the session's folder, and the first one's wheel
    serves the rest."""
    session = tmp_path_factory.getbasetemp()
    if worker_id != "master":  # each worker's folder sits in the session's
        session = session.parent
    out = session / "wheel"
    with open(session / "wheel.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not any(out.glob("specdeck-*.whl")):
            out.mkdir(exist_ok=True)
            subprocess.run(
                [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out),
                 str(ROOT)],
                check=True, capture_output=True, timeout=600,
            )
    (path,) = out.glob("specdeck-*.whl")
    return path


def test_the_wheel_installs_no_generic_top_level_package(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/", 1)[0] for n in names if "/" in n and ".dist-info" not in n
           and ".data" not in n}
    assert top == {"specdeck"}
    for module in ("specdeck/engines/runs/compare.py", "specdeck/tui/app.py",
                   "specdeck/tui/app.tcss", "specdeck/prompts/code.txt"):
        assert module in names
    # The smollm2 draft's own layers travel too (the fetch assembles the rest).
    for shipped in ("draft.safetensors", "config.json"):
        assert any(n.endswith(f"share/specdeck/models/smollm2-draft/{shipped}") for n in names)


def test_an_installed_wheel_runs_from_any_directory(wheel, tmp_path):
    """Installed into a fresh environment that borrows this one's dependencies (never
    its editable specdeck), ``specdeck compare --headless`` runs the demo family."""
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    # Plain path lines: the borrowed site-packages' own .pth files (the editable
    # install's finder among them) are not run, so every site-packages folder this
    # interpreter sees is named (a virtual environment may borrow another's).
    borrowed = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    Path(site, "borrowed.pth").write_text("\n".join(borrowed) + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
         "-q", str(wheel)],
        check=True, capture_output=True, timeout=300,
    )
    probe = subprocess.run(
        [str(python), "-c",
         "import importlib.util as u, specdeck.engines as e;"
         "print([n for n in ('engines', 'tui', 'prompts') if u.find_spec(n)]); print(e.__file__)"],
        cwd=tmp_path, check=True, capture_output=True, text=True,
    ).stdout.splitlines()
    assert probe[0] == "[]"
    assert probe[1].startswith(site)
    run = subprocess.run(
        [str(env_dir / "bin" / "specdeck"), "compare", "--headless", "--no-save",
         "--strategies", "plain,draft", "--max-tokens", "8", "--prompt", "def add(a, b):"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert "draft" in run.stdout

"""The layers hold (import-linter's contracts in pyproject.toml), and the check has teeth: a copy of the
package with one upward import, or one circle between siblings, breaks it."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT = Path(sys.executable).with_name("lint-imports")


def _lint(where: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(where)}  # the copy, not the installed checkout
    return subprocess.run([str(LINT), "--config", str(where / "pyproject.toml"), "--no-cache"], cwd=where, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "orchestrator", tmp_path / "orchestrator",
                    ignore=shutil.ignore_patterns("__pycache__", "_data"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _add_import(module: Path, line: str) -> None:
    text = module.read_text()
    head, sep, rest = text.partition("from __future__ import annotations\n")
    module.write_text(head + sep + line + "\n" + rest)


def test_the_contracts_hold():
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_an_upward_import_breaks_the_layers(copy: Path):
    assert _lint(copy).returncode == 0  # the untouched copy passes: the failure below is the import's
    _add_import(copy / "orchestrator" / "engine" / "partition.py", "import orchestrator.room.ledger  # upward")
    result = _lint(copy)
    assert result.returncode != 0
    assert "Layers: each imports only the layers below it BROKEN" in result.stdout
    assert "orchestrator.engine.partition -> orchestrator.room.ledger" in result.stdout


def test_a_circle_between_siblings_breaks_the_contract(copy: Path):
    _add_import(copy / "orchestrator" / "room" / "bus.py", "import orchestrator.room.room  # circle")
    result = _lint(copy)
    assert result.returncode != 0
    assert "No circles between sibling modules BROKEN" in result.stdout

"""The package as a user gets it: the wheel built from this tree, installed into a fresh venv, used from
another folder. Its dependencies come from the test environment (no network): only the wheel is installed.
"""
from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    pytest.importorskip("hatchling", reason="building the wheel offline needs hatchling (the dev extra)")
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--no-index", "-w", str(out), str(ROOT)], check=True, capture_output=True, timeout=300)
    return next(out.glob("*.whl"))


@pytest.fixture(scope="session")
def installed(wheel, tmp_path_factory) -> Path:
    """A fresh venv holding the wheel; the dependencies are borrowed from this interpreter's site-packages."""
    env_dir = tmp_path_factory.mktemp("venv")
    venv.create(env_dir, with_pip=False)
    py = env_dir / "bin" / "python"
    site = Path(subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "borrowed-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--quiet", "--no-deps",
                    "--no-index", str(wheel)], check=True, capture_output=True, timeout=300)
    return env_dir / "bin"


def _orchestrator(bin_dir: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORCHESTRATOR_", "PYTHON"))}
    env.update(HOME=str(cwd), XDG_DATA_HOME=str(cwd / "data"), XDG_CONFIG_HOME=str(cwd / "config"))
    return subprocess.run([bin_dir / "orchestrator", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=env)


def test_the_wheel_holds_the_license_the_data_and_the_format(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "orchestrator/_data/docs/scenario-format.md" in names
    assert "orchestrator/_data/scenarios/flagship.yaml" in names and "orchestrator/_data/agents/tutor.md" in names
    assert "orchestrator/py.typed" in names  # the public API's types reach type checkers


def test_the_installed_wheel_runs_the_readme_first_program(installed, tmp_path):
    """The README's first Python block, run by the wheel's interpreter from another folder."""
    import re

    code = re.search(r"^```python\n(.*?)^```", (ROOT / "README.md").read_text(), re.S | re.M).group(1)
    run = subprocess.run([installed / "python", "-c", code], capture_output=True, text=True, cwd=tmp_path,
                         timeout=120, env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr[-3000:]
    assert "commander: The researcher says" in run.stdout


def test_installed_wheel_lists_runs_and_checks_every_shipped_scenario_by_name(installed, tmp_path):
    where = _orchestrator(installed, tmp_path, "--version")
    assert where.returncode == 0 and where.stdout.startswith("orchestrator ")
    module = subprocess.run([installed / "python", "-c", "import orchestrator; print(orchestrator.__file__)"],
                            capture_output=True, text=True, cwd=tmp_path).stdout
    assert str(installed.parent) in module  # the wheel's copy, not this checkout

    listed = _orchestrator(installed, tmp_path, "scenarios")
    assert listed.returncode == 0, listed.stderr
    names = sorted(p.stem for p in (ROOT / "scenarios").glob("*.yaml"))
    assert [ln.split()[0] for ln in listed.stdout.splitlines() if ln and not ln.startswith(" ")][:len(names)] == names
    assert "commander reads the user's repository" in " ".join(listed.stdout.split())  # flagship's description

    run = _orchestrator(installed, tmp_path, "run", "flagship")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "every expectation held" in run.stdout
    rooms = _orchestrator(installed, tmp_path, "rooms")
    assert "flagship" in rooms.stdout  # the run is found again with no flags
    assert _orchestrator(installed, tmp_path, "show", "flagship").returncode == 0

    check = _orchestrator(installed, tmp_path, "check", *names)
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.strip().endswith(f"{len(names)} passed, 0 failed")
    assert not check.stderr

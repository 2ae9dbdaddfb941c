"""The documentation site builds with `mkdocs build --strict` (no broken link, no reference that resolves to
nothing), its command-line page says exactly what each command's `--help` says, and the README's links resolve."""
from __future__ import annotations

import html
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mkdocs", reason="the site extra is not installed: pip install -e '.[site]'")

ROOT = Path(__file__).resolve().parent.parent


def hook():  # noqa: ANN201 (the module docs/hooks/cli_reference.py)
    spec = importlib.util.spec_from_file_location("cli_reference", ROOT / "docs" / "hooks" / "cli_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)], cwd=ROOT,
                           capture_output=True, text=True, timeout=300, env=os.environ | {"NO_MKDOCS_2_WARNING": "1"})
    assert build.returncode == 0, build.stderr[-4000:]
    return out


def test_the_site_builds_strict_with_every_page(site):
    for page in ("index.html", "quickstart/index.html", "concepts/index.html", "scenario-format/index.html",
                 "reference/cli/index.html", "reference/api/index.html", "changelog/index.html"):
        assert (site / page).is_file(), page
    assert (site / "images" / "room.png").is_file() and (site / "images" / "concepts.svg").is_file()
    api = (site / "reference" / "api" / "index.html").read_text()
    import orchestrator

    for name in orchestrator.__all__:  # every public name has its entry, generated where it is defined
        target = f"{orchestrator._WHERE[name]}.{orchestrator._ALIASES.get(name, name)}"
        assert f'id="{target}"' in api, name
    assert "Runtime.open" in api


def test_the_cli_page_is_each_commands_help(site):
    helps = hook().helps()
    assert len(helps) > 15 and helps[0][0] == ()
    page = html.unescape(re.sub(r"<[^>]+>", "", (site / "reference" / "cli" / "index.html").read_text()))
    env = os.environ | {"COLUMNS": hook().WIDTH, "ORCHESTRATOR_MODEL": ""}
    for words, text in helps:
        said = subprocess.run([sys.executable, "-m", "orchestrator", *words, "--help"], capture_output=True,
                              text=True, cwd=ROOT, env=env, timeout=60)
        assert said.returncode == 0, (words, said.stderr)
        assert said.stdout.rstrip() == text.rstrip(), f"`orchestrator {' '.join(words)} --help` differs"
        assert text.rstrip() in page, f"the page lacks `orchestrator {' '.join(words)} --help`"


def test_the_readmes_links_resolve():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 200
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [link.split("#")[0] for link in links if not re.match(r"[a-z]+:", link)]
    assert len(local) >= 5, links
    for target in local:
        assert (ROOT / target).exists(), f"README.md links to {target}, which does not exist"

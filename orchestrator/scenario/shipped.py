"""The scenarios that ship with the package, found by name from any folder (`orchestrator run flagship`),
and the one rule that turns a command-line argument into a scenario file."""
from __future__ import annotations

import difflib
from pathlib import Path

from orchestrator.core.errors import InputError
from orchestrator.core.resources import data_dir


def shipped() -> dict[str, Path]:
    """Shipped scenario names (file stems) to their files, sorted by name."""
    folder = data_dir("scenarios")
    return {p.stem: p for p in sorted(folder.glob("*.yaml"), key=lambda p: p.stem)} if folder.is_dir() else {}


def describe(path: Path) -> str:
    """A scenario's `description`, on one line ("" when it has none or cannot be read)."""
    import yaml  # for `orchestrator scenarios` only, not every start-up

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return ""
    text = data.get("description", "") if isinstance(data, dict) else ""
    return " ".join(str(text or "").split())


def find_scenario(arg: str | Path, *, folder_hint: str = "") -> Path:
    """A file or folder the user named, else a shipped scenario of that name. A folder is bad input
    for a command that plays one scenario: `folder_hint` says which command takes folders."""
    path = Path(arg)
    if path.is_dir():
        if folder_hint:
            raise InputError(f"{path} is a folder: {folder_hint}")
        return path
    if path.exists():
        return path
    by_name = shipped()
    stem = path.name.removesuffix(".yaml").removesuffix(".yml")
    if path.parent == Path(".") or path.parent.name == "scenarios":
        if stem in by_name:  # `scenarios/flagship.yaml` as the README writes it also finds the shipped one
            return by_name[stem]
    close = difflib.get_close_matches(stem, by_name, n=1)
    maybe = f"did you mean {close[0]}? " if close else ""
    raise InputError(f"{arg}: no such file, and no shipped scenario of that name ({maybe}"
                     "`orchestrator scenarios` lists them)")

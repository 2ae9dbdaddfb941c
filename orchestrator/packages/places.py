"""Where external packages live: the enabled and disabled package folders, their shims, the staging
folder a clone is checked in, and the registry beside them (never inside a package folder).

Everything sits under the packages folder the sandbox knows (tools/jail.py's package_commands): a
disabled package is moved out of `enabled/`, so no sandbox sees it and no skill root lists it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from orchestrator.tools.jail import package_commands


@dataclass(frozen=True)
class Places:
    root: Path
    shims: Path  # bin/: one shim per command of the enabled packages, on the sandbox's PATH
    enabled: Path  # enabled/NAME: the package as cloned (its .venv and node_modules too)
    disabled: Path  # disabled/NAME: kept, but seen by nothing
    staging: Path  # staging/: a clone waits here until its tree passed the checks
    registry: Path  # registry.json: source, commit, kind, commands, dependency answers

    def folder(self, name: str, enabled: bool) -> Path:
        return (self.enabled if enabled else self.disabled) / name

    def made(self) -> Places:
        """These folders, made owner-only where missing (the packages folder itself too)."""
        if not self.root.is_dir():
            self.root.mkdir(parents=True)
            self.root.chmod(0o700)
        for folder in (self.enabled, self.disabled, self.staging):
            folder.mkdir(exist_ok=True, mode=0o700)
        return self


def places(env: Mapping[str, str] | None = None) -> Places:
    shims, enabled = package_commands(env)
    root = enabled.parent
    return Places(root, shims, enabled, root / "disabled", root / "staging", root / "registry.json")


def skill_roots(env: Mapping[str, str] | None = None) -> list[Path]:
    """The skill folders of the enabled packages, in name order: each a folder of skill folders (a
    package that is itself one skill lists the enabled folder, whose other children hold no SKILL.md)."""
    from orchestrator.packages.registry import load

    where = places(env)
    try:
        registry = load(where.registry)
    except (OSError, ValueError):
        return []  # a missing or unreadable registry gives no skills; `packages list` says why
    out: list[Path] = []
    for pkg in sorted(registry.packages.values(), key=lambda p: p.name):
        if not pkg.enabled:
            continue
        for rel in pkg.skill_roots:
            path = where.enabled if rel == "" else where.enabled / pkg.name / rel
            if path not in out and os.path.isdir(path):
                out.append(path)
    return out

"""The shims folder: one small script per command of the enabled packages, which the sandbox puts first
on PATH (read-only), so a model calls a package's CLI by its name.

Rebuilt whole from the registry after every change, so a disabled or removed package leaves nothing.
"""
from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

from orchestrator.packages.places import Places
from orchestrator.packages.registry import Command, Package, Registry


def shim(target: Path, command: Command) -> str:
    run = f"node {shlex.quote(str(target))}" if command.via == "node" else shlex.quote(str(target))
    return f"#!/bin/sh\n# made by `orchestrator packages`; rebuilt on every change\nexec {run} \"$@\"\n"


def runnable(where: Places, pkg: Package) -> dict[str, Path]:
    """The commands of `pkg` that have something to run: a console script only once its venv made it."""
    folder = where.folder(pkg.name, pkg.enabled)
    out = {}
    for name, command in pkg.commands.items():
        target = folder / command.target
        if command.needs_deps and pkg.deps.installed != pkg.commit:
            continue
        if target.is_file():
            out[name] = target
    return out


def owners(where: Places, registry: Registry) -> dict[str, str]:
    """Each shimmed command name and the package it runs (the first enabled package by name, on a clash)."""
    out: dict[str, str] = {}
    for pkg in sorted(registry.packages.values(), key=lambda p: p.name):
        if pkg.enabled:
            for name in runnable(where, pkg):
                out.setdefault(name, pkg.name)
    return out


def rebuild(where: Places, registry: Registry) -> None:
    """Write the shims of every enabled package into a fresh folder and put it in place of the old."""
    where.made()
    fresh = where.root / f".bin-{os.getpid()}"
    shutil.rmtree(fresh, ignore_errors=True)
    fresh.mkdir(mode=0o755)
    taken = owners(where, registry)
    for name, owner in taken.items():
        pkg = registry.packages[owner]
        path = fresh / name
        path.write_text(shim(runnable(where, pkg)[name], pkg.commands[name]))
        path.chmod(0o755)
    old = where.root / f".bin-old-{os.getpid()}"
    if where.shims.exists():
        os.replace(where.shims, old)
    os.replace(fresh, where.shims)
    shutil.rmtree(old, ignore_errors=True)

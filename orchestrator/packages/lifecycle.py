"""What `orchestrator packages` does to a package: add (fetch into staging, check, move into place),
update (fast-forward, checked the same way), the dependency step behind the user's answer, enable,
disable and remove; the registry and the shims follow every change.
"""
from __future__ import annotations

import secrets
import shutil
import time
from pathlib import Path
from typing import Awaitable, Callable

import trio

from orchestrator.core.errors import InputError
from orchestrator.packages import deps, git, shims, tree
from orchestrator.packages.places import Places, places
from orchestrator.packages.registry import Answer, Package, Registry, load, locked, save
from orchestrator.packages.source import Source, check_name, default_name, parse
from orchestrator.packages.tree import Found, PackageRefused, check, detect

# Asked when a package's dependency step needs the user's yes: "yes", "no", or "" when nobody could be asked.
Asker = Callable[[Package], Awaitable[Answer]]
_GIT = trio.CapacityLimiter(2)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _load(where: Places) -> Registry:
    try:
        return load(where.registry)
    except ValueError as exc:
        raise InputError(str(exc)) from None


def registry() -> Registry:
    return _load(places())


def get(name: str, where: Places | None = None) -> Package:
    where = where or places()
    pkg = _load(where).packages.get(name)
    if pkg is None:
        raise InputError(f"no package named {name!r}; `orchestrator packages list` shows them")
    return pkg


def _judge(folder: Path, commit: str) -> Found:
    """Check the commit's tree from git's objects and say what it is; PackageRefused when it is unsafe."""
    entries = git.tree(folder, commit)
    check(entries, lambda obj: git.submodule_urls(folder, obj))
    return detect(entries, lambda e: git.blob(folder, e.object))


def _fetch(folder: Path, source: Source, ref: str) -> str:
    """The commit `ref` names at the source, fetched under the history cap; a source over it is refused like
    an unsafe tree, with nothing of what it sent left in `folder`."""
    try:
        return git.fetch(folder, source.url, ref, source.protocol, most=tree.MAX_HISTORY)
    except git.OverCap as exc:
        raise tree.history_refused(exc.most) from None


def _fill(pkg: Package, commit: str, found: Found) -> None:
    pkg.commit, pkg.kinds, pkg.skill_roots, pkg.skills = commit, found.kinds, found.skill_roots, found.skills
    pkg.commands, pkg.notes = found.commands, found.notes
    pkg.deps.command, pkg.deps.files = found.deps_command, found.deps_files


def _stage(where: Places, source: Source, name: str, ref: str) -> tuple[Path, str, Found]:
    staging = where.made().staging / f"{name}-{secrets.token_hex(4)}"
    try:
        git.init(staging)
        try:
            commit = _fetch(staging, source, ref)
            found = _judge(staging, commit)
        except PackageRefused as exc:
            raise PackageRefused(f"{name}: refused: {exc}; nothing of it was kept") from None
        git.checkout(staging, commit)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return staging, commit, found


def _place(where: Places, staging: Path, pkg: Package) -> None:
    with locked(where.registry):
        reg = _load(where)
        if pkg.name in reg.packages:
            shutil.rmtree(staging, ignore_errors=True)
            raise InputError(f"a package named {pkg.name!r} is already installed; `orchestrator packages "
                             f"update {pkg.name}` updates it, or pass --name")
        staging.rename(where.enabled / pkg.name)
        reg.packages[pkg.name] = pkg
        save(where.registry, reg)
        shims.rebuild(where, reg)


async def add(text: str, name: str | None, ref: str) -> Package:
    """Fetch the package into staging, check its tree before writing a file, then move it into place."""
    source = parse(text)
    name = check_name(name) if name else default_name(source)
    where = places()
    if name in (await trio.to_thread.run_sync(_load, where)).packages:
        raise InputError(f"a package named {name!r} is already installed; `orchestrator packages update "
                         f"{name}` updates it, or pass --name")
    staging, commit, found = await trio.to_thread.run_sync(_stage, where, source, name, ref, limiter=_GIT)
    pkg = Package(name=name, source=text, ref=ref, commit=commit, added=_now(), updated=_now())
    _fill(pkg, commit, found)
    await trio.to_thread.run_sync(_place, where, staging, pkg)
    return pkg


def _fast_forward(where: Places, name: str) -> tuple[Package, str]:
    with locked(where.registry):
        reg = _load(where)
        pkg = reg.packages[name]
        folder = where.folder(name, pkg.enabled)
        source = parse(pkg.source)
        try:  # refused while fetching or after: the folder, its files and the registry stay as they were
            new = _fetch(folder, source, pkg.ref)
            if new == pkg.commit:
                return pkg, "up to date"
            if not git.is_ancestor(folder, pkg.commit, new):
                raise InputError(f"{name}: the source's {pkg.ref or 'default branch'} no longer continues from "
                                 f"{pkg.commit[:12]} (history was rewritten); `orchestrator packages remove "
                                 f"{name}` and add it again to take it as it is now")
            found = _judge(folder, new)
        except PackageRefused as exc:
            raise PackageRefused(f"{name}: update refused: {exc}; nothing of it was written, {name} stays at "
                                 f"{pkg.commit[:12]}") from None
        git.checkout(folder, new)
        old = pkg.commit
        _fill(pkg, new, found)
        pkg.updated = _now()
        save(where.registry, reg)
        shims.rebuild(where, reg)
        return pkg, f"{old[:12]} -> {new[:12]}"


async def update(name: str) -> tuple[Package, str]:
    """Fast-forward the package to its source's newest commit, checked as at install; what changed."""
    where = places()
    get(name, where)
    return await trio.to_thread.run_sync(_fast_forward, where, name, limiter=_GIT)


def _record(where: Places, name: str, change: Callable[[Package], None]) -> Package:
    with locked(where.registry):
        reg = _load(where)
        pkg = reg.packages[name]
        change(pkg)
        save(where.registry, reg)
        shims.rebuild(where, reg)
        return pkg


async def dependencies(name: str, ask: Asker, *, again: bool = False) -> str:
    """The dependency step of the package at its commit: asked once for these dependency files and the
    answer kept (`again`: asked even after a no), then run confined. One line on what happened."""
    where = places()
    pkg = get(name, where)
    step = pkg.deps
    if not step.command:
        return "no dependencies to install"
    if step.installed == pkg.commit and not step.error:
        return "dependencies installed"
    if pkg.deps_wanted():
        if step.answer == "no" and step.answered == step.files and not again:
            return (f"dependencies not installed: you declined `{step.command}` for these files; "
                    f"`orchestrator packages deps {name}` asks again")
        answer = await ask(pkg)
        if not answer:
            return (f"dependencies not installed: nobody to ask (no terminal); run `orchestrator packages deps "
                    f"{name}` in a terminal, or with --yes to approve `{step.command}`")
        files = step.files

        def answered(p: Package) -> None:
            p.deps.answer, p.deps.answered = answer, files

        pkg = await trio.to_thread.run_sync(_record, where, name, answered)
        if answer != "yes":
            return "dependencies not installed: declined (remembered for these dependency files)"
    if not pkg.enabled:
        return f"dependencies not installed: {name} is disabled"
    commit = pkg.commit
    try:
        await deps.run(where.folder(name, True), pkg.deps.command)
    except deps.StepFailed as exc:
        why = str(exc)

        def failed(p: Package) -> None:
            p.deps.error, p.deps.installed = why.splitlines()[0], ""

        await trio.to_thread.run_sync(_record, where, name, failed)
        raise InputError(f"{name}: the dependency step `{pkg.deps.command}` failed: {why}") from None

    def done(p: Package) -> None:
        p.deps.error, p.deps.installed = "", commit

    await trio.to_thread.run_sync(_record, where, name, done)
    return "dependencies installed"


def _move(where: Places, name: str, enabled: bool) -> Package:
    with locked(where.registry):
        reg = _load(where)
        pkg = reg.packages[name]
        if pkg.enabled != enabled:
            where.made()
            where.folder(name, pkg.enabled).rename(where.folder(name, enabled))
            pkg.enabled = enabled
            save(where.registry, reg)
        shims.rebuild(where, reg)
        return pkg


async def enable(name: str, on: bool) -> Package:
    """Enabled: its skills are listed and its commands shimmed; disabled: kept, but seen by nothing."""
    where = places()
    get(name, where)
    return await trio.to_thread.run_sync(_move, where, name, on)


def _remove(where: Places, name: str) -> None:
    with locked(where.registry):
        reg = _load(where)
        pkg = reg.packages.pop(name)
        save(where.registry, reg)
        shims.rebuild(where, reg)
        shutil.rmtree(where.folder(name, pkg.enabled), ignore_errors=True)


async def remove(name: str) -> None:
    where = places()
    get(name, where)
    await trio.to_thread.run_sync(_remove, where, name)


def status(pkg: Package) -> str:
    """The dependency step in a few words."""
    step = pkg.deps
    if not step.command:
        return "none"
    if step.error:
        return f"failed: {step.error}"
    if step.installed == pkg.commit:
        return "installed"
    if step.answer == "no" and step.answered == step.files:
        return "declined"
    if step.answer == "yes" and step.answered == step.files:
        return "approved, not installed"
    return "not asked" if not step.answer else "asks again (dependency files changed)"

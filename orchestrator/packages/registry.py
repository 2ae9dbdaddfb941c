"""The registry of external packages: for each, where it came from, the commit it stands at, what kind it
is, its commands and its dependency step with the user's answer; one JSON file, replaced atomically.

It is kept outside every package folder, so a later pull never meets it, and written by its owner only.
"""
from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

import msgspec

Via = Literal["exec", "node"]
Answer = Literal["", "yes", "no"]


class Command(msgspec.Struct, kw_only=True):
    """One entry point: the file its shim runs, relative to the package folder."""
    target: str
    via: Via = "exec"  # exec: run the file itself; node: `node FILE` (package.json's bin need not be executable)
    needs_deps: bool = False  # a console script the dependency step makes (.venv/bin/NAME)
    origin: str = ""  # where it was declared: pyproject.toml, package.json or bin/


class Deps(msgspec.Struct, kw_only=True):
    """The dependency step: the exact command, the dependency files it answers to, and what the user said."""
    command: str = ""  # run with bash -c in the package folder; "" when the package declares none
    files: str = ""  # a digest of the dependency files (their paths and blob ids) at the package's commit
    answer: Answer = ""  # the user's answer to `command`, for the files of `answered`
    answered: str = ""
    installed: str = ""  # the commit the step last succeeded at
    error: str = ""  # why the last run failed, in one line


class Package(msgspec.Struct, kw_only=True):
    name: str
    source: str  # as the user gave it
    ref: str = ""  # the branch or tag followed; "" the remote's default branch
    commit: str
    enabled: bool = True
    kinds: list[str] = []  # "skills", "commands"
    skill_roots: list[str] = []  # folders of skill folders, relative to the package; "" the package is one skill
    skills: list[str] = []  # the skill folders found, relative
    commands: dict[str, Command] = {}
    notes: list[str] = []  # what detection left out, and why
    deps: Deps = msgspec.field(default_factory=Deps)
    added: str = ""
    updated: str = ""

    def deps_wanted(self) -> bool:
        """Does the dependency step still need the user's yes for these files?"""
        return bool(self.deps.command) and not (self.deps.answer == "yes" and self.deps.answered == self.deps.files)


class Registry(msgspec.Struct, kw_only=True):
    version: int = 1
    packages: dict[str, Package] = {}


def load(path: Path) -> Registry:
    """The registry at `path`; an empty one when there is none yet (ValueError when it cannot be read)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return Registry()
    try:
        return msgspec.json.decode(raw, type=Registry)
    except msgspec.DecodeError as exc:
        raise ValueError(f"{path}: not a packages registry ({exc}); move it aside to start afresh") from None


def save(path: Path, registry: Registry) -> None:
    """Write the whole registry to a new file and rename it over the old: a reader sees one or the other."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(msgspec.json.format(msgspec.json.encode(registry), indent=2))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """One `orchestrator packages` change at a time: two adds racing would each save what they read."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path.with_name(path.name + ".lock"), os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)

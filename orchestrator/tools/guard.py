"""One tool session's watch over what runs later outside the sandbox (protected.py's names): which entries
are known, the look before each command, and after it what is set aside and which build files changed.

Known entries are those there when the session first looked, those the user's own hand made between commands,
and those a command wrote with the user's yes; anything else of a protected name is renamed beside itself.
"""
from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.tools import protected
from orchestrator.tools.protected import Entry, Scan
from orchestrator.tools.sandbox import homes, walk_to_folder
from orchestrator.tools.session import ToolSession


def of(session: ToolSession) -> Guard:
    """The session's guard, made at its first use."""
    if session.guard is None:
        session.guard = Guard(session.workspace)
    return session.guard


@dataclass
class Outcome:
    """What a command left that the model and the user should hear of."""
    set_aside: list[tuple[Path, Path]] = field(default_factory=list)  # (protected path, its new name)
    builds: list[Path] = field(default_factory=list)  # build files it created or changed

    def note(self, workspace: Path) -> str:
        """The lines appended to the command's result; "" when there is nothing to say."""
        lines = []
        if self.set_aside:
            moved = ", ".join(f"{_rel(workspace, p)} (now {n.name})" for p, n in self.set_aside)
            lines.append(f"[set aside: this command created {moved}; git, an editor or the orchestrator would "
                         f"run or read it outside the sandbox later, so it was renamed. To write one on purpose, run the "
                         f"command again with writable: [its path]; the user is asked]")
        if self.builds:
            lines.append(f"[changed build files, which run code when the user runs them (make, pytest, npm ...): "
                         f"{', '.join(_rel(workspace, p) for p in self.builds)}; the user is told]")
        return "\n".join(lines)


def _rel(workspace: Path, p: Path) -> str:
    return p.relative_to(workspace).as_posix() if p.is_relative_to(workspace) else str(p)


class Guard:
    """Thread-safe: commands of several agents look before and after at once, each from a worker thread."""

    def __init__(self, workspace: Path):
        self.workspace = workspace
        self._known: set[tuple[int, int]] | None = None
        self._lock = threading.Lock()
        self.active = 0  # commands between their look before and their last look after, jobs too
        self._changed: dict[str, dict[Path, None]] = {}  # agent -> build files changed, until reported
        self._moved: dict[str, list[tuple[Path, Path]]] = {}

    def before(self, agent: str, roots: Iterable[Path] = ()) -> Scan:
        """Look at the workspace before a command, which counts as running until its final after(). What
        appeared since the last look is the user's own, unless another command or a job runs: then it may
        be theirs, and is set aside (counting it the user's would let a command's own pass unseen)."""
        found = protected.scan(self.workspace, homes(), roots)
        with self._lock:
            others, self.active = self.active, self.active + 1
            if self._known is None:
                self._known = {e.identity for e in found.entries.values()}
                return found
            fresh = [e for e in found.entries.values() if e.identity not in self._known]
            if not others:
                self._known.update(e.identity for e in fresh)
                return found
        for e in fresh:
            self._set_aside(e.path, agent)
            found.entries.pop(e.path, None)
        return found

    def after(self, agent: str, before: Scan, lifted: Iterable[Path] = (), roots: Iterable[Path] = (), *,
              final: bool = True) -> Outcome:
        """After a command (`final`; else a look while it still runs): set aside each protected entry it
        made (outside `lifted`, what the user allowed), put back a link it replaced, and note the build
        files it created or changed."""
        try:
            return self._after(agent, before, tuple(lifted), roots)
        finally:
            if final:
                with self._lock:
                    self.active -= 1

    def _after(self, agent: str, before: Scan, lifted: tuple[Path, ...], roots: Iterable[Path]) -> Outcome:
        now = protected.scan(self.workspace, homes(), roots)
        outcome = Outcome()
        with self._lock:
            known = self._known or set()
            for e in now.entries.values():
                if e.identity in known:
                    continue
                if any(e.path.is_relative_to(w) for w in lifted):
                    known.add(e.identity)
                    continue
                if (moved := self._move(e.path)) is not None:
                    outcome.set_aside.append((e.path, moved))
            for e in before.entries.values():
                if e.link is not None and (e.path not in now.entries or now.entries[e.path].identity != e.identity):
                    _restore_link(e)
            for path, state in now.builds.items():
                if before.builds.get(path) != state:
                    outcome.builds.append(path)
            if outcome.builds:
                self._changed.setdefault(agent, {}).update(dict.fromkeys(outcome.builds))
            if outcome.set_aside:
                self._moved.setdefault(agent, []).extend(outcome.set_aside)
        return outcome

    def wrote(self, agent: str, path: Path) -> None:
        """A file tool wrote `path` (with the user's yes, when protected): known from now on; a build
        file is reported like a command's change."""
        try:
            st = os.lstat(path)
        except OSError:
            return
        with self._lock:
            if self._known is not None:
                self._known.add((st.st_dev, st.st_ino))
                for parent in path.parents:  # folders it made on the way, such as a new `.vscode`
                    if not parent.is_relative_to(self.workspace) or parent == self.workspace:
                        break
                    try:
                        p = os.lstat(parent)
                    except OSError:
                        break
                    self._known.add((p.st_dev, p.st_ino))
            if protected.is_build(path.name):
                self._changed.setdefault(agent, {})[path] = None

    def report(self, agent: str) -> str | None:
        """What the user should hear of `agent`'s turn: build files changed and entries set aside (then forgotten)."""
        with self._lock:
            changed = list(self._changed.pop(agent, {}))
            moved = self._moved.pop(agent, [])
        lines = []
        if changed:
            lines.append(f"{agent} changed files that run code when you run them (make, pytest, npm, cargo ...): "
                         f"{', '.join(_rel(self.workspace, p) for p in changed)}. Review them before you run them.")
        if moved:
            lines.append(f"{agent}'s commands created files that git, an editor or the orchestrator would run or "
                         f"read outside the sandbox; they were renamed: "
                         f"{', '.join(f'{_rel(self.workspace, p)} -> {n.name}' for p, n in moved)}.")
        return "\n".join(lines) or None

    def _set_aside(self, path: Path, agent: str) -> None:
        with self._lock:
            if (moved := self._move(path)) is not None:
                self._moved.setdefault(agent, []).append((path, moved))

    def _move(self, path: Path) -> Path | None:
        try:
            return _rename_aside(path)
        except OSError:
            return None  # gone meanwhile, or a folder that cannot be reached without a link: nothing to move


def _rename_aside(path: Path) -> Path:
    """Rename `path` beside itself (inert to git and editors), reaching its folder without following a link."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    try:
        fd = walk_to_folder(path.parent)
    except Exception as exc:  # a ToolError: a link on the way
        raise OSError(str(exc)) from None
    try:
        for n in range(100):
            new = f"{path.name}.refused-{stamp}" + (f"-{n}" if n else "")
            try:
                os.stat(new, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                os.rename(path.name, new, src_dir_fd=fd, dst_dir_fd=fd)
                return path.with_name(new)
        raise OSError(f"{path}: no free name to set it aside")
    finally:
        os.close(fd)


def _restore_link(entry: Entry) -> None:
    try:
        fd = walk_to_folder(entry.path.parent)
    except Exception:
        return
    try:
        os.symlink(entry.link or "", entry.path.name, dir_fd=fd)
    except OSError:
        pass  # something else took the name: it was set aside above, or is known
    finally:
        os.close(fd)

"""A cgroup per sandboxed command where this machine lets us make one (an extra over the rlimits): its
processes together get pids.max and a memory limit, its counters say which was hit, and it goes after."""
from __future__ import annotations

import itertools
import os
import signal
import subprocess
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Sequence

import trio

from orchestrator.core.log import logger
from orchestrator.tools.limits import Limits

log = logger(__name__)

PREFIX = "orchestrator-"  # our groups' names: orchestrator-<pid>-<n>
# Off the event loop, since a mkdir or rmdir may wait on the kernel's cgroup lock; one at a time, since
# they share this process's book of groups (each call is a few small sysfs reads and writes).
_SYSFS = trio.CapacityLimiter(1)
_names = itertools.count(1)


@dataclass(frozen=True)
class Cell:
    """One command's group: on cgroup v2 one folder, on v1 one per controller ("pids", "memory")."""
    version: int
    dirs: dict[str, Path]

    def argv(self, argv: Sequence[str]) -> list[str]:
        """`argv` started inside the group: a shell writes its own pid into the group, then execs it, so
        no process of the command (bubblewrap included) ever runs outside it."""
        procs = [str(d / "cgroup.procs") for d in dict.fromkeys(self.dirs.values())]
        script = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'
        return ["/bin/sh", "-c", script, "sandbox-cgroup", *procs, "--", *argv]

    def counted(self) -> frozenset[str]:
        """What the kernel refused the command: a fork over pids.max, a process killed over the memory limit."""
        hits = set()
        if "pids" in self.dirs and _field(self.dirs["pids"] / "pids.events", "max"):
            hits.add("processes")
        events = "memory.events" if self.version == 2 else "memory.oom_control"
        if "memory" in self.dirs and _field(self.dirs["memory"] / events, "oom_kill"):
            hits.add("memory")
        return frozenset(hits)

    def remove(self) -> bool:
        """Kill what is left and remove the group; False while the kernel still holds it (dying processes)."""
        gone = True
        for d in dict.fromkeys(self.dirs.values()):
            if not d.exists():
                continue
            _kill_all(d, self.version)
            try:
                d.rmdir()
            except OSError:
                gone = False
        return gone


def _field(path: Path, name: str) -> int:
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _kill_all(d: Path, version: int) -> None:
    if version == 2 and (d / "cgroup.kill").exists():
        try:
            (d / "cgroup.kill").write_text("1")  # the kernel kills every member, no pid read and reused
            return
        except OSError:
            pass
    try:
        pids = (d / "cgroup.procs").read_text().split()
    except OSError:
        return
    for pid in pids:  # members of our own group, read a moment ago; the command's leader has exited
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


@dataclass
class _Book:
    """What this process has learnt about making groups."""
    broken: str | None = None  # why making one failed: not tried again in this process
    cleared: bool = False  # empty groups of earlier, dead processes removed
    tried: bool = False  # a process has been moved into one of ours once, so commands can be too
    leftover: list[Cell] = field(default_factory=list)  # still held by the kernel when their command ended


_book = _Book()


# --- where groups can be made ---------------------------------------------------------------------

@dataclass(frozen=True)
class Place:
    version: int
    parents: dict[str, Path]  # controller -> the folder new groups go in


def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """cgroup mounts: (mount point, root in the hierarchy, fstype, controllers of a v1 mount)."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        parts, kind = left.split(), right.split()
        if len(parts) < 5 or len(kind) < 3 or kind[0] not in ("cgroup", "cgroup2"):
            continue
        found.append((parts[4].replace("\\040", " "), parts[3], kind[0], set(kind[2].split(","))))
    return found


def _own() -> dict[str, str]:
    """This process's cgroup per v1 controller, and "" for v2."""
    own = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(",") if controllers else [""]:
            own[c] = path
    return own


def _inside(mount: str, root: str, path: str) -> Path:
    rel = path[len(root):] if root != "/" and path.startswith(root) else path
    return Path(mount) / rel.lstrip("/")


@cache
def place() -> Place | None:
    """Where this process may make groups with pids and memory: on v2 beside its own group (its own has
    it as a member, so by cgroup v2's rule it cannot hold controllers for children), under the parent that
    already hands both down; on v1 under its own group in each controller's hierarchy."""
    try:
        mounts, own = _mounts(), _own()
    except OSError:
        return None
    for mount, root, kind, _ in mounts:
        if kind == "cgroup2" and "" in own:
            mine = _inside(mount, root, own[""])
            parent = mine.parent if mine != Path(mount) else mine
            try:
                enabled = set((parent / "cgroup.subtree_control").read_text().split())
            except OSError:
                continue
            wanted: dict[str, Path] = {c: parent for c in ("pids", "memory") if c in enabled}
            if wanted and os.access(parent, os.W_OK):
                return Place(2, wanted)
    parents: dict[str, Path] = {}
    for mount, root, kind, controllers in mounts:
        for c in ("pids", "memory"):
            if kind == "cgroup" and c in controllers and c in own:
                parent = _inside(mount, root, own[c])
                if os.access(parent, os.W_OK):
                    parents[c] = parent
    return Place(1, parents) if parents else None


def _clear_stale(p: Place) -> None:
    """Empty groups an earlier orchestrator process left (it was killed before it removed them)."""
    for parent in set(p.parents.values()):
        for d in parent.glob(f"{PREFIX}*-*"):
            pid = d.name[len(PREFIX):].split("-")[0]
            if pid.isdigit() and int(pid) != os.getpid() and not Path(f"/proc/{pid}").exists():
                try:
                    d.rmdir()
                except OSError:
                    pass


def _make(limits: Limits) -> Cell | None:
    p = place()
    if p is None or _book.broken:
        return None
    if not _book.cleared:
        _book.cleared = True
        _clear_stale(p)
    _book.leftover = [c for c in _book.leftover if not c.remove()]
    name = f"{PREFIX}{os.getpid()}-{next(_names)}"
    dirs = {c: parent / name for c, parent in p.parents.items()
            if (c == "pids" and limits.processes is not None) or (c == "memory" and limits.memory is not None)}
    if not dirs:
        return None
    cell = Cell(p.version, dirs)
    try:
        for d in dict.fromkeys(dirs.values()):
            d.mkdir()
        _set_limits(cell, limits)
        if not _book.tried:
            _try_moving_into(cell)
    except OSError as exc:
        cell.remove()
        _book.broken = f"{exc.strerror} ({exc.filename})" if exc.filename else str(exc)
        log.info("no cgroup for sandboxed commands; their rlimits still hold", reason=_book.broken)
        return None
    return cell


def _try_moving_into(cell: Cell) -> None:
    """Once per process: moving a process in can be refused where making the group was not (cgroup v2
    asks for write access to the parent's cgroup.procs too), and a refusal must not fail every command."""
    try:
        done = subprocess.run(cell.argv(["true"]), stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
    except subprocess.TimeoutExpired:
        raise OSError("a process moved into it did not finish") from None
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        raise OSError(f"a process could not be moved into it: {said[-1] if said else done.returncode}")
    _book.tried = True


def _set_limits(cell: Cell, limits: Limits) -> None:
    if "pids" in cell.dirs:
        (cell.dirs["pids"] / "pids.max").write_text(str(limits.processes))
    if "memory" in cell.dirs:
        d = cell.dirs["memory"]
        if cell.version == 2:
            (d / "memory.max").write_text(str(limits.memory))
            _write_if_there(d / "memory.swap.max", "0")  # over the limit means killed, not swapped slowly
        else:
            (d / "memory.limit_in_bytes").write_text(str(limits.memory))
            _write_if_there(d / "memory.memsw.limit_in_bytes", str(limits.memory))


def _write_if_there(path: Path, value: str) -> None:
    if path.exists():
        path.write_text(value)


# --- one command's group, from the event loop ----------------------------------------------------

async def open_cell(limits: Limits) -> Cell | None:
    """A fresh group with `limits`, or None where none can be made (the rlimits hold alone then)."""
    return await trio.to_thread.run_sync(_make, limits, limiter=_SYSFS)


async def close_cell(cell: Cell) -> frozenset[str]:
    """What the command ran into; then the group is removed, waiting briefly for processes the kernel
    is still ending (a PID namespace's members die just after its first process)."""
    with trio.CancelScope(shield=True):  # a stop must not leave groups behind
        counted = await trio.to_thread.run_sync(cell.counted, limiter=_SYSFS)
        for delay in (0, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.4, 0.8):
            await trio.sleep(delay)
            if await trio.to_thread.run_sync(cell.remove, limiter=_SYSFS):
                return counted
        log.warning("a command's cgroup could not be removed yet", group=str(next(iter(cell.dirs.values()))))
        _book.leftover.append(cell)
    return counted

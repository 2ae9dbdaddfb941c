"""The one launch point for commands: run_command starts a process in its own group (and a
sandboxed one in its own cgroup where it can), keeps the head and tail of its output, kills the whole
group on a timeout or a cancel, and says which sandbox limit a failed command went over."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Awaitable, Callable, Mapping, Sequence

import trio

from orchestrator.tools import cgroup
from orchestrator.tools.limits import Limits, ran_into

SHELL = shutil.which("bash") or "/bin/sh"
OUTPUT_CAP = 30_000  # bytes the model sees from one command: head and tail
KILL_GRACE = 1.0  # between TERM and KILL: short, because a stop must be prompt
DRAIN_GRACE = 1.0  # after the group is killed, for output still in the pipe
EVIDENCE_CAP = 16_000  # bytes kept from a command whose output goes to a sink, to tell which limit it hit


@dataclass(frozen=True)
class CommandResult:
    returncode: int  # negative: killed by that signal
    output: str  # merged stdout and stderr, head and tail kept; empty when a sink took it
    omitted: int  # bytes dropped from the middle
    timed_out: bool
    duration: float
    pgid: int
    over: str | None = None  # the sandbox limit a failed command went over (limits.ran_into), if any


def command_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A fresh environment for one command: never the process's own, which holds API keys."""
    env = {
        "PATH": os.environ.get("PATH") or "/usr/local/bin:/usr/bin:/bin",
        "HOME": os.environ.get("HOME") or str(Path.home()),
        "LANG": os.environ.get("LANG") or "C.UTF-8",
        "TERM": "dumb",
    }
    env.update(extra or {})
    return env


class HeadTail:
    """Output kept as its first and last bytes, with a count of what fell out of the middle."""

    def __init__(self, cap: int):
        self.head_cap = cap // 2
        self.tail_cap = cap - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.omitted = 0

    async def add(self, chunk: bytes) -> None:
        room = self.head_cap - len(self.head)
        self.head += chunk[:room]
        self.tail += chunk[room:]
        excess = len(self.tail) - self.tail_cap
        if excess > 0:
            del self.tail[:excess]
            self.omitted += excess

    def text(self) -> str:
        note = f"\n[… {self.omitted} bytes omitted …]\n".encode() if self.omitted else b""
        return (bytes(self.head) + note + bytes(self.tail)).decode("utf-8", errors="replace")


class _Group:
    """A started command's process group, ended while its leader is still unreaped.

    Signalling the group before the leader is reaped means its id cannot have been reused (the
    grandchild trap). A process that leaves the group on purpose (setsid, a daemon)
    escapes this; only a cgroup or a container would hold it.
    """

    def __init__(self, proc: trio.Process):
        self.proc = proc
        self.pgid = proc.pid  # start_new_session made the child a group leader
        self._pidfd = os.pidfd_open(proc.pid) if hasattr(os, "pidfd_open") else None
        self._ended = False

    async def exited(self) -> None:
        """Wait until the leader exits without reaping it, where the platform allows."""
        if self._pidfd is None:
            await self.proc.wait()  # no pidfd (not Linux): reaped, so the group id is only probably ours
        else:
            await trio.lowlevel.wait_readable(self._pidfd)

    async def end(self, grace: float) -> None:
        """TERM the group, give the leader `grace` to exit, then KILL whatever is left."""
        if self._ended:
            return
        self._ended = True
        with trio.CancelScope(shield=True):  # bounded by grace; a stop must not leave it half done
            self._signal(signal.SIGTERM)
            with trio.move_on_after(grace):
                await self.exited()
            self._signal(signal.SIGKILL)

    async def close(self, grace: float) -> int:
        with trio.CancelScope(shield=True):
            await self.end(grace)
            code = await self.proc.wait()
            assert self.proc.stdout is not None  # opened with stdout=PIPE
            await self.proc.stdout.aclose()
            if self._pidfd is not None:
                trio.lowlevel.notify_closing(self._pidfd)
                os.close(self._pidfd)
        return code

    def _signal(self, sig: signal.Signals) -> None:
        try:
            os.killpg(self.pgid, sig)
        except ProcessLookupError:
            pass


async def run_command(cmd: str | Sequence[str], *, cwd: Path, timeout: float,
                      env: Mapping[str, str] | None = None, cap: int = OUTPUT_CAP,
                      sink: Callable[[bytes], Awaitable[None]] | None = None,
                      on_start: Callable[[int], None] | None = None,
                      grace: float = KILL_GRACE, pass_fds: Sequence[int] = (),
                      limits: Limits | None = None) -> CommandResult:
    """Run `cmd` (a string runs under bash -c) and return once it and its whole group are gone.

    Output goes to `sink` when given, otherwise it is capped to `cap` bytes, head and tail. The
    command's own background children do not outlive it; long-running work is a background job.
    Cancelling the caller ends the group the same way a timeout does. `pass_fds` are handed over:
    the command inherits them and they are closed here once it started (or could not).
    `limits`, a sandboxed command's, also puts it in a fresh cgroup where this machine allows one
    (removed when it ends), and the result's `over` names the limit it failed at.
    """
    argv = [SHELL, "-c", cmd] if isinstance(cmd, str) else list(cmd)
    fds = list(pass_fds)
    cell = None
    evidence = HeadTail(cap if sink is None else EVIDENCE_CAP)
    try:
        cell = await cgroup.open_cell(limits) if limits is not None else None
        result = await _run(cell.argv(argv) if cell else argv, cwd, timeout, env, evidence, sink, on_start,
                            grace, fds, limits.disk if limits is not None else None)
    finally:
        _close(fds)
        counted = await cgroup.close_cell(cell) if cell else frozenset()
    if limits is None:
        return result
    return replace(result, over=result.over or ran_into(result.returncode, evidence.text(), limits, counted,
                                                         result.timed_out))


async def _run(argv: list[str], cwd: Path, timeout: float, env: Mapping[str, str] | None, capture: HeadTail,
               sink: Callable[[bytes], Awaitable[None]] | None, on_start: Callable[[int], None] | None,
               grace: float, fds: list[int], disk: int | None = None) -> CommandResult:
    started = trio.current_time()
    try:
        proc = await trio.lowlevel.open_process(
            argv, cwd=cwd, env=command_env(env), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True, pass_fds=tuple(fds))
    finally:
        _close(fds)  # the child has its copies
    assert proc.stdout is not None  # stdout=PIPE
    group = _Group(proc)
    if on_start:
        on_start(group.pgid)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_drain, proc.stdout, _tee(sink, capture) if sink else capture.add)
            with trio.move_on_after(timeout) as deadline:
                with trio.CancelScope() as waiting:
                    if disk is not None:
                        watch = trio.CancelScope()
                        nursery.start_soon(_watch_disk, cwd, disk, waiting, watch)
                    await group.exited()
                if disk is not None:
                    watch.cancel()
            await group.end(grace)
            # The pipe closes once every writer is dead; one that left the group must not hold us.
            nursery.cancel_scope.deadline = trio.current_time() + DRAIN_GRACE
    finally:
        code = await group.close(grace)
    return CommandResult(code, "" if sink else capture.text(), 0 if sink else capture.omitted,
                         deadline.cancelled_caught, trio.current_time() - started, group.pgid,
                         over="disk" if waiting.cancel_called else None)


DISK_POLL = 0.25  # seconds between looks at the workspace's free space while a sandboxed command runs
_STATVFS = trio.CapacityLimiter(4)


async def _watch_disk(folder: Path, most: int, waiting: trio.CancelScope, watch: trio.CancelScope) -> None:
    """Cancel `waiting` once the file system of `folder` has lost more than `most` bytes of free space since
    the command started: no kernel limit caps what one process tree writes in all (RLIMIT_FSIZE is per file),
    and the free space sees every file, whichever name it has. Other writers to that disk count too."""
    def free() -> int:
        st = os.statvfs(folder)
        return st.f_bavail * st.f_frsize

    with watch:
        start = await trio.to_thread.run_sync(free, limiter=_STATVFS)
        while True:
            await trio.sleep(DISK_POLL)
            if start - await trio.to_thread.run_sync(free, limiter=_STATVFS) > most:
                waiting.cancel()
                return


def _close(fds: list[int]) -> None:
    """Close each fd once: emptied as it goes, so a second call cannot close a number reused since."""
    while fds:
        os.close(fds.pop())


def _tee(sink: Callable[[bytes], Awaitable[None]], capture: HeadTail) -> Callable[[bytes], Awaitable[None]]:
    async def write(chunk: bytes) -> None:
        await sink(chunk)
        await capture.add(chunk)
    return write


async def _drain(stream: trio.abc.ReceiveStream, write: Callable[[bytes], Awaitable[None]]) -> None:
    async for chunk in stream:  # read to the end, so a chatty child never blocks on a full pipe
        await write(bytes(chunk))  # the same object: a pipe's FdStream yields bytes

"""Background jobs of one tool session: each runs run_command under the room's group stop, with its
output in a log file and its latest lines in memory."""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Awaitable, Callable, Sequence

import trio

from orchestrator.tools.errors import ToolError
from orchestrator.tools.limits import Limits, stopped
from orchestrator.tools.process import DRAIN_GRACE, KILL_GRACE, CommandResult, run_command

LOG_CAP = 8_000_000  # bytes of a job's output written to its log file
JOB_TAIL = 64_000  # bytes of a job's latest output kept in memory for job_output
_FILE_IO = trio.CapacityLimiter(4)


class JobLog:
    """A job's output: its first LOG_CAP bytes in the log file (the tail is added at the end),
    the latest JOB_TAIL bytes in memory for job_output."""

    def __init__(self, path: Path, file, cap: int = LOG_CAP, keep: int = JOB_TAIL):
        self.path = path
        self._file = file
        self._cap = cap
        self._keep = keep
        self._recent = bytearray()
        self.total = 0
        self._changed = trio.Event()  # set (and replaced) at each write and at the close

    @classmethod
    async def create(cls, path: Path) -> JobLog:
        return cls(path, await trio.to_thread.run_sync(open, path, "wb", limiter=_FILE_IO))

    async def write(self, chunk: bytes) -> None:
        room = self._cap - self.total
        self.total += len(chunk)
        self._recent += chunk
        del self._recent[:max(0, len(self._recent) - self._keep)]
        self._changed.set()
        self._changed = trio.Event()
        if room > 0:
            await trio.to_thread.run_sync(self._file.write, chunk[:room], limiter=_FILE_IO)

    def recent(self) -> bytes:
        return bytes(self._recent)

    async def wait(self, seconds: float, until: bytes | None, done: trio.Event) -> None:
        """Up to `seconds`: until the latest output holds `until` (None: until anything more is printed), or the
        job ended. An agent that polls a job otherwise spends a model call on each look."""
        start = self.total
        with trio.move_on_after(seconds):
            while not done.is_set():
                if (until in self._recent) if until is not None else self.total > start:
                    return
                await self._changed.wait()

    async def close(self) -> None:
        beyond = self.total - self._cap
        if beyond > 0:  # close with the latest output, so the file ends like the job did
            shown = min(beyond, len(self._recent))
            last = bytes(self._recent[len(self._recent) - shown:])
            note = f"\n[… {beyond - shown} bytes omitted …]\n".encode()
            await trio.to_thread.run_sync(self._file.write, note + last, limiter=_FILE_IO)
        await trio.to_thread.run_sync(self._file.close, limiter=_FILE_IO)
        self._changed.set()


@dataclass(eq=False)
class Job:
    id: str
    output: JobLog
    timeout: float
    limits: Limits | None = None  # a sandboxed job's
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    done: trio.Event = field(default_factory=trio.Event)
    started: float = field(default_factory=trio.current_time)
    ended: float | None = None
    pgid: int | None = None
    result: CommandResult | None = None
    fate: str | None = None  # how it ended when it did not end by itself

    def status(self) -> str:
        runtime = (self.ended or trio.current_time()) - self.started
        if self.ended is None:
            return f"{self.id}: running for {runtime:.1f} s"
        if self.result is None:
            return f"{self.id}: {self.fate} after {runtime:.1f} s"
        if self.result.timed_out:
            said = f"{self.id}: timed out after {runtime:.1f} s; it and everything it started were stopped"
        else:
            said = f"{self.id}: exited with code {self.result.returncode} after {runtime:.1f} s"
        if self.result.over and self.limits:
            said += " " + stopped(self.result.over, self.limits, job=True)
        return said


class JobTable:
    """The background jobs of one ToolSession; each runs under the room's group stop."""

    def __init__(self, spawn: Callable[..., None] | None):
        self._spawn = spawn  # runs fn(*args) under the group's stop; None outside a room
        self._jobs: dict[str, Job] = {}
        self._folder: Path | None = None  # made on first use, under the system temp dir

    async def start(self, command: str | Sequence[str], *, cwd: Path, timeout: float,
                    ended: Callable[[Job], Awaitable[None]] | None = None, limits: Limits | None = None,
                    pass_fds: Sequence[int] = ()) -> Job:
        """Start `command` in the background; `ended` runs (shielded) once it is gone, however it ended.
        `limits` and `pass_fds` as for run_command: the fds are the job's from here on, closed by it."""
        fds = list(pass_fds)
        try:
            if self._spawn is None:
                raise ToolError("background jobs need a room; run the command without background")
            if self._folder is None:
                self._folder = Path(await trio.to_thread.run_sync(
                    tempfile.mkdtemp, "", "orchestrator-jobs-", limiter=_FILE_IO))
            job_id = f"job{len(self._jobs) + 1}"
            job = Job(job_id, await JobLog.create(self._folder / f"{job_id}.log"), timeout, limits)
            self._jobs[job_id] = job
            self._spawn(self._run, job, command, cwd, ended, tuple(fds))
            fds.clear()  # _run hands them to run_command, which closes them
        finally:
            for fd in fds:
                os.close(fd)
        return job

    def get(self, job_id: str) -> Job:
        job = self._jobs.get(job_id)
        if job is None:
            known = ", ".join(self._jobs) or "none"
            raise ToolError(f"no job {job_id!r}; jobs of this session: {known}")
        return job

    async def kill(self, job_id: str) -> Job:
        job = self.get(job_id)
        job.scope.cancel()
        with trio.move_on_after(KILL_GRACE + DRAIN_GRACE + 5):  # a job the room never started must not hang us
            await job.done.wait()
        return job

    async def _run(self, job: Job, command: str | Sequence[str], cwd: Path,
                   ended: Callable[[Job], Awaitable[None]] | None, pass_fds: tuple[int, ...] = ()) -> None:
        try:
            with job.scope:
                job.result = await run_command(command, cwd=cwd, timeout=job.timeout, sink=job.output.write,
                                               on_start=lambda pgid: setattr(job, "pgid", pgid),
                                               pass_fds=pass_fds, limits=job.limits)
            if job.scope.cancelled_caught:
                job.fate = "killed by job_kill"
        except OSError as exc:
            job.fate = f"failed ({exc.strerror or exc})"
        finally:
            if job.result is None and job.fate is None:
                job.fate = "stopped with the room"
            job.ended = trio.current_time()
            with trio.CancelScope(shield=True):
                if ended is not None:  # before the log closes: what it says reaches job_output too
                    await ended(job)
                await job.output.close()
            job.done.set()

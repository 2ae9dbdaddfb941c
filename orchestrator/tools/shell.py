"""The shell executor (E17, X3): run_command, the one launch point for shell commands, contained by process group;
and the bash / job_status / job_output / job_kill tools with the session's background JobTable."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Awaitable, Callable, Mapping, Sequence

import msgspec
import structlog
import trio

from orchestrator.tools.base import Tool, ToolContext, ToolError, ToolOutput
from orchestrator.tools.risk import assess
from orchestrator.tools.sandbox import resolve

log = structlog.get_logger(__name__)

SHELL = shutil.which("bash") or "/bin/sh"
OUTPUT_CAP = 30_000  # bytes the model sees from one command: head and tail
DEFAULT_TIMEOUT = 120.0
MAX_TIMEOUT = 600.0  # longer work belongs in the background
JOB_TIMEOUT = 3_600.0
MAX_JOB_TIMEOUT = 86_400.0
KILL_GRACE = 1.0  # between TERM and KILL: short, because a stop must be prompt (G9)
DRAIN_GRACE = 1.0  # after the group is killed, for output still in the pipe
LOG_CAP = 8_000_000  # bytes of a job's output written to its log file
JOB_TAIL = 64_000  # bytes of a job's latest output kept in memory for job_output
MAX_COMMAND = 100_000  # characters; longer text belongs in a script file
_FILE_IO = trio.CapacityLimiter(4)
_CLASSIFY = trio.CapacityLimiter(2)  # reading a long command is CPU work: off the event loop


@dataclass(frozen=True)
class CommandResult:
    returncode: int  # negative: killed by that signal
    output: str  # merged stdout and stderr, head and tail kept; empty when a sink took it
    omitted: int  # bytes dropped from the middle
    timed_out: bool
    duration: float
    pgid: int


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
    grandchild trap, stack-notes §7). A process that leaves the group on purpose (setsid, a daemon)
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
                      grace: float = KILL_GRACE) -> CommandResult:
    """Run `cmd` (a string runs under bash -c) and return once it and its whole group are gone.

    Output goes to `sink` when given, otherwise it is capped to `cap` bytes, head and tail. The
    command's own background children do not outlive it; long-running work is a background job.
    Cancelling the caller ends the group the same way a timeout does.
    """
    argv = [SHELL, "-c", cmd] if isinstance(cmd, str) else list(cmd)
    capture = HeadTail(cap)
    started = trio.current_time()
    proc = await trio.lowlevel.open_process(
        argv, cwd=cwd, env=command_env(env), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, start_new_session=True)
    group = _Group(proc)
    if on_start:
        on_start(group.pgid)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_drain, proc.stdout, sink or capture.add)
            with trio.move_on_after(timeout) as deadline:
                await group.exited()
            await group.end(grace)
            # The pipe closes once every writer is dead; one that left the group must not hold us.
            nursery.cancel_scope.deadline = trio.current_time() + DRAIN_GRACE
    finally:
        code = await group.close(grace)
    return CommandResult(code, "" if sink else capture.text(), capture.omitted, deadline.cancelled_caught,
                         trio.current_time() - started, group.pgid)


async def _drain(stream: trio.abc.ReceiveStream, write: Callable[[bytes], Awaitable[None]]) -> None:
    async for chunk in stream:  # read to the end, so a chatty child never blocks on a full pipe
        await write(chunk)


# --- background jobs ------------------------------------------------------------------------

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

    @classmethod
    async def create(cls, path: Path) -> JobLog:
        return cls(path, await trio.to_thread.run_sync(open, path, "wb", limiter=_FILE_IO))

    async def write(self, chunk: bytes) -> None:
        room = self._cap - self.total
        self.total += len(chunk)
        self._recent += chunk
        del self._recent[:max(0, len(self._recent) - self._keep)]
        if room > 0:
            await trio.to_thread.run_sync(self._file.write, chunk[:room], limiter=_FILE_IO)

    def recent(self) -> bytes:
        return bytes(self._recent)

    async def close(self) -> None:
        beyond = self.total - self._cap
        if beyond > 0:  # close with the latest output, so the file ends like the job did
            shown = min(beyond, len(self._recent))
            last = bytes(self._recent[len(self._recent) - shown:])
            note = f"\n[… {beyond - shown} bytes omitted …]\n".encode()
            await trio.to_thread.run_sync(self._file.write, note + last, limiter=_FILE_IO)
        await trio.to_thread.run_sync(self._file.close, limiter=_FILE_IO)


@dataclass(eq=False)
class Job:
    id: str
    output: JobLog
    timeout: float
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
            return f"{self.id}: timed out after {runtime:.1f} s; it and everything it started were stopped"
        return f"{self.id}: exited with code {self.result.returncode} after {runtime:.1f} s"


class JobTable:
    """The background jobs of one ToolSession; each runs under the room's group stop (G9)."""

    def __init__(self, session):
        self._session = session
        self._jobs: dict[str, Job] = {}
        self._folder: Path | None = None  # made on first use, under the system temp dir

    async def start(self, command: str, *, cwd: Path, timeout: float) -> Job:
        spawn = self._session.spawn
        if spawn is None:
            raise ToolError("background jobs need a room; run the command without background")
        if self._folder is None:
            self._folder = Path(await trio.to_thread.run_sync(
                tempfile.mkdtemp, "", "orchestrator-jobs-", limiter=_FILE_IO))
        job_id = f"job{len(self._jobs) + 1}"
        job = Job(job_id, await JobLog.create(self._folder / f"{job_id}.log"), timeout)
        self._jobs[job_id] = job
        spawn(self._run, job, command, cwd)
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

    async def _run(self, job: Job, command: str, cwd: Path) -> None:
        try:
            with job.scope:
                job.result = await run_command(command, cwd=cwd, timeout=job.timeout, sink=job.output.write,
                                               on_start=lambda pgid: setattr(job, "pgid", pgid))
            if job.scope.cancelled_caught:
                job.fate = "killed by job_kill"
        except OSError as exc:
            job.fate = f"failed ({exc.strerror or exc})"
        finally:
            if job.result is None and job.fate is None:
                job.fate = "stopped with the room"
            job.ended = trio.current_time()
            with trio.CancelScope(shield=True):
                await job.output.close()
            job.done.set()


# --- the tools ------------------------------------------------------------------------------

Seconds = Annotated[float, msgspec.Meta(gt=0, le=MAX_JOB_TIMEOUT)]


class BashArgs(msgspec.Struct, forbid_unknown_fields=True):
    command: str
    timeout: Seconds | None = None
    background: bool = False
    cwd: str | None = None


class JobArgs(msgspec.Struct, forbid_unknown_fields=True):
    job: str


class JobOutputArgs(msgspec.Struct, forbid_unknown_fields=True):
    job: str
    lines: Annotated[int, msgspec.Meta(ge=1, le=2_000)] = 100


async def bash(args: BashArgs, ctx: ToolContext) -> ToolOutput | str:
    command = args.command
    if not command.strip():
        raise ToolError("command is empty")
    if len(command) > MAX_COMMAND:
        raise ToolError(f"command is {len(command)} characters, over {MAX_COMMAND}; write a script file and run it")
    cwd = resolve(ctx.session, args.cwd) if args.cwd else ctx.workspace
    if not cwd.is_relative_to(ctx.workspace) or not cwd.is_dir():  # grants are for file tools, not a shell's home
        raise ToolError(f"cwd {args.cwd!r} is not a folder in the workspace")
    limit = MAX_JOB_TIMEOUT if args.background else MAX_TIMEOUT
    timeout = args.timeout or (JOB_TIMEOUT if args.background else DEFAULT_TIMEOUT)
    if timeout > limit:
        raise ToolError(f"timeout above {limit:g} s; use background: true for long work")
    if args.background and ctx.session.spawn is None:
        raise ToolError("background jobs need a room; run the command without background")

    # Risky text never runs unasked; the log gets the category and length, never the text (E17).
    verdict = await trio.to_thread.run_sync(assess, command, limiter=_CLASSIFY)
    if verdict.blocked:
        log.warning("shell command refused", category="blocklist", length=len(command))
        return ToolOutput(f"Refused: this command is never run ({verdict.blocked}).", is_error=True)
    where = "" if cwd == ctx.workspace else f" in {args.cwd}"
    for risk in verdict.risks:
        summary = f"{ctx.agent} wants to run{where} ({risk.label}: {risk.reason}):\n{command}"
        allowed = await ctx.session.confirm(ctx.agent, risk.category, summary)
        log.info("risky shell command", category=risk.category, length=len(command), allowed=allowed)
        if not allowed:
            return ToolOutput(f"The user denied this command (risk: {risk.label}: {risk.reason}). It did not "
                              "run; do not retry it in another form.", is_error=True)

    if args.background:
        job = await ctx.session.jobs.start(command, cwd=cwd, timeout=timeout)
        return (f"Started background job {job.id} (stopped after {timeout:g} s or when the room stops). "
                f"Check it with job_status, read it with job_output, stop it with job_kill.")
    result = await run_command(command, cwd=cwd, timeout=timeout)
    if result.timed_out:
        footer = f"[timed out after {timeout:g} s; it and everything it started were stopped]"
    elif result.returncode < 0:
        footer = f"[killed by signal {-result.returncode}]"
    else:
        footer = f"[exit code {result.returncode}]"
    return ToolOutput(f"{result.output or '(no output)'}\n{footer}", is_error=result.returncode != 0)


async def job_status(args: JobArgs, ctx: ToolContext) -> str:
    return ctx.session.jobs.get(args.job).status()


async def job_output(args: JobOutputArgs, ctx: ToolContext) -> str:
    job = ctx.session.jobs.get(args.job)
    lines = job.output.recent().splitlines(keepends=True)[-args.lines:]
    text = b"".join(lines)[-OUTPUT_CAP:].decode("utf-8", errors="replace")
    return f"{job.status()}; last {len(lines)} lines of {job.output.total} bytes of output:\n{text}"


async def job_kill(args: JobArgs, ctx: ToolContext) -> str:
    job = ctx.session.jobs.get(args.job)
    if job.ended is None:
        job = await ctx.session.jobs.kill(args.job)
    return job.status()


BASH = Tool(
    "bash",
    "Run a shell command (bash -c) in the workspace, or in `cwd` relative to it. stdout and stderr "
    "come back merged; long output keeps its beginning and end. Default timeout 120 s (at most 600); "
    "when the command ends, anything it started in the background is stopped too, so run servers "
    "and long work with `background: true` and follow them with job_status / job_output / job_kill. "
    "The environment is minimal (PATH, HOME, LANG, TERM=dumb) and stdin is closed. Risky commands "
    "(sending data out, deleting outside build folders, disk tools, sudo, credential files) ask the "
    "user first; some (rm -rf /, fork bombs, reboot) are always refused.",
    BashArgs, bash,
)
JOB_STATUS = Tool("job_status", "Whether a background job is running, its exit code and runtime.",
                  JobArgs, job_status, read_only=True)
JOB_OUTPUT = Tool("job_output", "The latest output of a background job: its last `lines` lines (default 100).",
                  JobOutputArgs, job_output, read_only=True)
JOB_KILL = Tool("job_kill", "Stop a background job and everything it started.", JobArgs, job_kill)

SHELL_TOOLS: list[Tool] = [BASH, JOB_STATUS, JOB_OUTPUT, JOB_KILL]

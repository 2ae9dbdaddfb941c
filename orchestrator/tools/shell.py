"""The shell tools: bash (risk-checked, then run through process.run_command inside the OS
sandbox of tools/jail.py, in the foreground or as a background job) and job_status / job_output / job_kill."""
from __future__ import annotations

import os
from dataclasses import replace
from functools import cache, partial
from pathlib import Path
from typing import Annotated, Awaitable, Callable, Sequence

import msgspec
import trio

from orchestrator.core.log import logger
from orchestrator.tools.base import Tool, ToolContext, ToolError, ToolOutput
from orchestrator.tools.jail import SYSTEM_VISIBLE, Confinement, backend
from orchestrator.tools.limits import Limits, stopped
from orchestrator.tools.seccomp import open_filter
from orchestrator.tools.process import OUTPUT_CAP, SHELL, CommandResult, command_env, run_command
from orchestrator.tools.risk import OPAQUE, UNSANDBOXED, Risk, assess
from orchestrator.tools import guard
from orchestrator.tools.jobs import Job
from orchestrator.tools.sandbox import CREDENTIALS, app_data_folders, homes, protection, resolve, shown
from orchestrator.tools.session import ToolSession

log = logger(__name__)

DEFAULT_TIMEOUT = 120.0
MAX_TIMEOUT = 600.0  # longer work belongs in the background
JOB_TIMEOUT = 3_600.0
MAX_JOB_TIMEOUT = 86_400.0
MAX_COMMAND = 100_000  # characters; longer text belongs in a script file
_CLASSIFY = trio.CapacityLimiter(2)  # reading a long command is CPU work: off the event loop
_GUARD = trio.CapacityLimiter(4)
PATROL = 2.0  # seconds between the looks at the workspace while a background job runs  # the looks at the workspace before and after a command


# --- the tools ------------------------------------------------------------------------------

Seconds = Annotated[float, msgspec.Meta(gt=0, le=MAX_JOB_TIMEOUT)]


class BashArgs(msgspec.Struct, forbid_unknown_fields=True):
    command: str
    timeout: Seconds | None = None
    background: bool = False
    cwd: str | None = None
    network: bool = False
    writable: list[str] = msgspec.field(default_factory=list)


class JobArgs(msgspec.Struct, forbid_unknown_fields=True):
    job: str


class JobOutputArgs(msgspec.Struct, forbid_unknown_fields=True):
    job: str
    lines: Annotated[int, msgspec.Meta(ge=1, le=2_000)] = 100
    wait: Annotated[float, msgspec.Meta(ge=0, le=120)] = 0  # seconds, for `until` or for more output
    until: str | None = None


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

    # The wall first: without a sandbox nothing runs, unless the user turned it off (then all asks).
    settings = ctx.session.sandbox_for(ctx.agent)
    jail = backend()
    if settings.enabled and (why := await trio.to_thread.run_sync(jail.unavailable, limiter=_CLASSIFY)):
        return ToolOutput(f"Not run: {why}.", is_error=True)

    # Risky text never runs unasked; the log gets the category and length, never the text.
    verdict = await trio.to_thread.run_sync(assess, command, limiter=_CLASSIFY)
    if verdict.blocked:
        log.warning("shell command refused", category="blocklist", length=len(command))
        return ToolOutput(f"Refused: this command is never run ({verdict.blocked}).", is_error=True)
    where = "" if cwd == ctx.workspace else f"; run in {args.cwd}"
    for risk in [r for r in verdict.risks if r.category != OPAQUE]:
        if denied := await _ask(ctx, risk, where, command):
            return denied
    network = False
    if settings.enabled and settings.network != "deny" and (args.network or verdict.network):
        network = settings.network == "allow" or await ctx.session.confirm(
            ctx.agent, "network", f"{command}\n(wants the network{where})")
    writable, lifted = _writable(ctx.session, args.writable)
    for path in writable:
        if not await ctx.session.confirm(ctx.agent, f"write:{path}", f"{command}\n(wants to write to {path}{where})"):
            return ToolOutput(f"The user denied writing to {path}; the command did not run.", is_error=True)
    for path, why in lifted:
        if not await ctx.session.confirm(ctx.agent, f"write:{path}",
                                         f"{command}\n(wants to write {why}{where})"):
            return ToolOutput(f"The user denied writing {shown(ctx.session, path)}; the command did not run.",
                              is_error=True)
    # Opaque text runs contained; with the network, or with nothing around it, it asks like any risk.
    late = [r for r in verdict.risks if r.category == OPAQUE and (network or not settings.enabled)]
    if not settings.enabled and not verdict.risks:
        late.append(_UNSANDBOXED)
    for risk in late:
        if denied := await _ask(ctx, risk, where, command):
            return denied
    argv: str | list[str] = command
    watch = None
    limits, fds = None, []  # the sandbox's limits and its seccomp program's fd, handed to the command
    if settings.enabled:
        roots = tuple(w for w in (*settings.writable, *writable) if w.exists())
        watch = guard.of(ctx.session)
        seen = await trio.to_thread.run_sync(watch.before, ctx.agent, roots, limiter=_GUARD)
        lifts = [p for p, _ in lifted]

        async def checked(final: bool = True) -> str:
            outcome = await trio.to_thread.run_sync(partial(watch.after, ctx.agent, seen, lifts, roots, final=final),
                                                    limiter=_GUARD)
            return outcome.note(ctx.workspace)

        try:
            limits = settings.limits.for_job() if args.background else settings.limits
            confined = confinement(ctx.session, cwd, network, roots, seen.read_only(lifts))
            fds = [fd] if (fd := open_filter(network)) is not None else []
            argv = jail.argv([SHELL, "-c", command], replace(confined, limits=limits, seccomp=fd))
        except BaseException:
            with trio.CancelScope(shield=True):  # it never ran: the guard counts it ended
                await checked()
            raise

    if args.background:
        async def ended(job: Job) -> None:
            if note := await checked():
                await job.output.write(f"\n{note}\n".encode())

        try:
            job = await ctx.session.jobs.start(argv, cwd=cwd, timeout=timeout, ended=ended if watch else None,
                                               limits=limits, pass_fds=fds)
        except BaseException:
            if watch is not None:
                with trio.CancelScope(shield=True):
                    await checked()
            raise
        if watch is not None:
            assert ctx.session.spawn is not None  # a background job starts only in a room (checked above)
            ctx.session.spawn(_patrol, job, partial(checked, False))
        return (f"Started background job {job.id} (stopped after {timeout:g} s or when the room stops). "
                f"Check it with job_status, read it with job_output, stop it with job_kill.")
    try:
        result = await run_command(argv, cwd=cwd, timeout=timeout, limits=limits, pass_fds=fds)
    finally:
        if watch is not None:
            with trio.CancelScope(shield=True):  # a stopped command is checked too: it may have written
                after = await checked()
    return finished(result, timeout, limits, after if watch is not None else "")


def finished(result: CommandResult, timeout: float, limits: Limits | None, after: str = "") -> ToolOutput:
    """A command's output as the model reads it: what it printed, then how it ended (and what the look after
    it found, `after`); an error when it did not exit 0."""
    if result.timed_out:
        footer = f"[timed out after {timeout:g} s; it and everything it started were stopped]"
        if result.over and limits:  # a shell at the process limit retries its forks until the timeout
            footer += "\n" + stopped(result.over, limits)
    elif result.over and limits:
        footer = stopped(result.over, limits)
    elif result.returncode < 0:
        footer = f"[killed by signal {-result.returncode}]"
    else:
        footer = f"[exit code {result.returncode}]"
    if after:
        footer = f"{footer}\n{after}"
    return ToolOutput(f"{result.output or '(no output)'}\n{footer}", is_error=result.returncode != 0)


async def _patrol(job: Job, checked: Callable[[], Awaitable[str]]) -> None:
    """While a background job runs, what it made of the protected names is set aside every PATROL seconds,
    not only when it ends: the user may run git while it runs."""
    while not job.done.is_set():
        with trio.move_on_after(PATROL):
            await job.done.wait()
        if not job.done.is_set():
            await checked()


async def _ask(ctx: ToolContext, risk: Risk, where: str, command: str) -> ToolOutput | None:
    """None when the user allows `risk`; else the refusal the model reads."""
    summary = f"{command}\n({risk.reason}{where})"
    allowed = await ctx.session.confirm(ctx.agent, risk.category, summary)
    log.info("risky shell command", category=risk.category, length=len(command), allowed=allowed)
    if allowed:
        return None
    return ToolOutput(f"The user denied this command (risk: {risk.label}: {risk.reason}). It did not "
                      "run; do not retry it in another form.", is_error=True)


_UNSANDBOXED = Risk(UNSANDBOXED, "the sandbox is off (sandbox: off), so nothing contains it")


def _writable(session: ToolSession, raw: list[str]) -> tuple[list[Path], list[tuple[Path, str]]]:
    """Folders the model asks to write besides the workspace (admitted by the path sandbox, existing), and
    protected paths in the workspace it asks to write, each with why it is protected."""
    out, lifted = [], []
    for r in raw:
        path = resolve(session, r)
        if path.is_relative_to(session.workspace):
            if why := protection(session, path):
                lifted.append((path, why))
            elif not path.is_dir():
                raise ToolError(f"writable {r!r} is not an existing folder")
            continue
        if not path.is_dir():
            raise ToolError(f"writable {r!r} is not an existing folder")
        out.append(path)
    return out, lifted


def _toolchains() -> list[Path]:
    """What PATH's folders outside the system need, to be visible read-only, so a venv's python, pyenv's
    shims or ~/.cargo/bin's tools still run: each folder itself and, for what is in it, the prefix each
    program really lives in (a link's target, a script's interpreter, a venv's base Python), never a
    whole first-level folder of a home; credentials in them stay masked."""
    found: list[Path] = []
    for entry in command_env()["PATH"].split(os.pathsep):
        path = Path(entry)
        if not path.is_absolute() or not path.is_dir() or _in_system(path):
            continue
        found += _toolchain(path)
    return [p for p in dict.fromkeys(found) if p not in homes()]


def _in_system(path: Path) -> bool:
    return any(path.is_relative_to(s) for s in _SYSTEM_PATHS)


def _toolchain(folder: Path) -> list[Path]:
    try:
        mtime = folder.stat().st_mtime_ns
    except OSError:
        return []
    found = list(_toolchain_of(folder, mtime))
    # a version manager's shims run the manager, which lives in the folder above (~/.pyenv/shims: ~/.pyenv)
    if folder.name == "shims":
        found.append(folder.parent)
    if (folder / "rustup").exists():  # rustup's proxies run the toolchains under RUSTUP_HOME
        found.append(Path(os.environ.get("RUSTUP_HOME") or Path.home() / ".rustup"))
    return [p for p in found if p.is_dir()]


@cache
def _toolchain_of(folder: Path, mtime_ns: int) -> tuple[Path, ...]:
    del mtime_ns  # part of the key: a folder that changed is looked at again
    out = [folder]
    if (folder.parent / "pyvenv.cfg").is_file():  # a venv's bin needs its lib and its base Python
        out += [folder.parent, *_venv_base(folder.parent)]
    try:
        programs = list(os.scandir(folder))[:_MAX_PROGRAMS]
    except OSError:
        programs = []
    for e in programs:
        try:
            real = Path(os.path.realpath(e.path))
            if not real.is_file():
                continue
        except OSError:
            continue
        for target in (real, _interpreter(real)):
            if target is None or _in_system(target) or target.is_relative_to(folder):
                continue
            prefix = _prefix(target)
            out.append(prefix)
            if (prefix / "pyvenv.cfg").is_file():
                out += _venv_base(prefix)
    return tuple(dict.fromkeys(out))


_MAX_PROGRAMS = 2_000  # entries of one PATH folder looked into


def _prefix(program: Path) -> Path:
    """Where a program's installation lives: the folder above its bin/, else its own folder."""
    return program.parent.parent if program.parent.name in ("bin", "sbin") else program.parent


def _interpreter(program: Path) -> Path | None:
    """The real interpreter a script's #! line names (not one found through env), or None."""
    try:
        with open(program, "rb") as f:
            head = f.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].split()
    if not words or os.fsdecode(words[0]).endswith("/env"):
        return None  # env finds it on PATH, whose folders are looked at themselves
    real = Path(os.path.realpath(os.fsdecode(words[0])))
    return real if real.is_file() else None


def _venv_base(venv: Path) -> list[Path]:
    """A virtual environment's base Python: the prefix of the interpreter pyvenv.cfg's `home` names."""
    try:
        lines = (venv / "pyvenv.cfg").read_text(errors="replace").splitlines()
    except OSError:
        return []
    for line in lines:
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            home = Path(value.strip())
            out = [_prefix(home / "python"), *(_prefix(Path(os.path.realpath(p))) for p in home.glob("python3*"))]
            return [p for p in dict.fromkeys(out) if not _in_system(p)]
    return []


_SYSTEM_PATHS = tuple(Path(p) for p in SYSTEM_VISIBLE)


def confinement(session: ToolSession, cwd: Path, network: bool, writable: Sequence[Path],
                protected: Sequence[Path] = ()) -> Confinement:
    """What one command may touch: the workspace and `writable` read-write except `protected`, the user's
    read grants and toolchains read-only, the app's data emptied, credential files and the room's database
    masked wherever they stay visible."""
    hidden = (*homes(), *app_data_folders())
    readable = [p for p in (*session.grants, *_toolchains()) if p.exists() and not p.is_relative_to(session.workspace)]
    visible = [p for p in (session.workspace, *writable, *readable) if p.exists()]
    masked = [Path("/etc/shadow"), Path("/etc/gshadow")]
    for home in homes():
        for cred in CREDENTIALS:
            target = home.joinpath(*cred)
            if any(target.is_relative_to(v) for v in visible):
                masked.append(target)
    masked += [p for p in session.private if any(p.is_relative_to(v) for v in visible)]
    writable = tuple(w for w in writable if w.exists())
    return Confinement(session.workspace, cwd, network, writable, tuple(readable), hidden, tuple(masked),
                       tuple(protected))


async def job_status(args: JobArgs, ctx: ToolContext) -> str:
    return ctx.session.jobs.get(args.job).status()


async def job_output(args: JobOutputArgs, ctx: ToolContext) -> str:
    job = ctx.session.jobs.get(args.job)
    if args.wait:
        await job.output.wait(args.wait, None if args.until is None else args.until.encode(), job.done)
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
    "Every command runs in an OS sandbox: only the workspace is writable, except what runs code later "
    "outside it (.git, .gitmodules, hook managers' files, .vscode, .devcontainer, .envrc, agents/, .agents/: "
    "read-only, and new ones are renamed aside; list one in `writable` to ask the user), "
    "/tmp is private, HOME is an empty folder, files outside the workspace are not there, and there is no "
    "network (nor unix sockets) unless you set `network: true` and the user grants it (list extra folders to "
    "write in `writable`). Each command has limits (processes, memory, file size, CPU time, /tmp size, what it "
    "writes in all); one over a limit is stopped and the result says which. The environment is minimal "
    "(PATH, HOME, LANG, TERM=dumb) and stdin is closed. Risky "
    "commands (sending data out, deleting outside build folders, disk tools, sudo, credential files) ask "
    "the user first; some (rm -rf /, fork bombs, reboot) are always refused.",
    BashArgs, bash,
)
JOB_STATUS = Tool("job_status", "Whether a background job is running, its exit code and runtime.",
                  JobArgs, job_status, read_only=True)
JOB_OUTPUT = Tool("job_output", "The latest output of a background job: its last `lines` lines (default 100). "
                  "With `wait` (seconds), first waits until the output holds `until`, or (without `until`) until "
                  "the job prints more, or until it ends, whichever comes first.",
                  JobOutputArgs, job_output, read_only=True)
JOB_KILL = Tool("job_kill", "Stop a background job and everything it started.", JobArgs, job_kill)

SHELL_TOOLS: list[Tool] = [BASH, JOB_STATUS, JOB_OUTPUT, JOB_KILL]

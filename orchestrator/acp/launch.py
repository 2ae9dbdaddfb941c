"""An external agent's process: its command line in the OS sandbox (workspace writable, a private HOME holding
only the files the user named, the network when its spec allows it), its stderr's last lines, and its end.

The agent is a program the user named, but what it does is driven by a model reading a workspace an attacker
may have written, so it gets the same wall as a shell command, with a long-lived process's limits.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import trio

from orchestrator.acp import homes
from orchestrator.core.errors import InputError
from orchestrator.core.secrets import fetched, needed
from orchestrator.mcplink.config import expand
from orchestrator.tools.jail import Settings, backend
from orchestrator.tools.process import KILL_GRACE, _Group, command_env
from orchestrator.tools.risk import UNSANDBOXED
from orchestrator.tools import guard
from orchestrator.tools.protected import Scan
from orchestrator.tools.seccomp import open_filter
from orchestrator.tools.session import ToolSession
from orchestrator.tools.shell import confinement

if TYPE_CHECKING:
    from orchestrator.team.schema import AcpSpec

STDERR_TAIL = 16_384  # bytes of the agent's stderr kept, for the line that says why it stopped
EXIT_GRACE = 1.0  # after its stdin closed, for the agent to exit on its own before it is terminated
_BLOCKING = trio.CapacityLimiter(2)


class AcpStartError(InputError):
    """The external agent could not be started or would not talk: one line saying why and what to do."""


class StderrTail:
    """The last bytes an agent wrote to stderr; its last line names the reason it stopped, usually."""

    def __init__(self, cap: int = STDERR_TAIL):
        self._cap = cap
        self._data = bytearray()

    async def drain(self, stream: trio.abc.ReceiveStream) -> None:
        try:
            async for chunk in stream:
                self._data += chunk
                del self._data[:max(0, len(self._data) - self._cap)]
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    def last_line(self) -> str:
        lines = [ln.strip() for ln in self._data.decode("utf-8", errors="replace").splitlines() if ln.strip()]
        return lines[-1][:300] if lines else ""


@dataclass
class AgentProcess:
    """A started agent: the process with its pipes, its group (ended as one), and its private HOME."""
    proc: trio.Process
    group: _Group
    home: Path
    own_home: bool  # made here, removed at the end
    stderr: StderrTail
    names: guard.Guard | None = None  # the workspace's protected names, looked at before and after
    seen: Scan | None = None
    lock: int | None = None  # on a kept HOME while the agent runs (homes.hold): a prune leaves it alone
    ended: bool = False
    watching: bool = False
    exited: trio.Event = field(default_factory=trio.Event)

    def exit_line(self) -> str:
        code = self.proc.returncode
        if code is None:  # exited but not reaped yet (its group is ended first): its status, left in place
            try:
                info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                info = None
            if info is not None:
                code = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
        how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
        said = self.stderr.last_line()
        return f"{how}: {said}" if said else how

    async def look(self, agent: str, *, final: bool) -> str:
        """What the agent made of the protected names (.git hooks, editor settings...), set aside; the note
        that says so, or "". `final` ends the watch that began at its start."""
        if self.names is None or self.seen is None:
            return ""
        watch, seen = self.names, self.seen
        if final:
            self.names = None
        outcome = await trio.to_thread.run_sync(lambda: watch.after(agent, seen, final=final), limiter=_BLOCKING)
        return outcome.note(watch.workspace)

    async def watch(self) -> None:
        """Set `exited` when the process ends (left unreaped, so its group can still be signalled safely)."""
        if self.ended:
            return  # ended before the watch began: end() waited on the process itself
        self.watching = True
        try:
            await self.group.exited()
            self.exited.set()
        finally:
            self.watching = False

    async def _gone(self) -> None:
        # one waiter on the process at a time: while the watch runs, it tells
        if self.watching:
            await self.exited.wait()
        else:
            await self.group.exited()
            self.exited.set()

    async def end(self) -> None:
        """Shielded: its stdin is closed already; give it EXIT_GRACE to go, then TERM its group, then KILL."""
        if self.ended:
            return
        self.ended = True
        with trio.CancelScope(shield=True):
            members = await trio.to_thread.run_sync(_members, self.group.pgid, limiter=_BLOCKING)
            for grace, sig in ((EXIT_GRACE, signal.SIGTERM), (KILL_GRACE, signal.SIGKILL)):
                with trio.move_on_after(grace):
                    await self._gone()
                if self.exited.is_set():
                    break
                self.group._signal(sig)
            await self.group.close(KILL_GRACE)  # what is left of its group, then reaped
            await _gone(members)
            for pipe in (self.proc.stdin, self.proc.stderr):
                if pipe is not None:
                    await pipe.aclose()
            if self.own_home:
                await trio.to_thread.run_sync(homes.remove_folder, self.home, limiter=_BLOCKING)
            if self.lock is not None:
                os.close(self.lock)
                self.lock = None


def _members(pgid: int) -> list[int]:
    """A pidfd of each process in the group besides its leader (its jail's init, the agent's own children),
    taken while the unreaped leader keeps the group id ours; none where /proc or pidfds are missing."""
    if not hasattr(os, "pidfd_open"):
        return []
    fds = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit() or int(entry) == pgid:
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                group = stat.read().rsplit(b")", 1)[1].split()[2]  # after the name, which may hold anything
            if int(group) == pgid:
                fds.append(os.pidfd_open(int(entry)))
        except (OSError, IndexError, ValueError):
            pass  # gone meanwhile, or not ours to look at
    return fds


async def _gone(members: list[int]) -> None:
    """Until each process of the group has exited: a killed one dies once the kernel gets to it, after its
    leader may already be reaped. Bounded: one that survives KILL is the kernel's (a stuck mount)."""
    try:
        with trio.move_on_after(KILL_GRACE):
            for fd in members:
                await trio.lowlevel.wait_readable(fd)
    finally:
        for fd in members:
            trio.lowlevel.notify_closing(fd)
            os.close(fd)


def shown(spec: AcpSpec) -> str:
    """The command as the user wrote it, `${VAR}` unexpanded."""
    return " ".join(spec.command)


async def start(spec: AcpSpec, session: ToolSession, agent: str, *, cwd: Path, sandbox: Settings,
                home: Path | None = None, reach: Sequence[Path] = ()) -> AgentProcess:
    """Start the agent's process with its stdio on pipes; AcpStartError when it cannot be."""
    # As for MCP servers, `${ORCHESTRATOR_PYTHON}` names the interpreter running us (shipped scenarios use it).
    env = {"ORCHESTRATOR_PYTHON": sys.executable, **os.environ}
    where = f"agent {agent}: acp"
    # `${secret:NAME}` is a keyring lookup (D-Bus): fetched off the loop, before anything is expanded.
    secrets = await fetched(needed(*spec.command, *spec.env.values()), env)
    argv = [expand(a, env, f"{where}.command", secrets) for a in spec.command]
    extra = {k: expand(v, env, f"{where}.env.{k}", secrets) for k, v in spec.env.items()}
    if not argv or not argv[0]:
        raise AcpStartError(f"agent {agent}: `acp.command` is empty; name the program that speaks ACP")
    program = shutil.which(argv[0], path=command_env(extra)["PATH"])
    if program is None:
        raise AcpStartError(f"agent {agent}: {argv[0]!r} was not found: install it, or fix `acp.command` "
                            f"({shown(spec)})")
    jail = backend()
    if sandbox.enabled and (why := await trio.to_thread.run_sync(jail.unavailable, limiter=_BLOCKING)):
        raise AcpStartError(f"agent {agent}: not started: {why}")
    if not sandbox.enabled and not await session.confirm(
            agent, UNSANDBOXED, f"{shown(spec)}\n(starts the external agent without the sandbox: sandbox is off)"):
        raise AcpStartError(f"agent {agent}: not started: the sandbox is off and the user did not allow "
                            f"running it unsandboxed")
    own_home = home is None
    folder, lock = await trio.to_thread.run_sync(_make_home, home, spec.home_files, agent, limiter=_BLOCKING)
    fds: list[int] = []
    watch, seen = None, None
    try:
        command = ["/usr/bin/env", f"HOME={folder}", program, *argv[1:]]
        if sandbox.enabled:
            visible = [*reach, *_programs(program, argv[1:])]
            watch = guard.of(session)
            seen = await trio.to_thread.run_sync(watch.before, agent, (folder,), limiter=_BLOCKING)
            confined = await trio.to_thread.run_sync(
                lambda: confinement(session, cwd, spec.network, [folder], seen.read_only()), limiter=_BLOCKING)
            # a unix socket is how the agent reaches the room's bridge: allowed when there is one to reach
            fd = open_filter(spec.network or bool(reach))
            fds = [fd] if fd is not None else []
            confined = replace(confined, readable=(*confined.readable, *(p for p in visible if p.exists())),
                               limits=sandbox.limits.for_job(), seccomp=fd)
            command = jail.argv(command, confined)
        proc = await trio.lowlevel.open_process(
            command, cwd=cwd, env=command_env({**extra, "HOME": str(folder)}), stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, pass_fds=tuple(fds))
    except BaseException as exc:
        with trio.CancelScope(shield=True):  # it never ran: the watch ends, the home goes
            if watch is not None and seen is not None:
                await trio.to_thread.run_sync(lambda: watch.after(agent, seen), limiter=_BLOCKING)
            if own_home:
                await trio.to_thread.run_sync(homes.remove_folder, folder, limiter=_BLOCKING)
            if lock is not None:
                os.close(lock)
        if isinstance(exc, OSError):
            raise AcpStartError(f"agent {agent}: could not start {shown(spec)}: {exc.strerror or exc}") from None
        raise
    finally:
        for fd in fds:
            os.close(fd)
    return AgentProcess(proc, _Group(proc), folder, own_home, StderrTail(), watch, seen, lock)


def _programs(program: str, args: Sequence[str]) -> list[Path]:
    """What the command needs to see to run: its program and the files its arguments name (a script), each
    with the installation it loads its code from, and this Python's installation, its site-packages and this
    package (the bridge's relay and a Python agent run on it)."""
    named = [Path(program).resolve(), *(Path(a).resolve() for a in args if os.sep in a and os.path.isfile(a))]
    package = Path(__file__).resolve().parents[1]
    # The site-packages this Python imports from: a venv may borrow another's through a .pth file.
    libraries = [Path(p).resolve() for p in sys.path if Path(p).name in ("site-packages", "dist-packages")
                 and Path(p).is_dir()]
    ours = [Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), package, *libraries]
    return list(dict.fromkeys([*map(_installation, named), *ours]))


def _installation(path: Path) -> Path:
    """The folder `path`'s program loads the rest of its code from: for a file inside a node_modules tree
    (an npm package's entry script), the outermost node_modules folder, since node resolves a package's
    dependencies in every node_modules folder above it and npm hoists them to the top one; else the file."""
    parts = path.parts
    if "node_modules" in parts[:-1]:
        return Path(*parts[:parts.index("node_modules") + 1])
    return path


def _make_home(home: Path | None, files: Sequence[str], agent: str) -> tuple[Path, int | None]:
    """The agent's private HOME: `home` (kept by the caller, so the agent's own state survives a restart; held
    locked while the agent runs, which the returned descriptor does) or a new folder, with a copy of each of the
    user's `home_files` at the same place under it."""
    lock = None
    if home is None:
        folder = Path(tempfile.mkdtemp(prefix=f"orchestrator-acp-{agent}-"))
    else:
        folder = home
        try:
            lock = homes.hold(home)
        except OSError as exc:
            raise AcpStartError(f"agent {agent}: its HOME {home} cannot be used: {exc.strerror or exc}; remove "
                                f"it (`orchestrator agents prune` removes those of rooms that are gone)") from None
    mine = Path.home()
    try:
        for raw in files:
            source = Path(os.path.expanduser(raw))
            if not source.exists():
                raise AcpStartError(f"agent {agent}: acp.home_files: {raw} does not exist; log in with the agent "
                                    f"once, or remove it from the list")
            inside = source.relative_to(mine) if source.is_relative_to(mine) else Path(source.name)
            target = folder / inside
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
            else:
                shutil.copy2(source, target)
    except BaseException:
        if lock is not None:
            os.close(lock)
        if home is None:
            homes.remove_folder(folder)
        raise
    return folder, lock

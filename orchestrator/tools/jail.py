"""The OS sandbox every shell command runs in: what one command may touch (Confinement), the user's
sandbox settings, and the backends that enforce them (bubblewrap on Linux; one small interface)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal, Mapping, Protocol, Sequence

from orchestrator.tools.limits import KEYS as LIMIT_KEYS, LimitError, Limits, wrap
from orchestrator.tools.process import command_env

Network = Literal["ask", "allow", "deny"]
SANDBOX_HOME = "/tmp/home"  # inside the sandbox's private /tmp: empty for every command
# Of /var only the package databases (dpkg -l, rpm -q, apt-cache) and what some distributions keep their
# CA bundle and font cache in: the rest holds other programs' data (databases, mail, cron and print
# spools, logs, backups of /etc/shadow) and sockets to host services. /var/tmp is the jail's own /tmp.
SYSTEM_VISIBLE = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/srv",
                  "/nix", "/snap", "/run/systemd/resolve", "/var/lib/dpkg", "/var/lib/apt", "/var/lib/rpm",
                  "/var/lib/pacman", "/var/lib/ca-certificates", "/var/cache/fontconfig")


class SettingsError(ValueError):
    """A `sandbox:` setting that cannot be used; the message says which and what is allowed."""


@dataclass(frozen=True)
class Settings:
    """The user's `sandbox:` setting (config.toml, team or agent): on or explicitly off, how the
    network is granted, folders besides the workspace that commands may write, and each command's limits."""
    enabled: bool = True
    network: Network = "ask"
    writable: tuple[Path, ...] = ()
    limits: Limits = Limits()

    @classmethod
    def parse(cls, raw: object, *, base: Path | None = None) -> Settings:
        """From `off`, `on`, or a mapping {network: ask|allow|deny, writable: [paths], enabled: bool, and
        the limits: processes, memory, file_size, tmp, shm, cpu, job_cpu}."""
        if raw is None or raw == "on" or raw is True:
            return cls()
        if raw == "off" or raw is False:
            return cls(enabled=False)
        if not isinstance(raw, dict):
            raise SettingsError(f"sandbox: expected on, off or a mapping, got {raw!r}")
        unknown = set(raw) - {"enabled", "network", "writable", *LIMIT_KEYS}
        if unknown:
            raise SettingsError(f"sandbox: unknown key(s) {', '.join(sorted(map(str, unknown)))}; "
                                f"known: enabled, network, writable, {', '.join(LIMIT_KEYS)}")
        network = raw.get("network", "ask")
        if network not in ("ask", "allow", "deny"):
            raise SettingsError(f"sandbox.network: expected ask, allow or deny, got {network!r}")
        writable = raw.get("writable", [])
        if not isinstance(writable, list) or not all(isinstance(w, str) and w.strip() for w in writable):
            raise SettingsError("sandbox.writable: expected a list of folder paths")
        enabled = raw.get("enabled", True)
        if enabled not in (True, False, "on", "off"):
            raise SettingsError(f"sandbox.enabled: expected true or false, got {enabled!r}")
        try:
            limits = Limits().over(raw)
        except LimitError as exc:
            raise SettingsError(str(exc)) from None
        root = base or Path.cwd()
        return cls(enabled in (True, "on"), network,
                   tuple(Path(os.path.expanduser(w)) if os.path.isabs(os.path.expanduser(w)) else root / w
                         for w in writable), limits)

    def over(self, raw: object, *, base: Path | None = None) -> Settings:
        """A more specific setting (the team's over config.toml's, an agent's over the team's) written
        as `raw`: what it sets wins, what it leaves out is kept, writable folders add up."""
        if raw is None:
            return self
        given = Settings.parse(raw, base=base)
        keys = set(raw) if isinstance(raw, dict) else {"enabled"}
        return Settings(given.enabled if "enabled" in keys else self.enabled,
                        given.network if "network" in keys else self.network,
                        tuple(dict.fromkeys(self.writable + given.writable)),
                        self.limits.over(raw) if isinstance(raw, dict) else self.limits)


@dataclass(frozen=True)
class Confinement:
    """What one command may touch: the workspace and `writable` read-write, `readable` and the system's
    folders read-only, nothing else; `hidden` folders (homes, the app's data) within those are emptied."""
    workspace: Path
    cwd: Path
    network: bool = False
    writable: tuple[Path, ...] = ()
    readable: tuple[Path, ...] = ()  # the user's read grants
    hidden: tuple[Path, ...] = ()
    masked: tuple[Path, ...] = ()  # credential files and folders inside what stays visible
    protected: tuple[Path, ...] = ()  # read-only inside what is writable: git's files, editors' settings ...
    limits: Limits = Limits()  # what the command may use: processes, memory, file size, /tmp, CPU time
    seccomp: int | None = None  # an fd holding a seccomp program (seccomp.open_filter) for bubblewrap to load


class Backend(Protocol):
    """One OS sandbox. `unavailable()` says in one line why it cannot run here and how to enable it;
    `argv()` is the command line that runs `command` confined. A macOS sandbox-exec backend would build
    a profile from the same Confinement (deny default; file-write* only under workspace and writable;
    network* only when granted) and return ["sandbox-exec", "-p", profile, *command]."""
    name: str

    def unavailable(self) -> str | None: ...

    def argv(self, command: Sequence[str], c: Confinement) -> list[str]: ...


class Bubblewrap:
    name = "bubblewrap"

    def __init__(self, program: str | None):
        self.program = program  # None: not installed

    def unavailable(self) -> str | None:
        if self.program is None:
            return ("bubblewrap is not installed, so commands cannot be sandboxed: install it "
                    "(apt-get install bubblewrap / dnf install bubblewrap), or set `sandbox: off` to run "
                    "every command unsandboxed after asking")
        _sizes_tmpfs(self.program)  # asked here, off the event loop, so argv() finds it known
        return _probe(self.program)

    def argv(self, command: Sequence[str], c: Confinement) -> list[str]:
        assert self.program is not None, "argv() of a bubblewrap that is not installed"
        a = [self.program, "--die-with-parent", "--unshare-all", "--cap-drop", "ALL"]
        if c.network:
            a.append("--share-net")
        if c.seccomp is not None:
            a += ["--seccomp", str(c.seccomp)]
        # Only the system's programs and settings are visible, read-only; the rest of the file system
        # (other projects, mounted disks, the user's files) does not exist in here.
        for p in SYSTEM_VISIBLE:
            if os.path.lexists(p):
                a += ["--ro-bind" if not os.path.islink(p) else "--symlink",
                      *(([os.readlink(p)] if os.path.islink(p) else [p])), p]
        a += ["--symlink", "../tmp", "/var/tmp", "--symlink", "../run", "/var/run"]
        # --dev makes /dev an unsized tmpfs: /dev/shm gets its own, sized, and /dev itself is read-only
        # (its device nodes still work) so neither it nor the sized /tmp can be bypassed to fill memory.
        a += ["--dev", "/dev", *self._size(c.limits.shm), "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
              "--proc", "/proc", *self._size(c.limits.tmp), "--tmpfs", "/tmp"]
        for r in c.readable:
            a += ["--ro-bind", str(r), str(r)]
        for w in (c.workspace, *c.writable):
            a += ["--bind", str(w), str(w)]
        # After the writable binds, so a writable folder cannot uncover them; bound by name, so a rename
        # inside the command cannot move the protection away (a mount point cannot be renamed).
        for kept in c.protected:
            if os.path.lexists(kept):
                a += ["--ro-bind", str(kept), str(kept)]
        shown = (c.workspace, *c.writable, *c.readable)
        emptied = []
        for h in c.hidden:  # the app's data or a home inside a visible folder: emptied
            if os.path.isdir(h) and not os.path.islink(h) and any(h.is_relative_to(v) and h != v for v in shown):
                emptied.append(h)
                a += ["--tmpfs", str(h)]
        for m in c.masked:
            if os.path.isdir(m) and not os.path.islink(m):
                emptied.append(m)
                a += ["--tmpfs", str(m)]
            elif os.path.lexists(m):
                a += ["--ro-bind", "/dev/null", str(m)]
        # The external packages' commands: after the emptied folders (the app's data may be one of them),
        # read-only, their shims first on PATH; what the user installed, never what a command wrote.
        shims, enabled = (Path(os.path.realpath(p)) for p in package_commands())
        if shims.is_dir() and enabled.is_dir():
            a += ["--ro-bind", str(enabled), str(enabled), "--ro-bind", str(shims), str(shims),
                  "--setenv", "PATH", f"{shims}{os.pathsep}{command_env()['PATH']}"]
            # a package's own dependency step writes its folder: bound again over the read-only one
            a += [arg for w in (c.workspace, *c.writable) if w.is_relative_to(enabled) for arg in ("--bind", str(w), str(w))]
            a += [arg for kept in c.protected if kept.is_relative_to(enabled) and os.path.lexists(kept)
                  for arg in ("--ro-bind", str(kept), str(kept))]
        # Emptied folders are read-only too (an unsized tmpfs is memory to fill past /tmp's size); after
        # all of them, so one inside another still finds its mount point made.
        for e in emptied:
            a += ["--remount-ro", str(e)]
        a += ["--dir", SANDBOX_HOME]
        a += ["--remount-ro", "/"]  # last: the root bubblewrap made mount points in is an unsized tmpfs too
        a += ["--setenv", "HOME", SANDBOX_HOME, "--setenv", "TMPDIR", "/tmp", "--chdir", str(c.cwd), "--"]
        return a + wrap(command, c.limits)

    def _size(self, n: int | None) -> list[str]:
        return ["--size", str(n)] if n is not None and _sizes_tmpfs(self.program) else []


def package_commands(env: Mapping[str, str] | None = None) -> tuple[Path, Path]:
    """The external packages' command shims and the enabled packages they run (`orchestrator packages`
    writes both, under the user's data folder): every sandboxed command sees them, read-only."""
    env = os.environ if env is None else env
    data = Path(env.get("XDG_DATA_HOME") or Path(env.get("HOME") or Path.home()) / ".local" / "share")
    root = data / "orchestrator" / "packages"
    return root / "bin", root / "enabled"


class Missing:
    """No sandbox for this platform yet."""
    name = "none"

    def __init__(self, why: str):
        self.why = why

    def unavailable(self) -> str | None:
        return self.why

    def argv(self, command: Sequence[str], c: Confinement) -> list[str]:
        raise RuntimeError(self.why)


@cache
def _sizes_tmpfs(program: str) -> bool:
    """Does this bubblewrap take --size (0.7 and later)? An older one mounts its tmpfs unsized."""
    try:
        said = subprocess.run([program, "--help"], stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return b"--size" in said.stdout + said.stderr


@cache
def _probe(program: str) -> str | None:
    """Can bubblewrap make its namespaces here? Asked once per process (about 5 ms)."""
    try:
        done = subprocess.run([program, "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "true"],
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap ({program}) could not start: {exc}; set `sandbox: off` to run commands unsandboxed"
    if done.returncode == 0:
        return None
    said = done.stderr.decode(errors="replace").strip().splitlines()
    return (f"bubblewrap cannot create its namespaces here ({said[-1] if said else 'exit ' + str(done.returncode)}): "
            "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 "
            "kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile for bwrap), run in a "
            "container started with --privileged or seccomp allowing unshare, or set `sandbox: off`")


@cache
def backend() -> Backend:
    """This platform's sandbox."""
    if sys.platform.startswith("linux"):
        return Bubblewrap(shutil.which("bwrap"))
    if sys.platform == "darwin":
        return Missing("no sandbox backend for macOS yet (a sandbox-exec profile is planned); set `sandbox: off` "
                       "to run every command unsandboxed after asking")
    return Missing(f"no sandbox backend for {sys.platform}; set `sandbox: off` to run every command "
                   "unsandboxed after asking")

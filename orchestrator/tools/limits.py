"""What one sandboxed command may use (Limits: processes, memory, file size, /tmp, /dev/shm, CPU time),
the bash prefix that sets them inside the jail, and which limit a failed command ran into."""
from __future__ import annotations

import re
import resource
import shutil
import signal
from dataclasses import dataclass, fields, replace
from typing import Mapping, Sequence

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
BASH = shutil.which("bash")  # the prefix is bash: `ulimit -u` differs between shells
CPU_GRACE = 5  # seconds between SIGXCPU (which names the limit) and the kernel's SIGKILL


class LimitError(ValueError):
    """A limit that cannot be used; the message names the key and what it takes."""


@dataclass(frozen=True)
class Limits:
    """What one command may use; None is unlimited. Sizes in bytes; CPU in seconds of one process
    (`job_cpu` for background jobs, which may legitimately run for hours)."""
    processes: int | None = 256
    memory: int | None = 2 * GIB
    file_size: int | None = 1 * GIB
    tmp: int | None = 1 * GIB
    shm: int | None = 256 * MIB
    cpu: int | None = 600
    job_cpu: int | None = 4 * 3600
    disk: int | None = 4 * GIB  # written to the workspace's file system, seen as its free space shrinking

    @classmethod
    def unlimited(cls) -> Limits:
        return cls(**{f.name: None for f in fields(cls)})

    def over(self, raw: Mapping[str, object]) -> Limits:
        """These limits with the keys of `raw` (a `sandbox:` mapping) set; other keys are not looked at."""
        given = {k: _parse(k, v) for k, v in raw.items() if k in KEYS}
        return replace(self, **given)

    def for_job(self) -> Limits:
        return replace(self, cpu=self.job_cpu)


KEYS = tuple(f.name for f in fields(Limits))
_SIZES = {"memory": 16 * MIB, "file_size": MIB, "tmp": MIB, "shm": MIB, "disk": MIB}  # the least that still runs a shell
_UNITS = {"": 1, "b": 1, "k": KIB, "kb": KIB, "kib": KIB, "m": MIB, "mb": MIB, "mib": MIB,
          "g": GIB, "gb": GIB, "gib": GIB, "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}
_TIMES = {"": 1, "s": 1, "m": 60, "min": 60, "h": 3600}


def _parse(key: str, value: object) -> int | None:
    if value is None or value is False or value in ("unlimited", "off"):
        return None
    if key in _SIZES:
        n, least, said = _amount(value, _UNITS), _SIZES[key], "a size such as 512M or 2G, or unlimited"
    elif key in ("cpu", "job_cpu"):
        n, least, said = _amount(value, _TIMES), 1, "CPU seconds such as 600, 10m or 4h, or unlimited"
    else:
        n, least, said = (value if isinstance(value, int) and not isinstance(value, bool) else None), 8, \
            "a number of processes, or unlimited"
    if n is None or n < least:
        raise LimitError(f"sandbox.{key}: expected {said} (at least {_shown(key, least)}), got {value!r}")
    return n


def _amount(value: object, units: dict[str, int]) -> int | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", value) if isinstance(value, str) else None
    if match is None or match[2].lower() not in units:
        return None
    return int(float(match[1]) * units[match[2].lower()])


def _shown(key: str, n: int | None) -> str:
    if n is None:
        return "unlimited"
    if key in _SIZES:
        unit, name = next((u, s) for u, s in ((GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB"), (1, "bytes")) if n >= u)
        return f"{n / unit:g} {name}"
    return f"{n} s" if key in ("cpu", "job_cpu") else str(n)


# --- inside the jail: a bash prefix --------------------------------------------------------------

# Set after bubblewrap made the user namespace, so RLIMIT_NPROC counts this command's processes only,
# not the user's others. Memory is RLIMIT_DATA, not RLIMIT_AS: V8, wasm and Go reserve large
# inaccessible regions that RLIMIT_AS would count. No core files land in the workspace. The shell's
# own notices go to /dev/null and the command keeps the real stderr. After a failure it says which
# sized tmpfs is full (the kernel's ENOSPC names no file system) by writing a byte there: a builtin,
# because a command at the process limit may have left no room to fork, and the jail's tmpfs are
# thrown away a moment later.
_SET = "ulimit -c 0{sets} || exit 126\n"
_WATCH = """exec 3>&2 2>/dev/null
"$@" 2>&3 3>&-
rc=$?
if [ $rc -ne 0 ]; then
  for d in {tmpfs}; do
    {{ printf x > "$d/.sandbox-probe"; }} 2>/dev/null || echo "[sandbox: $d is full]" >&3
  done
fi
exit $rc"""


def wrap(command: Sequence[str], limits: Limits) -> list[str]:
    """`command` run by the bash prefix that sets `limits`; as it is where there is nothing to set."""
    sized = [d for d, n in (("/tmp", limits.tmp), ("/dev/shm", limits.shm)) if n is not None]
    sets = _ulimits(limits)
    if BASH is None or not (sets or sized):
        return list(command)
    script = _SET.format(sets=sets) + (_WATCH.format(tmpfs=" ".join(sized)) if sized else 'exec "$@"')
    return [BASH, "-c", script, "sandbox", *command]


def _ulimits(limits: Limits) -> str:
    """ulimit options, each clamped to the hard limit this process has (a user cannot raise it)."""
    hard = [("-u", resource.RLIMIT_NPROC, limits.processes, 1), ("-d", resource.RLIMIT_DATA, limits.memory, KIB),
            ("-f", resource.RLIMIT_FSIZE, limits.file_size, KIB)]  # bash counts -d and -f in KiB
    opts = [f"{flag} {_clamped(res, n) // unit}" for flag, res, n, unit in hard if n is not None]
    if limits.cpu is None:
        return f" {' '.join(opts)}" if opts else ""
    # Soft below hard: SIGXCPU at the soft limit says why; SIGKILL at the hard one ends a process that ignores it.
    cpu_hard = _clamped(resource.RLIMIT_CPU, limits.cpu + CPU_GRACE)
    opts.append(f"-t {cpu_hard}")
    return f" {' '.join(opts)} && ulimit -S -t {min(limits.cpu, cpu_hard)}"


def _clamped(res: int, n: int) -> int:
    hard = resource.getrlimit(res)[1]
    return n if hard == resource.RLIM_INFINITY else min(n, hard)


# --- afterwards: which limit ----------------------------------------------------------------------

_FULL = re.compile(r"^\[sandbox: (/tmp|/dev/shm) is full\]$", re.M)
_SIGNALS: dict[int, str] = {signal.SIGXCPU: "cpu", signal.SIGXFSZ: "file_size", signal.SIGSYS: "syscall"}
_TEXT = (  # what programs print when the kernel refuses them at a limit
    ("cpu", re.compile(r"CPU time limit exceeded")),
    ("file_size", re.compile(r"File size limit exceeded|File too large|\bEFBIG\b")),
    ("memory", re.compile(r"MemoryError|Cannot allocate memory|out of memory|bad_alloc|\bENOMEM\b|"
                          r"memory allocation of \d+ bytes failed|cannot allocate \d+ bytes", re.I)),
    ("processes", re.compile(r"Resource temporarily unavailable|can't start new thread|\bEAGAIN\b|"
                             r"Cannot fork|fork failed", re.I)),
)
_FORK_RETRY = re.compile(r"fork: retry: Resource temporarily unavailable")  # bash, retrying until stopped


def ran_into(returncode: int, output: str, limits: Limits, counted: frozenset[str] = frozenset(),
             timed_out: bool = False) -> str | None:
    """The limit of `limits` a command that failed (`returncode`, its `output`) went over, or None. One
    that timed out is named a limit's only on sure signs: a long run may print anything on the way."""
    if returncode == 0:
        return None
    key: str | None
    if timed_out:
        key = next((k for k in ("processes", "memory") if k in counted), None) or \
            ("processes" if _FORK_RETRY.search(output) else None)
    else:
        key = _evidence(returncode, output, counted)
    return key if key == "syscall" or (key is not None and getattr(limits, key) is not None) else None


def _evidence(returncode: int, output: str, counted: frozenset[str]) -> str | None:
    """The surest sign first: what a cgroup's counters saw (`counted`: "processes", "memory"); then a
    signal of the kernel's; then the prefix's note of a full /tmp or /dev/shm; last what the program printed."""
    for key in ("processes", "memory"):
        if key in counted:
            return key
    sig = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    if sig in _SIGNALS:
        return _SIGNALS[sig]
    if full := _FULL.search(output):
        return "tmp" if full[1] == "/tmp" else "shm"
    return next((key for key, said in _TEXT if said.search(output)), None)


_NAMES = {"processes": "process limit", "memory": "memory limit", "file_size": "file size limit",
          "tmp": "/tmp size", "shm": "/dev/shm size", "cpu": "CPU time limit",
          "disk": "disk limit (what one command may write to the workspace's disk)"}


def stopped(key: str, limits: Limits, *, job: bool = False) -> str:
    """The line the model reads about the limit `key` (from ran_into) of `limits`."""
    if key == "syscall":
        return ("[stopped: the sandbox refuses this program's system calls (32-bit and x32 programs cannot "
                "run without the network)]")
    setting = "job_cpu" if key == "cpu" and job else key
    per = " per process" if key == "cpu" else ""
    return (f"[stopped: over the sandbox's {_NAMES[key]} ({_shown(key, getattr(limits, key))}{per}); "
            f"raise [sandbox] {setting} in config.toml]")

"""git, run as if every repository were written by an attacker: no hooks, no fsmonitor, no links or
filters on checkout, objects checked as they arrive, only the source's own protocol, and no prompts.

Blocking: call these through a thread from trio code. A package's tree is read from git's objects
(ls-tree, cat-file) before its files are written, so a refused commit never reaches the disk as files;
a fetch is watched as it writes those objects and stopped, its objects removed, past a size cap.
"""
from __future__ import annotations

import os
import re
import selectors
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from orchestrator.core.errors import InputError

TIMEOUT = 600.0  # seconds for one git command; a stalled server must not hold the command forever
# Seconds between looks at a watched fetch's objects: a fast source overshoots the cap by what it sends in
# that time, which is removed with the rest.
POLL = 0.1
DRAIN = 2.0  # seconds for the stopped group's stderr to close; one that left the group must not hold us
STDERR_TAIL = 16_384  # bytes of git's stderr kept for its last line: a server may send endless messages
_REF = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._/-]{0,254}")
_COMMIT = re.compile(r"[0-9a-f]{7,64}")  # a commit id, whole or abbreviated (SHA-1 or SHA-256)
_SOURCE = "refs/orchestrator-source/"  # where a commit id's search puts the source's refs, removed after
# Given on every call and kept in the package's own config, so the user running git there later is safe too.
SAFE = {
    "core.hooksPath": "/dev/null",
    "core.fsmonitor": "false",
    "core.symlinks": "false",  # a link that slipped past the checks is written as a plain file
    "core.autocrlf": "false",  # as it is: no line-ending rewriting
    "core.untrackedCache": "false",
    "transfer.fsckObjects": "true",
    "fetch.fsckObjects": "true",
    # what arrives is kept as one pack written as it comes (never unpacked in memory first), so a watched
    # fetch's size is on disk where the cap sees it
    "fetch.unpackLimit": "1",
    "submodule.recurse": "false",
    "fetch.recurseSubmodules": "false",
    "protocol.allow": "never",
    "gc.auto": "0",
    "maintenance.auto": "false",
    "advice.detachedHead": "false",
}
# Highest-priority attributes: no eol conversion, clean/smudge filter, ident or re-encoding on checkout.
ATTRIBUTES = "* -text -filter -ident -working-tree-encoding\n"


class GitError(InputError):
    """git could not fetch or check out a package; the message is git's last line and what to do."""


class OverCap(GitError):
    """git wrote more than it may into the folder it was watched in: it was stopped, what it wrote removed."""

    def __init__(self, command: str, most: int):
        super().__init__(f"git {command} was stopped: what it wrote passed {most:,} bytes")
        self.most = most


@dataclass(frozen=True)
class Entry:
    mode: str  # 100644, 100755, 120000 (a link), 160000 (a submodule), ...
    kind: str  # blob, commit
    object: str
    size: int  # -1 for a submodule
    path: str


def _config(protocol: str) -> list[str]:
    pairs = {**SAFE, f"protocol.{protocol}.allow": "always"}
    return [arg for k, v in pairs.items() for arg in ("-c", f"{k}={v}")]


# The user's own ways to reach a host; every other GIT_ variable (GIT_DIR, GIT_CONFIG_*, ...) is dropped.
USER_GIT = ("GIT_SSH", "GIT_SSH_COMMAND", "GIT_SSH_VARIANT", "GIT_ASKPASS")


def _env(protocol: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in USER_GIT}
    env.update(GIT_ALLOW_PROTOCOL=protocol, GIT_TERMINAL_PROMPT="0", GIT_PROTOCOL_FROM_USER="0",
               GIT_ATTR_NOSYSTEM="1", LC_ALL="C")
    return env


def _argv(folder: Path, args: tuple[str, ...], protocol: str) -> list[str]:
    return ["git", *_config(protocol), "-C", str(folder), *args]


def _failed(args: tuple[str, ...], returncode: int, stderr: bytes) -> GitError:
    said = [line for line in stderr.decode(errors="replace").splitlines() if line.strip()]
    return GitError(f"git {args[0]} failed: {said[-1] if said else f'exit {returncode}'}")


def _too_slow(args: tuple[str, ...]) -> GitError:
    return GitError(f"git {args[0]} took over {TIMEOUT:g} s and was stopped; try again later")


def run_input(folder: Path, data: bytes, *args: str) -> None:
    """A local git command reading `data` on its stdin."""
    try:
        done = subprocess.run(_argv(folder, args, "none"), input=data, capture_output=True, env=_env("none"),
                              timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        raise _too_slow(args) from None
    if done.returncode != 0:
        raise _failed(args, done.returncode, done.stderr)


def run(folder: Path, *args: str, protocol: str = "none", check: bool = True) -> subprocess.CompletedProcess[bytes]:
    """git `args` in `folder`; `protocol` is the one transport it may use ("none": a local command)."""
    try:
        done = subprocess.run(_argv(folder, args, protocol), stdin=subprocess.DEVNULL, capture_output=True,
                              env=_env(protocol), timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        raise _too_slow(args) from None
    if check and done.returncode != 0:
        raise _failed(args, done.returncode, done.stderr)
    return done


def run_capped(folder: Path, *args: str, protocol: str, watch: Path, most: int) -> None:
    """git `args` as run() runs them, stopped (OverCap) once it has written files under `watch` and they hold
    more than `most` bytes with what was there before. Stopped, timed out or failed, whatever it wrote under
    `watch` is removed; its whole process group (a fetch's index-pack, upload-pack, ssh) ends with it.
    Only the last line of its stderr is kept, for the error."""
    before = _files(watch)
    held = sum(before.values())
    proc = subprocess.Popen(_argv(folder, args, protocol), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=_env(protocol), start_new_session=True)
    assert proc.stderr is not None  # stderr=PIPE
    stopped: GitError | None = None
    tail = b""
    try:
        with selectors.DefaultSelector() as stderr:
            stderr.register(proc.stderr, selectors.EVENT_READ)
            deadline = time.monotonic() + TIMEOUT
            while not _exited(proc):
                tail = _read(stderr, time.monotonic() + POLL, tail)
                if _written(watch, before, held) > most:
                    stopped = OverCap(args[0], most)
                elif time.monotonic() > deadline:
                    stopped = _too_slow(args)
                if stopped is not None:
                    break
            # The leader is not reaped yet, so its group id is still its own: nothing else can be signalled.
            _kill_group(proc.pid)
            # The pipe closes once every process holding it has exited, so nothing writes under `watch` after.
            ends = time.monotonic() + DRAIN
            while stderr.get_map() and time.monotonic() < ends:
                tail = _read(stderr, ends, tail)
    finally:
        _kill_group(proc.pid)  # an error above must not leave the group running either
        returncode = proc.wait()
        proc.stderr.close()
    if stopped is None and _written(watch, before, held) > most:
        stopped = OverCap(args[0], most)  # it finished between two looks
    if stopped is None and returncode != 0:
        stopped = _failed(args, returncode, tail)
    if stopped is not None:
        _remove_new(watch, before)
        raise stopped


def _exited(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the child has exited, left unreaped where the platform allows (so its group id stays its own)."""
    if not hasattr(os, "waitid"):
        return proc.poll() is not None  # reaped: the group id is then only probably still its own
    return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # the group has ended (some systems say EPERM for zombies)
        pass


def _read(stderr: selectors.BaseSelector, until: float, tail: bytes) -> bytes:
    """What stderr says until the time `until` (or its end), kept to its last STDERR_TAIL bytes."""
    while stderr.get_map() and (left := until - time.monotonic()) > 0:
        for key, _ in stderr.select(left):
            chunk = os.read(key.fd, 65536)
            if not chunk:  # closed: the group has likely ended, which the caller looks at now
                stderr.unregister(key.fileobj)
                return tail
            tail = (tail + chunk)[-STDERR_TAIL:]
    if (left := until - time.monotonic()) > 0:
        time.sleep(left)
    return tail


def _files(folder: Path) -> dict[str, int]:
    """Every file and folder under `folder` (its own path included) with its size in bytes (0: a folder)."""
    found = {str(folder): 0}
    for top, dirs, files in os.walk(folder):
        for name in dirs:
            found[os.path.join(top, name)] = 0
        for name in files:
            path = os.path.join(top, name)
            try:
                found[path] = os.lstat(path).st_size
            except FileNotFoundError:  # renamed by git (a temporary pack made final) between the two calls
                pass
    return found


def _written(folder: Path, before: dict[str, int], held: int) -> int:
    """Bytes under `folder` now, counted as `held` (what was there) and the files that were not; 0 while
    nothing new is there, so a folder already over the cap does not stop a command that adds nothing."""
    new = sum(size for path, size in _files(folder).items() if path not in before)
    return held + new if new else 0


def _remove_new(folder: Path, before: dict[str, int]) -> None:
    """Remove every file and folder that appeared under `folder` since `before`."""
    for top, dirs, files in os.walk(folder):
        for name in files:
            if (path := os.path.join(top, name)) not in before:
                Path(path).unlink(missing_ok=True)
        for name in list(dirs):
            if (path := os.path.join(top, name)) not in before:
                shutil.rmtree(path, ignore_errors=True)
                dirs.remove(name)


def init(folder: Path) -> None:
    """An empty repository in `folder` (no template, so no sample hooks), configured safe for good."""
    folder.mkdir(parents=True, mode=0o700)
    run(folder, "init", "-q", "--template=", ".")
    for key, value in SAFE.items():
        if not key.startswith(("protocol.", "transfer.", "fetch.", "advice.")):
            run(folder, "config", key, value)
    (folder / ".git" / "info").mkdir(exist_ok=True)
    (folder / ".git" / "info" / "attributes").write_text(ATTRIBUTES)
    # what the dependency step makes is the package's own, never something a pull should meet
    (folder / ".git" / "info" / "exclude").write_text("/.venv/\n/node_modules/\n")


def check_ref(ref: str) -> str:
    """`ref` as `--ref` may give it: a branch, a tag or a commit id; InputError for anything else (a refspec
    would write refs of its own, an option would be read as one)."""
    if ref and (not _REF.fullmatch(ref) or ".." in ref or ref.endswith((".lock", "/", ".")) or "//" in ref):
        raise InputError(f"--ref {ref!r}: give a branch, a tag or a commit id (letters, digits and . _ / -, "
                         "not starting with - or /)")
    return ref


def fetch(folder: Path, url: str, ref: str, protocol: str, *, most: int) -> str:
    """Fetch `ref` ("" the remote's default branch; a branch, a tag or a commit id) of `url` and return its
    commit; nothing is checked out. OverCap once the repository's objects, what was there and what it brings,
    pass `most` bytes: git is stopped and what it brought removed, so an update cannot grow a package past the
    cap step by step."""
    watch = folder / ".git" / "objects"
    try:
        run_capped(folder, "fetch", "--quiet", "--no-tags", "--no-recurse-submodules", "--", url,
                   check_ref(ref) or "HEAD", protocol=protocol, watch=watch, most=most)
    except OverCap:
        raise
    except GitError:
        if not _COMMIT.fullmatch(ref):
            raise
        return _fetch_commit(folder, url, ref, protocol, watch, most)
    return run(folder, "rev-parse", "--verify", "FETCH_HEAD^{commit}").stdout.decode().strip()


def _fetch_commit(folder: Path, url: str, ref: str, protocol: str, watch: Path, most: int) -> str:
    """A commit id the server would not send by its id (most allow only what a branch or tag names): what its
    branches and tags reach is fetched, under the same cap, and the commit must be among it."""
    run_capped(folder, "fetch", "--quiet", "--no-tags", "--no-recurse-submodules", "--", url,
               f"+refs/heads/*:{_SOURCE}heads/*", f"+refs/tags/*:{_SOURCE}tags/*", protocol=protocol,
               watch=watch, most=most)
    try:
        found = run(folder, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
    finally:  # the source's branches and tags are not the package's: only their objects stay
        names = run(folder, "for-each-ref", "--format=delete %(refname)", _SOURCE).stdout
        run_input(folder, names, "update-ref", "--stdin")
    commit = found.stdout.decode().strip()
    if found.returncode != 0 or not commit.startswith(ref):
        raise GitError(f"git fetch failed: no commit {ref} is on a branch or tag of the source")
    return commit


def tree(folder: Path, commit: str) -> list[Entry]:
    """Every entry of the commit's tree, recursively, with blob sizes."""
    out = run(folder, "ls-tree", "-r", "-l", "-z", "--full-tree", commit).stdout
    entries = []
    for record in out.split(b"\0"):
        if not record:
            continue
        meta, _, path = record.partition(b"\t")
        mode, kind, obj, size = meta.decode().split()
        entries.append(Entry(mode, kind, obj, -1 if size == "-" else int(size), os.fsdecode(path)))
    return entries


def blob(folder: Path, obj: str) -> bytes:
    return run(folder, "cat-file", "blob", obj).stdout


def submodule_urls(folder: Path, gitmodules: str) -> list[str]:
    """The url of every submodule .gitmodules declares, as git itself parses the blob."""
    done = run(folder, "config", "--blob", gitmodules, "-z", "--get-regexp", r"^submodule\..*\.url$", check=False)
    if done.returncode not in (0, 1):  # 1: no url at all
        raise GitError("git config failed: .gitmodules cannot be read")
    return [item.partition(b"\n")[2].decode(errors="replace") for item in done.stdout.split(b"\0") if item]


def is_ancestor(folder: Path, old: str, new: str) -> bool:
    return run(folder, "merge-base", "--is-ancestor", old, new, check=False).returncode == 0


def checkout(folder: Path, commit: str) -> None:
    """Write the commit's files (the tree passed the checks); fails rather than overwrite a changed file."""
    run(folder, "checkout", "--quiet", "--detach", commit)


def changed(folder: Path) -> list[str]:
    """Tracked files changed in the working tree (a dependency step may have written them)."""
    out = run(folder, "status", "--porcelain", "-z", "--untracked-files=no").stdout
    return [os.fsdecode(r[3:]) for r in out.split(b"\0") if r]

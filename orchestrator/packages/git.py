"""git, run as if every repository were written by an attacker: no hooks, no fsmonitor, no links or
filters on checkout, objects checked as they arrive, only the source's own protocol, and no prompts.

Blocking: call these through a thread from trio code. A package's tree is read from git's objects
(ls-tree, cat-file) before its files are written, so a refused commit never reaches the disk as files.
"""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from orchestrator.core.errors import InputError

TIMEOUT = 600.0  # seconds for one git command; a stalled server must not hold the command forever
# Given on every call and kept in the package's own config, so the user running git there later is safe too.
SAFE = {
    "core.hooksPath": "/dev/null",
    "core.fsmonitor": "false",
    "core.symlinks": "false",  # a link that slipped past the checks is written as a plain file
    "core.autocrlf": "false",  # as it is: no line-ending rewriting
    "core.untrackedCache": "false",
    "transfer.fsckObjects": "true",
    "fetch.fsckObjects": "true",
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


def run(folder: Path, *args: str, protocol: str = "none", check: bool = True) -> subprocess.CompletedProcess[bytes]:
    """git `args` in `folder`; `protocol` is the one transport it may use ("none": a local command)."""
    argv = ["git", *_config(protocol), "-C", str(folder), *args]
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, env=_env(protocol),
                              timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} took over {TIMEOUT:g} s and was stopped; try again later") from None
    if check and done.returncode != 0:
        said = [line for line in done.stderr.decode(errors="replace").splitlines() if line.strip()]
        raise GitError(f"git {args[0]} failed: {said[-1] if said else f'exit {done.returncode}'}")
    return done


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


def fetch(folder: Path, url: str, ref: str, protocol: str) -> str:
    """Fetch `ref` ("" the remote's default branch) of `url` and return its commit; nothing is checked out."""
    run(folder, "fetch", "--quiet", "--no-tags", "--no-recurse-submodules", "--", url, ref or "HEAD",
        protocol=protocol)
    return run(folder, "rev-parse", "--verify", "FETCH_HEAD^{commit}").stdout.decode().strip()


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

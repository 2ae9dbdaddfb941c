"""A package's commit, judged from git's objects before any of its files is written: the checks that
refuse it (links, submodules over other protocols, size, and the size of its history as it arrives) and
what it is (skill-form, CLI-form, both), with the dependency step its files call for.
"""
from __future__ import annotations

import hashlib
import json
import posixpath
import re
import shlex
import shutil
import tomllib
from dataclasses import dataclass, field
from typing import Callable

from orchestrator.core.errors import InputError
from orchestrator.packages.git import Entry
from orchestrator.packages.registry import Command
from orchestrator.packages.source import ALLOWED, classify

MAX_BYTES = 256 * 1024 * 1024  # the files of one commit, in all
MAX_FILES = 20_000
# What a package's git objects may take on disk, checked while they are fetched, before the tree can be.
# A fetch brings the whole history, every version of every file (compressed), which for a package with a
# long life is larger than its one tree: four trees' worth leaves room for that and still bounds what a
# hostile or huge source can fill the disk with.
MAX_HISTORY = 4 * MAX_BYTES
LINK, GITLINK = "120000", "160000"
COMMAND_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
SKILL_FILES = ("SKILL.md", "skill.md")
SKILL_DEPTH = 5  # folders below the package's top a skill folder may sit at
# The files the dependency step reads: when one of them changes, the user is asked again.
DEPENDENCY_FILES = ("pyproject.toml", "setup.py", "setup.cfg", "requirements.txt", "package.json",
                    "package-lock.json", "npm-shrinkwrap.json")


class PackageRefused(InputError):
    """A package that is unsafe to keep; nothing of its files was written, or they were removed."""


def check(entries: list[Entry], submodule_urls: Callable[[str], list[str]]) -> None:
    """Refuse the commit (PackageRefused, one line) when its tree holds a symbolic link, a submodule over
    a protocol outside the allow-list, or more files or bytes than a package may have."""
    links = [e.path for e in entries if e.mode == LINK]
    if links:
        more = f" and {len(links) - 1} more" if len(links) > 1 else ""
        raise PackageRefused(f"the package holds a symbolic link ({links[0]}{more}), which could lead "
                             "a reader to a file outside it")
    if len(entries) > MAX_FILES:
        raise PackageRefused(f"the package has {len(entries)} files, over {MAX_FILES}")
    total = sum(max(e.size, 0) for e in entries)
    if total > MAX_BYTES:
        raise PackageRefused(f"the package's files hold {_size(total)}, over the {_size(MAX_BYTES)} a package "
                             "may have")
    if any(e.mode == GITLINK for e in entries):
        gitmodules = next((e for e in entries if e.path == ".gitmodules" and e.kind == "blob"), None)
        urls = submodule_urls(gitmodules.object) if gitmodules else []
        for url in urls:
            if why := refused_url(url):
                raise PackageRefused(f"a submodule points at {url!r} ({why})")


def history_refused(most: int) -> PackageRefused:
    """The refusal of a source whose git objects passed `most` bytes as they arrived (git.OverCap)."""
    return PackageRefused(f"its git history passed {_size(most)}, the cap on a package's history, so the download "
                          "was stopped (to take only its current files, commit a copy of them to a new "
                          "repository and add that)")


def _size(n: int) -> str:
    if n >= 2**30:
        return f"{n / 2**30:.1f} GiB"
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n:,} bytes"


def refused_url(url: str) -> str:
    """Why a submodule's url is outside the allow-list ("" when it is not). Relative urls resolve
    against the package's own source, so they share its protocol."""
    if url.startswith(("./", "../")):
        return ""
    why = classify(url)[1]
    return f"{why}; allowed protocols: {', '.join(ALLOWED)}" if why else ""


@dataclass
class Found:
    """What a commit's tree makes of the package."""
    skill_roots: list[str] = field(default_factory=list)  # "" when the package is itself one skill
    skills: list[str] = field(default_factory=list)
    commands: dict[str, Command] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    deps_command: str = ""
    deps_files: str = ""

    @property
    def kinds(self) -> list[str]:
        return [k for k, has in (("skills", self.skills), ("commands", self.commands)) if has]


def detect(entries: list[Entry], read: Callable[[Entry], bytes]) -> Found:
    """Skill folders, entry points and the dependency step of a tree that passed check()."""
    found = Found()
    blobs = {e.path: e for e in entries if e.kind == "blob"}
    for path in sorted(blobs):
        folder, name = posixpath.split(path)
        if name not in SKILL_FILES or "node_modules" in path.split("/") or folder.count("/") >= SKILL_DEPTH:
            continue
        if folder in found.skills:
            continue
        found.skills.append(folder or ".")
        root = "" if not folder else posixpath.dirname(folder) or "."
        if root not in found.skill_roots:
            found.skill_roots.append(root)
    top = {p: e for p, e in blobs.items() if "/" not in p}
    project = _toml(top.get("pyproject.toml"), read, found.notes)
    for name, _ in sorted(((project.get("project") or {}).get("scripts") or {}).items()):
        _add(found, name, Command(target=f".venv/bin/{name}", needs_deps=True, origin="pyproject.toml"))
    manifest = _json(top.get("package.json"), read, found.notes)
    bins = manifest.get("bin")
    if isinstance(bins, str):
        bins = {str(manifest.get("name", "")).rsplit("/", 1)[-1]: bins}
    for name, target in sorted((bins or {}).items()) if isinstance(bins, dict) else ():
        rel = posixpath.normpath(str(target))
        if rel.startswith("../") or rel.startswith("/") or rel not in blobs:
            found.notes.append(f"package.json's bin {name!r}: {target!r} is not a file of the package; left out")
            continue
        _add(found, name, Command(target=rel, via="node", origin="package.json"))
    for path, e in sorted(blobs.items()):
        if path.startswith("bin/") and path.count("/") == 1 and e.mode == "100755":
            _add(found, path[4:], Command(target=path, origin="bin/"))
    found.deps_command = _deps_command(project, manifest, top, found.notes)
    if found.deps_command:
        listed = "\n".join(f"{p} {top[p].object}" for p in DEPENDENCY_FILES if p in top)
        found.deps_files = hashlib.sha256(listed.encode()).hexdigest()[:16]
    if not found.kinds:
        found.notes.append("neither skill folders (SKILL.md) nor entry points were found: nothing of it is used")
    return found


def _add(found: Found, name: str, command: Command) -> None:
    if not COMMAND_NAME.match(name):
        found.notes.append(f"{command.origin}: the command name {name!r} is not a plain file name; left out")
    elif name in found.commands:
        found.notes.append(f"{command.origin}: the command {name} is already declared in "
                           f"{found.commands[name].origin}; that one is kept")
    else:
        found.commands[name] = command


def _toml(entry: Entry | None, read: Callable[[Entry], bytes], notes: list[str]) -> dict:
    if entry is None:
        return {}
    try:
        return tomllib.loads(read(entry).decode())
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        notes.append(f"pyproject.toml cannot be read ({exc}); its scripts are left out")
        return {}


def _json(entry: Entry | None, read: Callable[[Entry], bytes], notes: list[str]) -> dict:
    if entry is None:
        return {}
    try:
        value = json.loads(read(entry))
    except (UnicodeDecodeError, ValueError) as exc:
        notes.append(f"package.json cannot be read ({exc}); its bin is left out")
        return {}
    return value if isinstance(value, dict) else {}


def python() -> str:
    """The interpreter a package's venv is made with: the system's, which every sandbox shows."""
    for candidate in ("/usr/bin/python3", shutil.which("python3")):
        if candidate:
            return candidate
    return "python3"


def _deps_command(project: dict, manifest: dict, top: dict[str, Entry], notes: list[str]) -> str:
    """The exact command the dependency files call for ("" when they call for none)."""
    steps = []
    venv = f"{shlex.quote(python())} -m venv .venv"
    if "project" in project or "setup.py" in top:
        steps.append(f"{venv} && .venv/bin/python -m pip install .")
    elif "requirements.txt" in top:
        steps.append(f"{venv} && .venv/bin/python -m pip install -r requirements.txt")
    if manifest.get("dependencies") or manifest.get("devDependencies") or manifest.get("optionalDependencies"):
        if "package-lock.json" in top or "npm-shrinkwrap.json" in top:
            steps.append("npm ci")
        else:
            notes.append("package.json declares dependencies but has no package-lock.json, which `npm ci` "
                         "needs; they are not installed")
    return " && ".join(steps)

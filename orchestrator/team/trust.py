"""Workspace trust: whether the files of a folder that configure the orchestrator (agents/*.md, the
.agents/skills trees) may do so, remembered outside the folder; and which folders are never a default workspace.

Agents write files in their workspace, and whoever wrote a folder wrote its agent files and skills too, so
a folder is untrusted until the user says otherwise once (`chat` asks, `--trust` for scripts). The answer is
kept in trusted.json beside config.toml, by the folder's real path, with a hash of each of those files: an
added, changed or removed file (or a symlink pointing elsewhere) makes the folder untrusted again.

An untrusted folder's agent files are ignored entirely and the shipped team runs, rather than loaded with
their sandbox, tools and MCP grants stripped: the instructions are themselves the attack (a planted
commander.md steers every turn as well as any setting could), a half-loaded team runs with prompts its
author wrote for other tools and fails in ways nobody can follow, and "the shipped team, as shipped" is a
rule the user can check by reading it. The folder's project skills are dropped from the skill roots alike.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from orchestrator.core.resources import data_dir
from orchestrator.providers.config import config_path
from orchestrator.team.schema import Team

STORE_NAME = "trusted.json"
_VERSION = 1


@dataclass(frozen=True)
class Survey:
    """What in one folder configures the orchestrator: each file (relative to the folder) and its hash."""
    folder: Path  # the real path: the key in the trust store
    agents: dict[str, str]  # agents/*.md -> hash
    skills: dict[str, str]  # every file under the folder's .agents/skills roots -> hash

    @property
    def files(self) -> dict[str, str]:
        return {**self.agents, **self.skills}


def survey(folder: Path) -> Survey:
    """Read (never run) the configuration files of `folder`: the agent files `chat` would load and
    the project skill roots a room there would read, up to the repository's root."""
    from orchestrator.skills.library import project_folders  # the skills package is heavier than trust needs

    real = Path(os.path.realpath(folder))
    agents: dict[str, str] = {}
    local = real / "agents"
    # The checkout's own agents/ folder is the shipped team itself, not something a stranger wrote.
    if local.is_dir() and os.path.realpath(local) != os.path.realpath(data_dir("agents")):
        for path in sorted(local.glob("*.md")):
            agents[_shown(path, real)] = _file_hash(path)
    skills: dict[str, str] = {}
    for root in project_folders(real):
        _walk(root, real, skills, set())
    return Survey(real, agents, skills)


def _shown(path: Path, folder: Path) -> str:
    return os.path.relpath(path, folder)


def _file_hash(path: Path) -> str:
    """The content's hash; a symlink's target is part of it, so re-pointing a link counts as a change."""
    h = hashlib.sha256()
    if path.is_symlink():
        h.update(b"link:" + os.fsencode(os.readlink(path)) + b"\0")
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 16), b""):
                h.update(block)
    except OSError as exc:  # a dangling link or an unreadable file is still a file someone put there
        h.update(f"unreadable:{exc.errno}".encode())
    return h.hexdigest()


def _walk(folder: Path, base: Path, out: dict[str, str], seen: set[str]) -> None:
    """Every file under `folder`, following symlinked folders as skill discovery does (once each)."""
    real = os.path.realpath(folder)
    if real in seen or not folder.is_dir():
        return
    seen.add(real)
    if folder.is_symlink():
        out[_shown(folder, base) + "/"] = hashlib.sha256(b"link:" + os.fsencode(os.readlink(folder))).hexdigest()
    try:
        children = sorted(folder.iterdir())
    except OSError:
        return
    for child in children:
        if child.is_dir():
            _walk(child, base, out, seen)
        else:
            out[_shown(child, base)] = _file_hash(child)


# --- the store ----------------------------------------------------------------------------------------------

def store_path(env: Mapping[str, str] | None = None) -> Path:
    """Beside config.toml: outside every workspace, in the user's own configuration folder."""
    return config_path(os.environ if env is None else env).parent / STORE_NAME


def _read_store(path: Path) -> dict[str, dict]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}  # no store yet, or a broken one: nothing is trusted, which asks again
    folders = data.get("folders") if isinstance(data, dict) else None
    return folders if isinstance(folders, dict) else {}


def changes(s: Survey, env: Mapping[str, str] | None = None) -> list[str] | None:
    """None when `s` is trusted as it stands (or holds nothing to trust); else what differs from the files
    the user trusted ([] when the folder was never trusted)."""
    if not s.files:
        return None
    entry = _read_store(store_path(env)).get(str(s.folder))
    if not isinstance(entry, dict) or not isinstance(entry.get("files"), dict):
        return []
    before: dict[str, str] = entry["files"]
    if before == s.files:
        return None
    out = [f"added {n}" for n in s.files if n not in before]
    out += [f"changed {n}" for n in s.files if n in before and before[n] != s.files[n]]
    out += [f"removed {n}" for n in before if n not in s.files]
    return out


def trusted(s: Survey, env: Mapping[str, str] | None = None) -> bool:
    return changes(s, env) is None


def trust(s: Survey, env: Mapping[str, str] | None = None) -> Path:
    """Remember `s` as trusted; the store is owner-only and replaced whole, never left half written."""
    path = store_path(env)
    folders = _read_store(path)
    folders[str(s.folder)] = {"files": s.files, "trusted_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    text = json.dumps({"version": _VERSION, "folders": folders}, indent=1, sort_keys=True)
    if not path.parent.is_dir():
        path.parent.mkdir(parents=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=".trusted-", dir=path.parent)  # mkstemp makes it 0600
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path


def vouch(before: Survey, after: Survey, env: Mapping[str, str] | None = None) -> None:
    """The user's own act changed a folder's configuration between `before` and `after` (accepting a
    proposed skill): what it changed is theirs, the rest keeps the trust it had (none, if none)."""
    path = store_path(env)
    entry = _read_store(path).get(str(after.folder))
    files = dict(entry["files"]) if isinstance(entry, dict) and isinstance(entry.get("files"), dict) else {}
    for name in set(before.files) | set(after.files):
        if before.files.get(name) != after.files.get(name):
            if name in after.files:
                files[name] = after.files[name]
            else:
                files.pop(name, None)
    trust(Survey(after.folder, {}, files), env)


def workspace_trusted(folder: Path) -> bool:
    """May the project skills of `folder` be read? (Blocking: it reads the folder's files.)"""
    return trusted(survey(folder))


# --- what a folder is -------------------------------------------------------------------------------------

def unsafe_workspace(folder: Path) -> str | None:
    """What `folder` is when it must not be a workspace unless the user names it (agents may write anywhere
    in their workspace): the root, a home folder, a system folder, or a folder holding one; else None."""
    from orchestrator.tools.sandbox import SYSTEM, homes

    real = Path(os.path.realpath(folder))
    if real == Path(real.anchor):
        return "the root of the file system"
    for home in homes():
        if real == home:
            return "your home folder"
        if home.is_relative_to(real):
            return f"a folder holding your home folder {home}"
    for name in SYSTEM:
        for system in dict.fromkeys((Path(name), Path(os.path.realpath(name)))):
            if real.is_relative_to(system):
                return f"a system folder ({system})"
            if system.is_relative_to(real):
                return f"a folder holding the system folder {system}"
    return None


def widening(team: Team, workspace: Path | None) -> str:
    """The sandbox settings of `team` that give commands more than the default (the network without
    asking, folders outside the workspace, no sandbox), in one line; "" when there are none."""
    from orchestrator.tools.jail import Settings, SettingsError

    network: list[str] = []
    off: list[str] = []
    writable: list[str] = []
    for who, raw in [("the team", team.sandbox), *((a.name or "commander", a.sandbox)
                                                     for a in (team.commander, *team.agents))]:
        try:
            s = Settings.parse(raw, base=workspace or Path("."))
        except SettingsError:
            continue  # the room refuses it with its own message
        if not s.enabled:
            off.append(who)
        if s.network == "allow":
            network.append(who)
        for w in s.writable:
            if not _inside(w, workspace):
                writable.append(f"{w} ({who})")
    parts = [f"no sandbox for {', '.join(off)}"] * bool(off)
    parts += [f"the network without asking for {', '.join(network)}"] * bool(network)
    parts += [f"writing outside the workspace to {', '.join(writable)}"] * bool(writable)
    return "; ".join(parts)


def _inside(path: Path, workspace: Path | None) -> bool:
    if workspace is None:  # not known yet: a relative path stays inside unless it climbs out
        return not path.is_absolute() and not os.path.normpath(path).startswith("..")
    return Path(os.path.normpath(workspace / path)).is_relative_to(workspace)

"""Where skills come from: the roots in priority order, their trust tier, and the library they make.

A name found under two roots resolves to the higher root, which is listed as overriding the other; the
other copy stays listed as shadowed, a skill a check refuses as blocked, and the skills of a root whose
gate says no (a workspace the user does not trust) as set aside, unread, shadowing nothing: `skills list`
shows all of them, a model only the loaded.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable, Literal, Mapping, Sequence

import msgspec

from orchestrator.core.errors import InputError
from orchestrator.core.log import logger
from orchestrator.packages.places import skill_roots as package_roots
from orchestrator.skills.skill import Problem, Skill, read_skill, skill_file

log = logger(__name__)

Tier = Literal["trusted", "untrusted"]
Status = Literal["loaded", "shadowed", "blocked", "invalid", "set-aside"]

# "package": the enabled external packages' skill folders (orchestrator packages), always the untrusted
# tier: installing a repository is consent to keep it, not a review of the text it brings or will bring.
DEFAULT_ORDER = ("project", "user", "package", "home", "shipped")
# Other tools' folders: read only when named in the config's `roots`, and always as the untrusted tier.
FOREIGN = {"claude": ".claude/skills", "codex": ".codex/skills"}
LABELS = (*DEFAULT_ORDER, *FOREIGN)


@dataclass(frozen=True)
class Root:
    label: str  # project, user, package, home, shipped, claude, codex, or "custom"
    path: Path
    tier: Tier = "trusted"
    # Asked each time the root is read: why its skills are set aside now ("" when they may load). A
    # project's roots are gated by the user's trust in the workspace as it stands (room/skills.py).
    gate: Callable[[], str] | None = None


class SkillsConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The `[skills]` table of config.toml."""

    # Highest priority first: labels (project, user, home, shipped, claude, codex) or folder paths.
    roots: list[str] = msgspec.field(default_factory=lambda: list(DEFAULT_ORDER))
    untrusted: list[str] = []  # folder paths (or labels) read as the untrusted tier


def parse_config(raw: Mapping[str, Any], where: str) -> SkillsConfig:
    try:
        config = msgspec.convert(dict(raw), SkillsConfig)
    except msgspec.ValidationError as exc:
        raise InputError(f"{where}: [skills]: {exc}") from None
    for entry in config.roots:
        if entry not in LABELS and not os.path.isabs(os.path.expanduser(entry)):
            raise InputError(f"{where}: [skills] roots: {entry!r} is neither a root name "
                             f"({', '.join(LABELS)}) nor an absolute folder path")
    return config


def _git_top(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return None


def project_folders(workspace: Path) -> list[Path]:
    """`.agents/skills` in the workspace and each parent up to the repository root, nearest first."""
    workspace = workspace.resolve()
    top = _git_top(workspace)
    chain = [workspace] if top is None else [f for f in (workspace, *workspace.parents) if f.is_relative_to(top)]
    return [f / ".agents" / "skills" for f in chain]


def roots(workspace: Path, config: SkillsConfig = SkillsConfig(), env: Mapping[str, str] | None = None,
          *, shipped: Path | None = None) -> list[Root]:
    """The folders to read, highest priority first."""
    env = os.environ if env is None else env
    home = Path(env.get("HOME") or Path.home())
    config_home = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else home / ".config"
    untrusted = {os.path.realpath(os.path.expanduser(u)) if u not in LABELS else u for u in config.untrusted}
    out: list[Root] = []
    for entry in config.roots:
        if entry == "project":
            found = [Root("project", p) for p in project_folders(workspace)]
        elif entry == "user":
            found = [Root("user", config_home / "orchestrator" / "skills")]
        elif entry == "home":
            found = [Root("home", home / ".agents" / "skills")]
        elif entry == "package":
            found = [Root("package", p, "untrusted") for p in package_roots(env)]
        elif entry == "shipped":
            found = [Root("shipped", shipped)] if shipped else []
        elif entry in FOREIGN:
            found = [Root(entry, home / FOREIGN[entry], "untrusted")]
        else:
            found = [Root("custom", Path(os.path.expanduser(entry)))]
        for root in found:
            if root.label in untrusted or os.path.realpath(root.path) in untrusted:
                root = Root(root.label, root.path, "untrusted")
            out.append(root)
    return out


class Entry(msgspec.Struct, kw_only=True):
    """One skill folder as `skills list` shows it."""

    name: str  # the skill's name, or the folder's when it cannot be read
    folder: str
    root: str
    tier: Tier
    status: Status
    reason: str = ""  # why it is shadowed, blocked, invalid or set aside; for a loaded one, its notes
    notes: list[str] = []  # what the user should know of a loaded skill: what it overrides, what asks first
    skill: Skill | None = None

    def note(self, text: str) -> None:
        self.notes.append(text)
        self.reason = "; ".join(self.notes)


@dataclass
class Library:
    """Every skill found, and the loaded ones by name (each the highest-priority readable copy)."""

    entries: list[Entry] = field(default_factory=list)
    skills: dict[str, Skill] = field(default_factory=dict)
    tiers: dict[str, Tier] = field(default_factory=dict)
    roots: dict[str, str] = field(default_factory=dict)  # name -> root label

    def get(self, name: str) -> Skill | None:
        return self.skills.get(name)

    def entry(self, name: str) -> Entry | None:
        """The loaded copy of `name`, else the one that says why there is none."""
        found = [e for e in self.entries if e.name == name and e.status != "shadowed"]
        return next((e for e in found if e.status == "loaded"), found[0] if found else None)

    def trusted(self, name: str) -> bool:
        return self.tiers.get(name) == "trusted"


def stand_in_roots(workspace: Path, folders: Mapping[str, Path], *, shipped: Path | None = None) -> list[Root]:
    """The project's roots, then folders standing in for the other labels (a scenario's `skill_roots`),
    in the default order; foreign labels are the untrusted tier as always."""
    out = [Root("project", p) for p in project_folders(workspace)]
    out += [Root(label, folders[label], "untrusted" if label in FOREIGN or label == "package" else "trusted")
            for label in LABELS if label in folders and label != "project"]
    if shipped is not None and "shipped" not in folders:
        out.append(Root("shipped", shipped))
    return out


def discover(search: Sequence[Root]) -> Library:
    """Read every skill folder under `search` (blocking: call it through a thread from trio code)."""
    lib = Library()
    taken: dict[str, Entry] = {}
    gates: dict[int, str] = {}  # a workspace's roots share one gate: asked once per reading
    set_aside: list[Entry] = []
    for root in search:
        try:
            children = sorted(p for p in root.path.iterdir() if not p.name.startswith("."))
        except OSError:
            continue  # a root that does not exist is simply empty
        held = "" if root.gate is None else gates.setdefault(id(root.gate), root.gate())
        for folder in children:
            if not folder.is_dir() or skill_file(folder) is None:
                continue
            if held:  # not read at all: whoever wrote the folder wrote them, and the user has not said yes
                entry = Entry(name=folder.name, folder=str(folder), root=root.label, tier=root.tier,
                              status="set-aside", reason=held)
                set_aside.append(entry)
                lib.entries.append(entry)
                continue
            skill, problems = read_skill(folder, within=_writable(root))
            entry = _entry(folder, root, skill, problems)
            if entry.status == "invalid":
                lib.entries.append(entry)
                continue
            if (winner := taken.get(entry.name)) is not None:
                entry.status, entry.reason = "shadowed", f"shadowed by {winner.folder} ({winner.root})"
                winner.note(f"overrides the {entry.root} skill {entry.name} ({entry.folder})")
                log.info("skill shadowed", skill=entry.name, kept=winner.folder, shadowed=entry.folder)
                lib.entries.append(entry)
                continue
            taken[entry.name] = entry
            lib.entries.append(entry)
            if entry.status == "blocked":
                log.info("skill blocked", skill=entry.name, folder=entry.folder, reason=entry.reason)
                continue
            assert skill is not None
            lib.skills[skill.name] = skill
            lib.tiers[skill.name] = root.tier
            lib.roots[skill.name] = root.label
    for entry in set_aside:
        if entry.name in lib.skills:
            entry.reason += f"; the {lib.roots[entry.name]} skill {entry.name} is used instead"
    return lib


def _writable(root: Root) -> Path | None:
    """The project folder a project root lies in (agents may write there, links included): its skills are read
    without following a link out of it, as a package's are out of its root (its dependency step wrote there).
    Other roots are the user's own, links and all."""
    if root.label == "package":
        return root.path
    return root.path.parent.parent if root.label == "project" else None


def _entry(folder: Path, root: Root, skill: Skill | None, problems: list[Problem]) -> Entry:
    new = partial(Entry, folder=str(folder), root=root.label, tier=root.tier)
    if skill is None:
        first = next(p for p in problems if p.severity == "error")
        return new(name=folder.name, status="invalid", reason=f"{first.file.name}:{first.line}: {first.message}")
    folder = Path(skill.folder)
    blocked = [p for p in problems if p.severity == "blocked"]
    if blocked:
        why = "; ".join(f"{p.message} at {p.where(folder)}" for p in blocked)
        return new(name=skill.name, status="blocked", reason=why)
    entry = new(name=skill.name, status="loaded", skill=skill)
    for p in problems:
        if p.severity == "asks":
            entry.note(f"{p.message} at {p.where(folder)}, which asks first")
    return entry

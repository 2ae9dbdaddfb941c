"""Skills in a room: which skills each member may use, its catalog and activate_skill tool for a turn,
a skill the user invokes for the next line (the self-improvement pass: improvement.py).

The open (untrusted) tier reaches the commander only; a worker's `skills` may never name such a skill.
"""
from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import cast

import trio

from orchestrator.core.errors import InputError
from orchestrator.core.log import logger
from orchestrator.core.resources import data_dir
from orchestrator.memory.notes import Memory, NoteError, Target
from orchestrator.providers.config import Config, load_config
from orchestrator.skills import proposals
from orchestrator.skills.activation import NAME, activate_tool, allowed_names, content
from orchestrator.skills.catalog import Listed, catalog
from orchestrator.skills.library import Library, Root, parse_config, roots
from orchestrator.skills.skill import Skill
from orchestrator.team.schema import AgentDef, Team
from orchestrator.team.trust import changes, survey
from orchestrator.tools.base import Registry
from orchestrator.tools.session import ToolSession

log = logger(__name__)


def shipped() -> Path:
    return data_dir("skills")


def default_roots(workspace: Path, *, project: bool | None = None, config: Config | None = None) -> list[Root]:
    """The roots a room in `workspace` reads: those config.toml's [skills] sets (or the default order),
    with the package's own skills. The workspace's own .agents/skills roots: read when `project` is True,
    left out when False, and by default gated by the user's trust in the folder as it stands, asked each
    time they are read (team/trust.py): whoever wrote the folder wrote them, and a skill an agent wrote
    there since makes them wait for the user again, even in a room opened before. `config`: as the program
    read it (None: read config.toml now)."""
    read = config if config is not None else load_config()
    found = roots(workspace, parse_config(read.skills, str(read.path)),
                  shipped=shipped())
    if project is False:
        return [r for r in found if r.label != "project"]
    if project is True:
        return found
    gate = partial(untrusted, workspace)
    return [Root(r.label, r.path, r.tier, gate) if r.label == "project" else r for r in found]


def untrusted(workspace: Path) -> str:
    """Why the project skills of `workspace` are set aside now, "" when the user trusts it as it stands."""
    changed = changes(survey(workspace))
    if changed is None:
        return ""
    if not changed:
        return "the workspace is not trusted; `orchestrator chat --trust` in it trusts it"
    shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
    return f"the workspace is not trusted as it stands: {shown} since you trusted it; `orchestrator chat` asks again"


def wanted(spec: AgentDef, team: Team) -> list[str] | str:
    """The member's `skills` (its own, else the team's): a list of names or "all"."""
    return spec.skills if spec.skills is not None else team.skills


def check_skills(team: Team, library: Library) -> None:
    """Unknown names and untrusted skills in a worker's list are errors before a room opens."""
    for spec, commander in [(team.commander, True), *((a, False) for a in team.agents)]:
        names = wanted(spec, team)
        if isinstance(names, str):
            continue
        who = "the commander" if commander else f"agent {spec.name!r}"
        for name in names:
            entry = library.entry(name)
            if entry is None:
                known = ", ".join(sorted(library.skills)) or "none found"
                raise InputError(f"{who}: unknown skill {name!r}; skills: {known} (`orchestrator skills list`)")
            if entry.status != "loaded":
                raise InputError(f"{who}: skill {name!r} is {entry.status}: {entry.reason}")
            if not commander and not library.trusted(name):
                raise InputError(f"{who}: skill {name!r} is in the untrusted tier ({entry.folder}); only the "
                                 "commander may use it")


class RoomSkills:
    """The room's library and what each member gets from it."""

    def __init__(self, team: Team, library: Library):
        self.team, self.library = team, library
        self.invoked: dict[str, list[str]] = {}  # member -> skills the user invoked for its next turn
        self.granted: dict[str, set[str]] = {}  # member -> every skill the user invoked for it in this room

    def blocked(self) -> str:
        """A note for the user on skills the members would have had but a check blocked, and on the ones
        they have that override another of the same name ("" if none)."""
        specs = (self.team.commander, *self.team.agents)
        every = any(wanted(spec, self.team) == "all" for spec in specs)
        named = {n for spec in specs if isinstance(names := wanted(spec, self.team), list) for n in names}
        lines = [f"Skill {e.name} ({e.folder}) is blocked and was not loaded: {e.reason}."
                 for e in self.library.entries if e.status == "blocked" and every]
        lines += [f"Skill {e.name} ({e.root}) {note}." for e in self.library.entries
                  if e.status == "loaded" and (every or e.name in named)
                  for note in e.notes if note.startswith("overrides ")]
        return "\n".join(lines)

    def usable(self, spec: AgentDef, commander: bool) -> dict[str, Skill]:
        names = wanted(spec, self.team)
        pool = self.library.skills if names == "all" else {n: self.library.skills[n] for n in names
                                                            if n in self.library.skills}
        return {n: s for n, s in pool.items() if commander or self.library.trusted(n)}

    def equip(self, spec: AgentDef, commander: bool, tools: Registry, window: int) -> str:
        """Add activate_skill to `tools` when the member has skills; returns its catalog for the prompt."""
        usable = self.usable(spec, commander)
        untrusted = frozenset(n for n in self.library.skills if not self.library.trusted(n))
        for name in self.invoked.pop(spec.name, []):  # the user invoked it: narrowed as if activated
            skill = self.library.get(name)
            if skill is not None and skill.allowed_tools is not None:
                keep, _ = allowed_names(skill.allowed_tools)
                tools.narrow(keep | {NAME}, f"the skill {name} the user invoked allows only {', '.join(sorted(keep))}")
        listed = {n: s for n, s in usable.items() if s.model_invocable}  # disable-model-invocation hides it
        # what the user invoked stays activatable, so compaction keeps its text like any activation's
        granted = {n: self.library.skills[n] for n in self.granted.get(spec.name, ()) if n in self.library.skills}
        if (listed or granted) and tools.get(NAME) is None:
            tools.add(activate_tool(listed | granted, tools, untrusted=untrusted))
        items = [Listed(s, untrusted=n in untrusted) for n, s in listed.items()]
        return catalog(items, window)

    def invoke(self, name: str, target: AgentDef, commander: bool, session: ToolSession) -> str:
        """`/skill NAME`: the skill's content for `target`'s next turn; InputError when it may not have it."""
        skill = self.library.get(name)
        if skill is None:
            entry = self.library.entry(name)
            why = f"it is {entry.status}: {entry.reason}" if entry else "`/skills` lists them"
            raise InputError(f"no usable skill named {name!r}; {why}")
        if not skill.user_invocable:
            raise InputError(f"the skill {name!r} is not user-invocable (user-invocable: false)")
        if not commander and not self.library.trusted(name):
            raise InputError(f"the skill {name!r} is in the untrusted tier: only the commander may use it")
        folder = Path(skill.folder)
        if folder not in session.readable:
            session.readable.append(folder)
        self.invoked.setdefault(target.name, []).append(name)
        self.granted.setdefault(target.name, set()).add(name)
        return content(skill, session, untrusted=not self.library.trusted(name))


async def decide(staged: proposals.Staged, accept: bool, library: Library, workspace: Path,
                 memory: Memory | None) -> str:
    """Accept or reject one proposal; accepting checks every rule again (a skill) or goes through the
    memory's own checks (scan, caps, duplicates). Returns what happened, in one line."""
    if not accept:
        proposals.reject(staged)
        return f"rejected {staged.id}"
    p = staged.proposal
    if p.kind == "skill":
        path = await trio.to_thread.run_sync(proposals.apply_skill, workspace, library, staged)
        return f"accepted {staged.id}: wrote {path}"
    if memory is None:  # the callers pass one whenever a memory proposal may be accepted
        raise InputError(f"{staged.id}: there is no memory to apply it to")
    target = cast(Target, p.target)  # a str on disk: the memory refuses an unknown one (NoteError)
    try:
        if p.action == "add":
            said = await memory.add(target, staged.text())
        else:
            said = await memory.replace(target, p.old_text, staged.text())
    except NoteError as exc:
        raise InputError(f"{staged.id}: the memory refused it: {exc}") from None
    proposals.accepted(staged)
    return f"accepted {staged.id}: {said}"


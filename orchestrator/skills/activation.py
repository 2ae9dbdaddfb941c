"""The activate_skill tool: a skill's instructions on demand, its files made readable, its tools narrowed.

The room builds one per agent and turn over the skills that agent may use; `name` is an enum of them.
`allowed-tools` can only take tools away for the rest of the turn, never add one the agent lacks.
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal

import msgspec
import trio

from orchestrator.core.prompts import render
from orchestrator.skills.bundle import bundled_files
from orchestrator.skills.skill import Skill
from orchestrator.tools.base import Registry, Tool, ToolContext, ToolError
from orchestrator.tools.builtin import BUILTIN
from orchestrator.tools.sandbox import shown
from orchestrator.tools.session import ToolSession

NAME = "activate_skill"

# Claude Code's tool names in `allowed-tools`, mapped to ours. Our own names are accepted as they are.
ALIASES: dict[str, tuple[str, ...]] = {
    "read": ("read_file",), "write": ("write_file",), "edit": ("edit_file",), "multiedit": ("edit_file",),
    "notebookedit": ("edit_file",), "glob": ("search_files",), "grep": ("grep_files",),
    "ls": ("search_files", "stat_file"), "bash": ("bash", "job_status", "job_output", "job_kill"),
}


def allowed_names(patterns: list[str]) -> tuple[set[str], list[str]]:
    """Our tool names that `allowed-tools` patterns name, and the patterns that name none of them.

    A pattern's argument part (`Bash(git:*)`) is not enforced: the whole tool stays available.
    """
    names: set[str] = set()
    unknown: list[str] = []
    for pattern in patterns:
        base = pattern.split("(", 1)[0].strip()
        if base in BUILTIN or base in ("memory", "search_knowledge", NAME):
            names.add(base)
        elif base.lower() in ALIASES:
            names.update(ALIASES[base.lower()])
        else:
            unknown.append(pattern)
    return names, unknown


def content(skill: Skill, session: ToolSession, *, untrusted: bool) -> str:
    """What activation returns: the instructions (no front matter) and the list of bundled files."""
    from xml.sax.saxutils import quoteattr  # when a skill is shown: it loads urllib.request
    folder = Path(skill.folder)
    files = [shown(session, folder / f) for f in bundled_files(folder)]
    # the body cannot close the wrapper early and pose as text of ours
    body = skill.body.replace("</skill_content", "<\\/skill_content")
    return render("skill_content.md.j2", name=quoteattr(skill.name), folder=quoteattr(shown(session, folder)),
                  body=body, files=files, untrusted=untrusted, compatibility=skill.compatibility)


class ActivateArgs(msgspec.Struct, forbid_unknown_fields=True):
    name: str


def activate_tool(skills: dict[str, Skill], registry: Registry, *, untrusted: frozenset[str] = frozenset(),
                  on_activate=None) -> Tool:
    """activate_skill over `skills` (the ones this agent may use). Narrowing applies to `registry`, the
    agent's tools for this turn; `on_activate(agent, skill)` is told of each activation."""
    names = tuple(sorted(skills))
    args = msgspec.defstruct("ActivateSkillArgs", [("name", Literal[names])], forbid_unknown_fields=True) \
        if names else ActivateArgs
    active: set[str] = set()

    async def run(a, ctx: ToolContext) -> str:
        skill = skills.get(a.name)
        if skill is None:
            raise ToolError(f"no skill named {a.name!r}; the skills you can activate: {', '.join(names) or 'none'}")
        if skill.name in active:
            return f"The skill {skill.name} is already active in this turn; its instructions are above."
        active.add(skill.name)
        folder = Path(skill.folder)
        if folder not in ctx.session.readable:
            ctx.session.readable.append(folder)
        text = await trio.to_thread.run_sync(  # it lists the skill's files
            lambda: content(skill, ctx.session, untrusted=skill.name in untrusted))
        if skill.allowed_tools is not None:
            keep, _ = allowed_names(skill.allowed_tools)
            keep.add(NAME)
            hidden = registry.narrow(keep, f"the active skill {skill.name} allows only "
                                           f"{', '.join(sorted(keep - {NAME})) or 'no tools'}")
            if hidden:
                text += (f"\n\nWhile this skill is active (until this turn ends) your tools are narrowed to: "
                         f"{', '.join(registry.names())}.")
        if on_activate:
            on_activate(ctx.agent, skill)
        return text

    description = ("Activate a skill: returns its instructions and the list of its bundled files (read those "
                   "with read_file when the instructions call for them). Call it before starting a task that "
                   "matches a skill's description in your system prompt.")
    return Tool(NAME, description, args, run, kept=True)

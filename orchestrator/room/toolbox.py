"""Which tools an agent's definition gives it: built-in names, the room-made ones, `mcp:` grants (added per
turn by the room, from the hub), Python functions and Tools, and `py:` import paths; checked before any room.

A `py:` path imports code from the user's environment, so only a team the program gave the room may name one:
a team read back from the store (a file anything may have written) never does.
"""
from __future__ import annotations

import msgspec

from orchestrator.core.errors import InputError
from orchestrator.mcplink.config import grant_problem, is_grant
from orchestrator.team.schema import AgentDef, Team
from orchestrator.tools.base import Registry, Tool
from orchestrator.tools.builtin import BUILTIN, ROOM_TOOLS, tool_names
from orchestrator.tools.functions import ToolDefinitionError, imported, is_python_ref, ref_of


def check_team(team: Team, *, stored: bool = False) -> None:
    """Everything about a team's tools that can be wrong, found before a room is stored or opened.
    `stored`: the team was read back from the store, so it may not import Python code."""
    for spec in [team.commander, *team.agents]:
        check_tools(spec, stored=stored)


def check_tools(spec: AgentDef, *, stored: bool = False) -> None:
    names: set[str] = set()
    for entry in spec.tools:
        if isinstance(entry, Tool) or is_python_ref(entry):
            if isinstance(entry, str) and stored:
                raise InputError(f"agent {spec.name!r}: the Python tool `{entry}` of a stored room is not imported "
                                 "again: open the room with its team given (team=...)")
            name = python_tool(spec, entry).name
            if name in BUILTIN or name in ROOM_TOOLS or name in names:
                raise InputError(f"agent {spec.name!r}: two tools are named {name!r}: name the Python one "
                                 "differently (@tool(name=...))")
            names.add(name)
        elif not isinstance(entry, str):
            raise InputError(f"agent {spec.name!r}: {entry!r} is not a tool: name a built-in tool, an `mcp:` "
                             "grant, a Python function or a `py:module:function`")
        elif is_grant(entry):
            if problem := grant_problem(entry):
                raise InputError(f"agent {spec.name!r}: {problem}")
        elif entry not in BUILTIN and entry not in ROOM_TOOLS:
            raise InputError(f"agent {spec.name!r}: unknown tool {entry!r}; built-in tools: {', '.join(tool_names())}")


def python_tool(spec: AgentDef, entry: Tool | str) -> Tool:
    if isinstance(entry, Tool):
        return entry
    try:
        return imported(entry)
    except ToolDefinitionError as exc:
        raise InputError(f"agent {spec.name!r}: {exc}") from None


def registry(spec: AgentDef, room_tools: dict[str, Tool]) -> Registry:
    """The agent's own tools for one turn; the room adds its MCP, commander and skill tools after."""
    return Registry([python_tool(spec, e) if isinstance(e, Tool) or is_python_ref(e) else BUILTIN.get(e) or room_tools[e]
                     for e in spec.tools if not (isinstance(e, str) and is_grant(e))])


def grants(spec: AgentDef) -> list[str]:
    return [e for e in spec.tools if isinstance(e, str) and is_grant(e)]


def storable(team: Team) -> Team:
    """The team as a room's record keeps it: each Python tool as its `py:` path (never imported back)."""
    def plain(spec: AgentDef) -> AgentDef:
        if all(isinstance(t, str) for t in spec.tools):
            return spec
        return msgspec.structs.replace(spec, tools=[ref_of(t) if isinstance(t, Tool) else t for t in spec.tools])

    return msgspec.structs.replace(team, commander=plain(team.commander), agents=[plain(a) for a in team.agents])

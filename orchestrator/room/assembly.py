"""What the engine needs for one turn of a member: its model and window, its tools (its own, its MCP grants,
the commander's three, its skills') and its system prompt, rendered again only when what it shows changed.

The memory is frozen into the prompt here, once per turn; the commander's ledger changes with every
assignment, so its prompt is a frame rendered once and the ledger's lines set into the frame's slot.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from orchestrator.acp.member import session_prompt
from orchestrator.core.prompts import render
from orchestrator.core.tokens import estimate
from orchestrator.core.retry import RetryPolicy
from orchestrator.engine.runner import Agent
from orchestrator.mcplink.config import ServerConfig
from orchestrator.mcplink.servers import Hub
from orchestrator.mcplink.tools import find_tools, toolset
from orchestrator.memory.notes import Memory
from orchestrator.providers.base import Provider
from orchestrator.providers.catalog import ModelInfo
from orchestrator.room import toolbox
from orchestrator.room.bus import Bus
from orchestrator.room.ledger import Ledger
from orchestrator.room.members import COMMANDER, USER, Member
from orchestrator.room.skills import RoomSkills
from orchestrator.team.schema import AgentDef
from orchestrator.tools.base import Registry, Tool
from orchestrator.tools.session import ToolSession

DEFAULT_WINDOW = 200_000
_LEDGER_HEAD = estimate("Task ledger:\n")  # the commander prompt's heading over a ledger that is not empty
_SLOT = "\x00ledger\x00"  # a ledger line no task has: where the frame's lines go


class Room(Protocol):
    """What an agent's assembly reads of its room (room.py's Room)."""

    _resolve: Callable[[str], tuple[Provider, str]]
    _models: Callable[[str], ModelInfo | None] | None
    _memory: Memory
    _tool_session: ToolSession
    _retry: RetryPolicy
    _bus: Bus
    _mcp: Hub | None
    _mcp_servers: dict[str, ServerConfig]
    _mcp_told: set[str]

    @property
    def id(self) -> str: ...
    @property
    def members(self) -> dict[str, Member]: ...
    @property
    def skills(self) -> RoomSkills: ...
    @property
    def workspace(self) -> Path: ...
    @property
    def ledger(self) -> Ledger: ...
    @property
    def floor(self) -> str: ...
    def roster(self) -> list[AgentDef]: ...


class Frame:
    """The commander's prompt but its ledger, rendered once: with the ledger's lines set into its slot, the text
    commander.md.j2 gives for them, without a render per assignment."""

    def __init__(self, values: dict[str, Any]):
        self.bare = render("commander.md.j2", ledger=[], **values)
        self.tokens = estimate(self.bare)
        self._head, self._tail = render("commander.md.j2", ledger=[_SLOT], **values).split(f"- {_SLOT}\n")

    def text(self, ledger: list[str]) -> str:
        return self._head + "".join(f"- {line}\n" for line in ledger) + self._tail if ledger else self.bare


async def agent(room: Room, member: Member, commander_tools: list[Tool], room_tools: dict[str, Tool]) -> Agent:
    """The member's turn as the engine runs it (for an external agent, only its view: what it was told, what it did)."""
    spec = member.spec
    if spec.acp is not None:
        provider, _ = room._resolve(room.members[COMMANDER].spec.model)
        return Agent(name=member.name, provider=provider, model="acp:" + Path(spec.acp.command[0]).name,
                     system=session_prompt(spec), workspace=room.workspace, session=room._tool_session)
    model_string = spec.model or room.members[COMMANDER].spec.model
    provider, model = room._resolve(model_string)
    info = room._models(model_string) if room._models else None
    window = spec.context_window or (info.context_window if info else DEFAULT_WINDOW)
    tools = toolbox.registry(spec, room_tools)
    if toolbox.grants(spec):
        await _add_mcp_tools(room, member, tools, window)
    memory = await room._memory.snapshot()
    if member.name == COMMANDER:
        for t in commander_tools:
            tools.add(t)
    skills = room.skills.equip(spec, member.name == COMMANDER, tools, window)
    if member.name == COMMANDER:
        _commander_prompt(room, member, tools.names(), memory, skills)
    elif (inputs := ("worker", tools.names(), memory, skills)) != member.prompt[0]:  # rendered when it changed
        text = render("worker.md.j2", name=spec.name, description=spec.description,
                      instructions=spec.instructions, tools=tools.names(), interactive=spec.interactive,
                      memory=memory, skills=skills)
        member.prompt = (inputs, text, estimate(text))
    _, system, system_tokens = member.prompt
    return Agent(name=member.name, provider=provider, model=model, system=system, tools=tools,
                 workspace=room.workspace, session=room._tool_session, retry=room._retry, cache_key=room.id,
                 system_tokens=system_tokens, window=window, budget=spec.request_budget,
                 compact_at=spec.compact_at or (info.compact_at if info else 0.8),
                 thinking_budget=spec.thinking.budget_tokens if spec.thinking else None)


def _commander_prompt(room: Room, member: Member, tools: list[str], memory: str, skills: str) -> None:
    """The commander's system prompt, made again when what it shows changed: the frame once per change of its
    own, each ledger line once (Ledger.lines), and the lines set into the frame's slot."""
    roster = room.roster()
    rest = (tools, memory, room.floor, [a.name for a in roster], skills)
    ledger = room.ledger.lines(20)
    if (rest, ledger) == member.prompt[0]:
        return
    if rest != member.frame[0]:
        member.frame = (rest, Frame(dict(instructions=member.spec.instructions, roster=roster, floor=room.floor,
                                         tools=tools, memory=memory, skills=skills)))
    frame = member.frame[1]
    member.prompt = ((rest, ledger), frame.text([line for line, _ in ledger]),
                     frame.tokens + sum(n for _, n in ledger) + (_LEDGER_HEAD if ledger else 0))


async def _add_mcp_tools(room: Room, member: Member, tools: Registry, window: int) -> None:
    """The member's MCP tools; a server that started once stays up for every room of this process.
    What is left out (a server down, a broken schema) is told once, to the user and the member."""
    if room._mcp is None:
        problems = ["MCP servers are granted but this room has no MCP hub (open one with open_hub)"]
    else:
        found = await toolset(room._mcp, room._mcp_servers, toolbox.grants(member.spec), window, member.mcp_loaded)
        for t in found.tools:
            tools.add(t)
        if found.deferred:
            def load(picked: list[Tool]) -> None:
                for t in picked:
                    if tools.get(t.name) is None:
                        tools.add(t)
                        member.mcp_loaded.add(t.name)
            tools.add(find_tools(found.deferred, load))
        problems = found.problems
    for line in problems:
        told = line.split("; next start attempt in")[0]
        if told not in room._mcp_told:
            room._mcp_told.add(told)
            await room._bus.notice(line, [USER, member.name])

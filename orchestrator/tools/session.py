"""The state tools share within one room (or one standalone session): where files may be touched,
what each agent has read, the shell's background jobs and OS sandbox, and how to ask the user;
also the folders of activated skills, which tools may read wherever they are.

The engine hands it to every tool through ToolContext; the room builds one per room, so a stop
reaches the jobs and an answer to "may I run this?" reaches the person in front of the room.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Awaitable, Callable, Literal, Sequence

from orchestrator.tools.jail import Settings
from orchestrator.tools.jobs import JobTable
from orchestrator.tools.reads import ReadLedger

Answer = Literal["once", "run", "deny"]
Asker = Callable[[str, str, str], Awaitable[Answer]]  # (agent, risk category, what to show) -> answer


async def _nobody(agent: str, category: str, summary: str) -> Answer:
    return "deny"  # with nobody to ask, a risky command does not run


class ToolSession:
    def __init__(self, workspace: Path, *, grants: Sequence[Path] = (), ask: Asker = _nobody,
                 spawn: Callable[..., None] | None = None, sandbox: Settings = Settings(),
                 agent_sandbox: dict[str, Settings] | None = None, private: tuple[Path, ...] = ()):
        self.workspace = Path(workspace).resolve()
        self.grants = [Path(g).resolve() for g in grants]  # folders the user granted besides the workspace
        self.readable: list[Path] = []  # activated skills' folders: tools may read them, never write
        self.ask = ask
        self.spawn = spawn  # runs fn(*args) under the group's stop; None outside a room
        self.sandbox = sandbox  # the OS sandbox shell commands run in (tools/jail.py)
        self.agent_sandbox = agent_sandbox or {}  # agents whose own setting differs from the room's
        self.allowed: set[tuple[str, str]] = set()  # (agent, category) answered "this run"
        self.reads = ReadLedger()  # per (agent, path): what it last read or wrote
        self.jobs = JobTable(spawn)  # background shell jobs, stopped with the group
        self.private = tuple(private)  # files no tool and no command may see (the room's database)
        self.guard: Any = None  # guard.of(session): what runs later outside the sandbox, made at first use

    def sandbox_for(self, agent: str) -> Settings:
        return self.agent_sandbox.get(agent, self.sandbox)

    async def confirm(self, agent: str, category: str, summary: str) -> bool:
        """May `agent` do something in `category`? Asks once, or not again after "this run"."""
        if (agent, category) in self.allowed:
            return True
        answer = await self.ask(agent, category, summary)
        if answer == "run":
            self.allowed.add((agent, category))
        return answer in ("once", "run")

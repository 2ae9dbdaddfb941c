"""Who is in a room: the reserved names, a member (its definition, partition and turn count), and how
anonymous workers are named.

Everything above the bus speaks of members; the engine only ever sees one member's partition.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

import trio

from orchestrator.core.errors import OrchestratorError
from orchestrator.engine.partition import Partition
from orchestrator.team.schema import AgentDef

COMMANDER, USER, ROOM = "commander", "user", "room"  # ROOM authors the room's own notices
ANONYMOUS = re.compile(r"worker(?:-(\d+))?")
# Who sees a turn's words (room/commits.py): commander -> the user; visible -> the user and the commander;
# foreground -> the user (the commander gets the report as a tool result); hidden -> nobody else.
Mode = Literal["commander", "visible", "foreground", "hidden"]


class TurnFailed(OrchestratorError):
    """An agent's turn ended in an error that was already reported on the bus."""


@dataclass
class Member:
    spec: AgentDef
    partition: Partition
    lock: trio.Lock = field(default_factory=trio.Lock)
    active: int = 0  # turns scheduled or running
    anonymous: bool = False
    mcp_loaded: set[str] = field(default_factory=set)  # MCP tools it loaded with find_tools: sent from then on
    prompt: tuple = (None, "", 0)  # its last system prompt: (what it was rendered from, the text, its tokens)
    frame: tuple = (None, None)  # the commander's prompt without its ledger: (what it shows, assembly.Frame)

    @property
    def name(self) -> str:
        return self.spec.name


def anonymous_name(n: int) -> str:
    """The n-th hidden worker of a room: worker, worker-2, worker-3, ..."""
    return "worker" if n == 1 else f"worker-{n}"

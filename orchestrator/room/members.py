"""Who is in a room: the reserved names, a member (its definition, partition and turn count), how
anonymous workers are named, and how a member's failed turn reads.

Everything above the bus speaks of members; the engine only ever sees one member's partition.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

import trio

from orchestrator.core.errors import TOO_LONG, OrchestratorError, ProviderError, TruncatedPromptError
from orchestrator.core.types import Message
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


class Hidden:
    """The numbers of a room's anonymous workers: the next is one past the highest its history names."""

    def __init__(self) -> None:
        self.count = 0
        self._numbers: dict[str, int] = {}  # reserved numbers by run_worker call id

    def saw(self, name: str) -> None:
        if m := ANONYMOUS.fullmatch(name):
            self.count = max(self.count, int(m.group(1) or 1))

    def member(self, call_id: str, batch: list[str], commander: AgentDef) -> Member:
        """A fresh hidden worker on the commander's model and tools. Numbers are given per response in
        declared order (`batch`: the call ids of its anonymous run_worker calls), not as the tasks start."""
        if call_id not in self._numbers:
            for cid in batch or [call_id]:
                self.count += 1
                self._numbers[cid] = self.count
        name = anonymous_name(self._numbers.pop(call_id))
        spec = AgentDef(name=name, description="an anonymous helper of the commander",
                        model=commander.model, tools=list(commander.tools))
        return Member(spec, Partition(name), anonymous=True)


def deliver(messages: list[Message], members: dict[str, Member], hidden: Hidden) -> None:
    """A reopened room's history into its members' partitions, all read; `hidden` learns the workers'
    numbers (a worker stopped before it spoke still had a task, so viewers count too)."""
    for msg in messages:
        for name in (msg.author, *msg.visible_to):
            hidden.saw(name)
        for viewer in msg.visible_to:
            if viewer in members:
                members[viewer].partition.append(msg)
    for member in members.values():
        member.partition.mark_read()


def explain(exc: ProviderError) -> str:
    """What the user reads when a turn's model call failed: which call, whether it was retried, what to check."""
    if isinstance(exc, TruncatedPromptError):
        return f"{exc.provider}: {exc}."
    if exc.kind == "context_overflow":
        return TOO_LONG
    where = f"{exc.provider}: " if exc.provider else ""
    retried = "retried until the attempts ran out" if exc.retryable else "not retried"
    hint = " Check the API key and the account." if exc.account else ""
    return f"{where}the model call failed ({exc.kind}, {retried}): {str(exc).rstrip('.')}.{hint}"

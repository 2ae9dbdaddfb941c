"""The self-improvement pass of a room (M5) and the user's review of what it proposes: the pass reads a line's
work once the room is idle and only stages proposals; accepting one is the user's act, and so is its trust.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import trio

from orchestrator.core.types import Message
from orchestrator.memory.notes import Memory
from orchestrator.providers.base import Provider
from orchestrator.room.bus import Bus
from orchestrator.room.members import COMMANDER, USER, Member
from orchestrator.room.skills import RoomSkills, decide, reflect
from orchestrator.skills import proposals
from orchestrator.store.contract import Store
from orchestrator.team import trust


class Room(Protocol):
    """What the pass and the review use of their room (room.py's Room)."""

    _store: Store
    _resolve: Callable[[str], tuple[Provider, str]]
    _memory: Memory
    _bus: Bus

    @property
    def id(self) -> str: ...
    @property
    def members(self) -> dict[str, Member]: ...
    @property
    def skills(self) -> RoomSkills: ...
    @property
    def workspace(self) -> Path: ...

    async def notice(self, text: str, visible_to: list[str], notify: tuple[str, ...] = ()) -> Message: ...
    async def reload_skills(self) -> None: ...


async def reflect_on(room: Room, first: int) -> None:
    """The pass over the line that began at seq `first`; the user hears of a proposal it staged."""
    messages = [m for m in await room._store.load(room.id) if m.seq >= first]
    provider, model = room._resolve(room.members[COMMANDER].spec.model)
    out = await reflect(provider, model, messages, room.skills.library, room.workspace,
                        await room._memory.snapshot(), room.id, room._bus.publish)
    if out.status == "proposed":
        await room.notice(f"Proposed by the self-improvement pass: {out.reason}. Accept or reject it with "
                          "/proposals or `orchestrator skills review`.", [USER])


async def review(room: Room, accept: bool, ident: str = "all") -> list[str]:
    """Accept or reject staged proposals (`ident`: an id prefix, or all); one line per proposal. What the user
    accepted becomes theirs in the workspace's trust, and the room reads its skills again."""
    if ident == "all":
        chosen = await trio.to_thread.run_sync(proposals.pending, room.workspace)
    else:
        chosen = [await trio.to_thread.run_sync(proposals.find, room.workspace, ident)]
    before = await trio.to_thread.run_sync(trust.survey, room.workspace) if accept else None
    said = [await decide(s, accept, room.skills.library, room.workspace, room._memory) for s in chosen]
    if before is not None and chosen:
        after = await trio.to_thread.run_sync(trust.survey, room.workspace)
        await trio.to_thread.run_sync(trust.vouch, before, after)
        await room.reload_skills()
    return said or ["there are no pending proposals"]

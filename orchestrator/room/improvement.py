"""The self-improvement pass of a room and the user's review of what it proposes: the pass starts once the room is
idle and its signals (signals.py) or a host's schedule call for it, spends within its caps (evolution.py), and only
stages proposals; accepting one is the user's act, and so is its trust.
"""
from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Literal, Protocol

import trio

from orchestrator.core.events import CallUsage, Evolution
from orchestrator.core.log import logger
from orchestrator.core.types import Message
from orchestrator.memory.notes import Memory
from orchestrator.providers.base import Provider
from orchestrator.room import evolution
from orchestrator.room.bus import Bus
from orchestrator.room.evolution import HOUR, Settings
from orchestrator.room.members import COMMANDER, USER, Member
from orchestrator.room.signals import Signals, weaknesses
from orchestrator.room.skills import RoomSkills, decide
from orchestrator.skills import evolve, proposals
from orchestrator.store.contract import Store
from orchestrator.store.usage import UsageLog, UsageRow
from orchestrator.team import trust

log = logger(__name__)

Why = Literal["signals", "schedule", "fallback"]


class Room(Protocol):
    """What the pass and the review use of their room (room.py's Room)."""

    _store: Store
    _resolve: Callable[[str], tuple[Provider, str]]
    _memory: Memory
    _bus: Bus
    _usage: UsageLog
    _evolve: Settings | None
    _signals: Signals | None
    _line_seq: int | None

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
    async def idle(self) -> None: ...
    def spawn(self, fn: Callable[..., Awaitable[object]], *args: object) -> None: ...


def due(room: Room) -> bool:
    """Whether the idle room's signals call for a pass now: their sum reached the threshold (0: every line), and
    the cooldown since its last pass is over."""
    s, signals = room._evolve, room._signals
    if s is None or signals is None or signals.total < s.threshold:
        return False
    return signals.last_pass is None or trio.current_time() - signals.last_pass >= s.cooldown_hours * HOUR


def start(room: Room, first: int, why: Why) -> None:
    """Start the pass over the messages from seq `first` as a room task (idle() waits for it, stop ends it); the
    signals start counting again."""
    room._line_seq = None
    if room._signals is not None:
        room._signals.reset()
        room._signals.last_pass = trio.current_time()
    room.spawn(reflect_on, room, first, why)


async def scheduled(room: Room, first: int, why: Why) -> None:
    """A host's pass over the work since seq `first` (or the room's own unreviewed line, if older), once the room
    is idle; returns when the pass has ended."""
    await room.idle()
    signals, cooldown = room._signals, (room._evolve or Settings()).cooldown_hours * HOUR
    if signals is not None and signals.last_pass is not None and trio.current_time() - signals.last_pass < cooldown:
        return  # its own signals started a pass meanwhile
    if room._line_seq is not None:
        first = min(first, room._line_seq)
    start(room, first, why)
    await room.idle()


async def reflect_on(room: Room, first: int, why: Why = "signals") -> None:
    """The pass over the messages from seq `first`, within the caps; the user hears, in one notice line, of a
    proposal it staged or of a cap that stopped or cut it. Its failure is logged and ends nothing else."""
    settings = room._evolve or Settings()
    grant: evolution.Grant | None = None
    try:
        messages = [m for m in await room._store.load(room.id) if m.seq >= first]
        provider, model = room._resolve(settings.model or room.members[COMMANDER].spec.model)
        grant = await evolution.grant(room._store, settings)
        started = trio.current_time()
        out = await evolve.reflect(provider, model, messages, library=room.skills.library,
                                   workspace=room.workspace, memory=await room._memory.snapshot(), room=room.id,
                                   cap=grant.tokens)
        if out.status not in ("capped", "failed"):
            await _spent(room, provider, model, out, trio.current_time() - started)
    except Exception as exc:  # a broken pass (a bad model string, a store error) is this room's alone
        log.exception("self-improvement pass failed", room=room.id)
        out = evolve.Outcome(status="failed", reason=f"{type(exc).__name__}: {exc}")
    finally:
        if grant is not None:
            grant.release()
    log.info("self-improvement pass", room=room.id, why=why, status=out.status, proposal=out.proposal,
             reason=out.reason)
    room._bus.publish(Evolution(ts=time.time(), room=room.id, status=out.status, proposal=out.proposal,
                                reason=out.reason, seq=out.seq, input_tokens=out.input_tokens,
                                output_tokens=out.output_tokens))
    if out.status == "capped" and grant is not None:
        await room.notice(f"The self-improvement pass was not run: {out.reason} under {grant.why}; "
                          "raise it under `evolve` in the team file or [evolve] in config.toml.", [USER])
    elif out.cut and grant is not None:
        await room.notice(f"The self-improvement pass read only the newest messages of this work: {grant.why} "
                          "left no room for the rest.", [USER])
    if out.status == "proposed":
        await room.notice(f"Proposed by the self-improvement pass: {out.reason}. Accept or reject it with "
                          "/proposals or `orchestrator skills review`.", [USER])
    await refresh_weaknesses(room)


async def _spent(room: Room, provider: Provider, model: str, out: evolve.Outcome, seconds: float) -> None:
    """The pass's model call as a usage row of its own (agent "evolve"), written now: the per-day cap counts it."""
    now = time.time()
    await room._usage.add([UsageRow(room=room.id, ts=now, agent=evolve.REVIEWER, provider=provider.id, model=model,
                                    kind="model", input_tokens=out.input_tokens, output_tokens=out.output_tokens,
                                    estimated=out.estimated, seconds=seconds)])
    room._bus.publish(CallUsage(ts=now, room=room.id, agent=evolve.REVIEWER, provider=provider.id, model=model,
                                input_tokens=out.input_tokens, output_tokens=out.output_tokens,
                                estimated=out.estimated, seconds=seconds, auxiliary=True))


async def refresh_weaknesses(room: Room) -> None:
    """The known weaknesses the signals look for, read again from the notes (a pass or the user may change them)."""
    if room._signals is not None:
        room._signals.topics = weaknesses(await room._memory.entries("notes"))


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
    if accept and chosen:
        await refresh_weaknesses(room)
    return said or ["there are no pending proposals"]

"""The commit policy of a turn: who sees what a member says (by the turn's mode), the handback a worker's words
carry, assignments held to commit with their tasks, and last words that record which lines they answer.

What a commit leaves to be told is told here too: a reply cut off at the output limit, and the work that ran
while a member held the floor, once it hands back.
"""
from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Protocol

import msgspec

from orchestrator.core.events import Done, ToolEnd
from orchestrator.core.prompts import render
from orchestrator.core.types import Draft, Message, TextBlock, ToolCallBlock, ToolResultBlock
from orchestrator.engine.runner import CANCELLED, Agent
from orchestrator.room import handback
from orchestrator.room.bus import Bus
from orchestrator.room.commander import ASSIGNING
from orchestrator.room.floor import Floor
from orchestrator.room.ledger import Ledger
from orchestrator.room.lines import Lines
from orchestrator.room.members import COMMANDER, USER, Member, Mode
from orchestrator.trace import semconv as sc

class Room(Protocol):
    """What the commit policy uses of its room (room.py's Room)."""

    _bus: Bus
    _lines: Lines
    _floor: Floor

    @property
    def ledger(self) -> Ledger: ...

    async def notice(self, text: str, visible_to: list[str], notify: tuple[str, ...] = ()) -> Message: ...
    def wake(self, name: str) -> None: ...


def audience(mode: Mode, name: str) -> list[str]:
    """Who sees the words of `name`'s turn (the modes: members.py)."""
    return {"commander": [COMMANDER, USER], "visible": [name, USER, COMMANDER], "foreground": [name, USER],
            "hidden": [name]}[mode]


def committer(room: Room, member: Member, mode: Mode, at_once: bool = False) -> Callable[[Draft],
                                                                                        Awaitable[Message | None]]:
    """How the engine commits `member`'s drafts in this turn. `at_once`: its report is the next message the room
    commits (an assignment alone in its response): its last words commit in that transaction."""
    seen_by = audience(mode, member.name)

    async def commit(draft: Draft) -> Message | None:
        handed = False
        if draft.kind in ("text", "tool_call") and member.name != COMMANDER:
            text, handed = handback.split(draft.text)
        if draft.kind in ("text", "tool_call"):
            blocks = draft.blocks
            if handed:
                blocks = [TextBlock(text) if isinstance(b, TextBlock) else b for b in blocks]
                blocks = [b for b in blocks if not (isinstance(b, TextBlock) and not b.text)]
            draft = msgspec.structs.replace(draft, blocks=blocks, visible_to=list(seen_by))
        if draft.kind == "tool_call" and all(b.name in ASSIGNING for b in draft.blocks
                                             if isinstance(b, ToolCallBlock)):
            # Its tools' first act is to post their task (commander.py, _assign): it commits in that transaction.
            # Every call of a round gets a result posted, also when it is stopped (engine/runner.py, _run_calls).
            room._bus.hold(draft)
            return None
        # A turn's last words record what they answer, in their own row: a host that takes the room over after
        # a crash knows which lines still wait (leased.py), however the reply and later lines interleaved.
        # Last words: a text, or the results of a round whose tool ended the turn (a handoff).
        last = draft.kind == "text" or (draft.kind == "tool_result" and member.partition.ending)
        answers = member.partition.read_seq if last else None
        if at_once and draft.kind == "text" and not handed and not member.partition.unread:
            # Its last words (the engine goes on after a text only for unread lines, and none can land before it
            # decides): the tool result that carries its report is the room's next commit (commander.py, _work).
            room._bus.hold(draft, answers)
            return None
        msg = await room._bus.post(draft, answers=answers)
        if draft.kind == "tool_result":
            res = draft.blocks[0]
            if isinstance(res, ToolResultBlock) and res.content == CANCELLED:
                room._bus.publish(ToolEnd(ts=time.time(), agent=member.name, call_id=res.call_id,
                                          name=res.name, result=res.content, is_error=True))
        if handed and await room._floor.hand_back(member.name):
            room._lines.event(sc.HANDBACK, member.name, COMMANDER)
            await _pending_after_handback(room, member)
        return msg

    return commit


async def cut_off(room: Room, member: Member, agent: Agent, done: Done) -> None:
    """The user (and the commander, who coordinates) learn that a reply ended at a limit, which one (the cap
    asked for, the server's own, or the context window) and what would help, and which call, if any, was not run."""
    text = render("cut_reply.md.j2", agent=member.name, calls=", ".join(done.cut),
                  model=f"{agent.provider.id}/{agent.model}", limit=done.limit or "output",
                  max_tokens=f"{done.max_tokens:,}" if done.max_tokens else "",
                  window=f"{done.window:,}" if done.window else "")
    await room.notice(text, list(dict.fromkeys([USER, COMMANDER, member.name])))


async def _pending_after_handback(room: Room, member: Member) -> None:
    """Work that ran or ended while `member` held the floor: the commander is told and woken."""
    pending = room.ledger.running() + room.ledger.unread()
    if pending:
        await room.notice(render("handback_pending.md.j2", agent=member.name,
                                 tasks=[f"{t.id} {t.agent} [{t.status}]" for t in pending]), [COMMANDER],
                          notify=(COMMANDER,))
        room.wake(COMMANDER)

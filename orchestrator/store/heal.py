"""Healing on load: pair every tool call with exactly one result, in declared order.

`plan` says what to add (under ids that depend only on the history), delete and renumber; the store applies it.
`pairing_problems` is the check.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import msgspec

from orchestrator.core.types import Draft, Message, ToolCallBlock, ToolResultBlock

INTERRUPTED = "interrupted: the run stopped before this tool returned a result"


class HealPlan(msgspec.Struct):
    add: list[tuple[str, Draft]] = []  # (id of the call message it answers, synthesized result)
    delete: list[str] = []
    reseq: list[tuple[str, int]] = []  # (message id, new seq)
    # The id of each `add` result, in order: the same for every plan of the same history, so a heal that only
    # shows the room (read-only) and the heal that writes it name what they synthesize alike.
    ids: list[str] = []

    def empty(self) -> bool:
        return not (self.add or self.delete or self.reseq)


@dataclass
class _Slot:
    call: ToolCallBlock
    result: Message | None = None


def _pair(messages: list[Message]) -> tuple[list[tuple[Message, list[_Slot]]], list[Message]]:
    """Give each result to the earliest earlier call by its author with its id that still waits.

    Earliest-waiting (not latest-declared) keeps pairing stable when a model reuses call ids
    across turns: a synthesized result appended at the end still reaches the call it was made for.
    Returns the call messages with their slots, and the results that answer nothing.
    """
    groups: list[tuple[Message, list[_Slot]]] = []
    waiting: dict[tuple[str, str], list[_Slot]] = {}
    strays: list[Message] = []
    for m in sorted(messages, key=lambda m: m.seq):
        if m.kind == "tool_call":
            slots = [_Slot(c) for c in m.calls]
            groups.append((m, slots))
            for s in slots:
                waiting.setdefault((m.author, s.call.id), []).append(s)
        elif m.kind == "tool_result":
            results = [b for b in m.blocks if isinstance(b, ToolResultBlock)]
            queue = waiting.get((m.author, results[0].call_id)) if len(results) == 1 else None
            if queue:
                queue.pop(0).result = m
            else:
                strays.append(m)
    return groups, strays


def healed_id(call_message: str, position: int, call: ToolCallBlock) -> str:
    """The id of the result synthesized for the call at `position` of message `call_message`: 32 hex digits, like
    the store's own, from what identifies the call (a model may reuse a call id across turns)."""
    return hashlib.sha256(f"healed\0{call_message}\0{position}\0{call.id}".encode()).hexdigest()[:32]


def _interrupted(author: str, call: ToolCallBlock) -> Draft:
    block = ToolResultBlock(call_id=call.id, name=call.name, content=INTERRUPTED, is_error=True)
    return Draft(author=author, kind="tool_result", blocks=[block], visible_to=[author])


def plan(messages: list[Message]) -> HealPlan:
    """What makes pairing hold: synthesize missing results, drop strays, reorder results.

    Synthesized results get the newest seqs, so they can land before a result of a call declared
    after theirs; planning again after applying reorders those (a second plan holds only `reseq`).
    """
    groups, strays = _pair(messages)
    fix = HealPlan(delete=[m.id for m in strays])
    for call_msg, slots in groups:
        missing = [(i, s) for i, s in enumerate(slots) if s.result is None]
        fix.add += [(call_msg.id, _interrupted(call_msg.author, s.call)) for _, s in missing]
        fix.ids += [healed_id(call_msg.id, i, s.call) for i, s in missing]
        results = [s.result for s in slots if s.result is not None]
        in_order = sorted(r.seq for r in results)
        fix.reseq += [(r.id, seq) for r, seq in zip(results, in_order) if r.seq != seq]
    return fix


def pairing_problems(messages: list[Message]) -> list[str]:
    """Every way `messages` breaks pairing, one line each; empty when pairing holds."""
    groups, strays = _pair(messages)
    problems = [f"{m.author}'s result at seq {m.seq} answers no waiting call" for m in strays]
    for call_msg, slots in groups:
        where = f"{call_msg.author}'s call message at seq {call_msg.seq}"
        problems += [f"call {s.call.id} of {where} has no result" for s in slots if s.result is None]
        seqs = [s.result.seq for s in slots if s.result is not None]
        if seqs != sorted(seqs):
            problems.append(f"results of {where} are out of declared order: seqs {seqs}")
    return problems

"""Fitting one outgoing request into its token budget (E7); the stored history never changes.

Three steps, each only if the previous one did not suffice: clear the oldest tool results four at
a time (so the request prefix stays byte-identical over several calls), keep whole user turns,
then keep whole tool rounds of one long turn. A call and its results are never separated.
"""
from __future__ import annotations

from functools import cache

from orchestrator.core.prompts import render
from orchestrator.core.tokens import estimate
from orchestrator.core.types import ModelMessage, TextBlock, ToolCallBlock, ToolResultBlock

BATCH = 4


@cache
def cleared_note() -> str:
    return render("cleared_result.md.j2")


@cache
def _note_tokens() -> int:
    return estimate(cleared_note())


def fit(view: list[ModelMessage], sizes: list[int], budget: int) -> list[ModelMessage]:
    """The messages to send: `view` itself when it fits, else a fitted copy (pairing kept)."""
    total = sum(sizes)
    if total <= budget:
        return view
    view, sizes, total = _clear_results(view, sizes, total, budget)
    if total <= budget:
        return view
    return _keep_newest(view, sizes, budget)


def _clear_results(view, sizes, total, budget):
    note = _note_tokens()
    results = [i for i, m in enumerate(view) if _is_results(m)]
    keep: set[int] = set()
    kept = 0
    for i in reversed(results):  # the newest results that fit in a quarter of the budget stay
        if keep and kept + sizes[i] > budget // 4:
            break
        keep.add(i)
        kept += sizes[i]
    candidates = [i for i in results if i not in keep and sizes[i] > 2 * note + 16]  # barely larger: not worth it
    need = total - budget
    saved, n = 0, 0
    for i in candidates:
        if saved >= need:
            break
        saved += sizes[i] - _cleared_size(view[i], note)
        n += 1
    n = min(len(candidates), -(-n // BATCH) * BATCH)  # round up to a whole batch: a stable prefix
    if n == 0:
        return view, sizes, total
    view, sizes = list(view), list(sizes)
    for i in candidates[:n]:
        size = _cleared_size(view[i], note)
        total -= sizes[i] - size
        view[i], sizes[i] = _cleared(view[i]), size
    return view, sizes, total


def _is_results(m: ModelMessage) -> bool:
    return m.role == "user" and bool(m.blocks) and isinstance(m.blocks[0], ToolResultBlock)


def _cleared(m: ModelMessage) -> ModelMessage:
    return ModelMessage(m.role, [ToolResultBlock(b.call_id, b.name, cleared_note(), b.is_error)
                                 if isinstance(b, ToolResultBlock) else b for b in m.blocks], m.provider, m.model)


def _cleared_size(m: ModelMessage, note: int) -> int:
    return 4 + sum(note + 8 for b in m.blocks if isinstance(b, ToolResultBlock))


def _keep_newest(view, sizes, budget) -> list[ModelMessage]:
    """Steps 2 and 3: the first message, a note, and the newest whole units that fit.

    A unit starts at a user line (step 2: whole turns); when even the newest turn is too long,
    at an assistant message (step 3: whole call->result rounds of that turn).
    """
    head = [] if any(isinstance(b, ToolCallBlock) for b in view[0].blocks) else [view[0]]
    note = ModelMessage("user", [TextBlock(render("trimmed_history.md.j2"))])
    room = budget - sum(sizes[:len(head)]) - estimate(note.blocks[0].text) - 4
    suffix = [0] * (len(view) + 1)
    for i in range(len(view) - 1, -1, -1):
        suffix[i] = suffix[i + 1] + sizes[i]
    rounds = _starts(view, lambda m: m.role == "assistant")
    for starts in (_starts(view, lambda m: m.role == "user" and not _is_results(m)), rounds):
        fitting = [i for i in starts if suffix[i] <= room]
        if fitting:
            return [*head, note, *view[fitting[0]:]]
    # Not even one round fits: send the newest round anyway and let the provider's overflow
    # error start a compaction.
    return [*head, note, *view[rounds[-1] if rounds else len(view) - 1:]]


def _starts(view, is_start) -> list[int]:
    """Cut points after the first message where a unit begins and no call is left open."""
    out = []
    open_calls: set[str] = set()
    for i, m in enumerate(view):
        if i > 0 and not open_calls and is_start(m):
            out.append(i)
        for b in m.blocks:
            if isinstance(b, ToolCallBlock):
                open_calls.add(b.id)
            elif isinstance(b, ToolResultBlock):
                open_calls.discard(b.call_id)
    return out

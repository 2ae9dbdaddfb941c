"""Fitting one outgoing request into its token budget, and the output room its window leaves;
the stored history never changes.

First, a message too long to fit even alone is left out, a short note in its place. Then three steps, each
only if the previous one did not suffice: clear the oldest tool results four at a time (so the request prefix
stays byte-identical over several calls; an activated skill's text is an instruction and stays), keep whole
user turns, then keep whole tool rounds of one long turn. A call and its results are never separated.

Clearing is the cheap step and may aim lower than the budget (`clear_to`): the engine clears down to the
point where compaction would start, so a summary call is made only when clearing cannot avoid it.
"""
from __future__ import annotations

from functools import cache

from orchestrator.core.prompts import render
from orchestrator.core.tokens import estimate
from orchestrator.core.types import ModelMessage, TextBlock, ToolCallBlock, ToolResultBlock
from orchestrator.skills.activation import NAME as ACTIVATE

BATCH = 4
KEPT_TOOLS = frozenset({ACTIVATE})  # results that are instructions, not sources to re-read: never cleared
ROOM_FLOOR = 256  # the least output room asked for: our estimate of a prompt may run high
ELIDED = ("[A message of about {tokens:,} tokens was left out here: it is too long for the model's context "
          "window. The room keeps it; ask for it in smaller parts if it is needed.]")


def output_room(window: int, prompt: int) -> int:
    """Output tokens `window` leaves after a prompt of about `prompt` tokens, with a tenth of the prompt to spare
    (our count may run below the server's): what a request asks for at most."""
    return max(ROOM_FLOOR, window - prompt - prompt // 10)


@cache
def cleared_note() -> str:
    return render("cleared_result.md.j2")


@cache
def _note_tokens() -> int:
    return estimate(cleared_note())


def fit(view: list[ModelMessage], sizes: list[int], budget: int, total: int | None = None, *,
        most: int | None = None, clear_to: int | None = None) -> list[ModelMessage]:
    """The messages to send: `view` itself when it fits, else a fitted copy (pairing kept). `total`: the sum of
    `sizes` when the caller keeps it (a partition's `tokens`), so that a request costs no pass over the history.
    `most`: the largest line that can be sent at all (default `budget`); a larger one is left out, a note in its place.
    `clear_to`: clear old results down to this many tokens when it is below `budget`; the later steps still cut
    only what exceeds `budget`.

    Clearing is planned on sizes alone and applied only to the messages actually sent, so a long
    history that steps 2 and 3 cut anyway costs no copies of what is left out.
    """
    return fitted(view, sizes, budget, total, most=most, clear_to=clear_to)[0]


def fitted(view: list[ModelMessage], sizes: list[int], budget: int, total: int | None = None, *,
           most: int | None = None, clear_to: int | None = None) -> tuple[list[ModelMessage], int]:
    """`fit`'s messages, and the tokens the history comes to once lines are left out and results cleared, before
    steps 2 and 3 cut whole turns or rounds: what the engine weighs against the compaction threshold, so the
    dear step waits for the cheap one, in the same pass that builds the request."""
    total = sum(sizes) if total is None else total
    aim = budget if clear_to is None else min(budget, clear_to)
    if total <= aim:
        return view, total
    view, cleared, sizes, total = _cheap(view, sizes, total, aim, budget if most is None else max(most, budget))
    if total <= budget:
        return _sent(view, cleared, 0), total
    head, cut = _keep_newest(view, sizes, budget)
    if cut <= head:  # nothing between the first message and the newest unit to leave out
        return _sent(view, cleared, 0), total
    note = ModelMessage("user", [TextBlock(render("trimmed_history.md.j2"))])
    return [*_sent(view[:head], cleared, 0), note, *_sent(view[cut:], cleared, cut)], total


def _cheap(view, sizes, total, aim, most) -> tuple[list[ModelMessage], set[int], list[int], int]:
    """Elision, then step 1 towards `aim`: the view (with notes for left-out lines), which results to clear,
    and the sizes and total once they are."""
    view, sizes, total = _elide(view, sizes, total, most)
    if total <= aim:
        return view, set(), sizes, total
    cleared, sizes, total = _clear_results(view, sizes, total, aim)
    return view, cleared, sizes, total


def _elide(view: list[ModelMessage], sizes: list[int], total: int,
           most: int) -> tuple[list[ModelMessage], list[int], int]:
    """A line larger than `most` (a pasted file, a user line longer than the window) would fail every request it
    is in, and every summary of it: a note stands in its place. Calls and results are left to the steps below,
    which keep them paired (and the newest result whole)."""
    over = [i for i, size in enumerate(sizes) if size > most and
            not any(isinstance(b, (ToolCallBlock, ToolResultBlock)) for b in view[i].blocks)]
    if not over:
        return view, sizes, total
    view, sizes = list(view), list(sizes)
    for i in over:
        m = view[i]
        note = ELIDED.format(tokens=sizes[i])
        view[i] = ModelMessage(m.role, [TextBlock(note)], m.provider, m.model)
        size = 4 + estimate(note)
        total -= sizes[i] - size
        sizes[i] = size
    return view, sizes, total


def _sent(part: list[ModelMessage], cleared: set[int], offset: int) -> list[ModelMessage]:
    return [_cleared(m) if i + offset in cleared else m for i, m in enumerate(part)]


def _clear_results(view, sizes, total, budget) -> tuple[set[int], list[int], int]:
    """Which results to clear (indices), and the sizes and total once they are."""
    note = _note_tokens()
    results = [i for i, m in enumerate(view) if _is_results(m)]
    keep: set[int] = set()
    kept = 0
    for i in reversed(results):  # the newest results that fit in a quarter of the budget stay
        if keep and kept + sizes[i] > budget // 4:
            break
        keep.add(i)
        kept += sizes[i]
    need = total - budget
    chosen: list[int] = []
    saved = 0
    for i in results:  # oldest first, as many as the need takes, rounded up to a whole batch: a stable prefix
        if saved >= need and len(chosen) % BATCH == 0:
            break
        if i not in keep and clearable(view[i], sizes[i]):
            chosen.append(i)
            saved += sizes[i] - _cleared_size(view[i], note)
    if not chosen:
        return set(), sizes, total
    sizes = list(sizes)
    for i in chosen:
        size = _cleared_size(view[i], note)
        total -= sizes[i] - size
        sizes[i] = size
    return set(chosen), sizes, total


def clearable(m: ModelMessage, size: int) -> bool:
    """Whether `m` (of `size` tokens) holds tool results worth clearing: one barely larger than the note that
    would replace it is left alone, and so is an activated skill's text (compaction carries it verbatim too)."""
    return size > 2 * _note_tokens() + 16 and _is_results(m) and not any(
        isinstance(b, ToolResultBlock) and b.name in KEPT_TOOLS for b in m.blocks)


def _is_results(m: ModelMessage) -> bool:
    return m.role == "user" and bool(m.blocks) and isinstance(m.blocks[0], ToolResultBlock)


def cleared(m: ModelMessage) -> tuple[ModelMessage, int]:
    """`m` with each tool result's content replaced by the clearing note, and its size then."""
    return _cleared(m), _cleared_size(m, _note_tokens())


def _cleared(m: ModelMessage) -> ModelMessage:
    return ModelMessage(m.role, [ToolResultBlock(b.call_id, b.name, cleared_note(), b.is_error)
                                 if isinstance(b, ToolResultBlock) else b for b in m.blocks], m.provider, m.model)


def _cleared_size(m: ModelMessage, note: int) -> int:
    return 4 + sum(note + 8 for b in m.blocks if isinstance(b, ToolResultBlock))


def _keep_newest(view, sizes, budget) -> tuple[int, int]:
    """Steps 2 and 3: how many leading messages to keep (the first, unless it holds calls) and
    where the kept tail starts, so the two plus a note fit.

    A unit starts at a user line (step 2: whole turns); when even the newest turn is too long,
    at an assistant message (step 3: whole call->result rounds of that turn).
    """
    head = 0 if any(isinstance(b, ToolCallBlock) for b in view[0].blocks) else 1
    room = budget - sum(sizes[:head]) - estimate(render("trimmed_history.md.j2")) - 4
    turns, rounds = cut_points(view)
    for starts in (turns, rounds):
        tail, cut = 0, None
        for i in reversed(range(len(view))):  # the earliest start whose tail still fits
            tail += sizes[i]
            if tail > room:
                break
            if i in starts:
                cut = i
        if cut is not None:
            return head, cut
    # Not even one round fits: send the newest round anyway and let the provider's overflow
    # error start a compaction.
    return head, max(rounds) if rounds else len(view) - 1


def cut_points(view) -> tuple[set[int], set[int]]:
    """Cut points after the first message where no call is left open: user lines (turns) and
    assistant messages (rounds)."""
    turns, rounds = set(), set()
    open_calls: set[str] = set()
    for i, m in enumerate(view):
        if i > 0 and not open_calls:
            if m.role == "assistant":
                rounds.add(i)
            elif not _is_results(m):
                turns.add(i)
        for b in m.blocks:
            if isinstance(b, ToolCallBlock):
                open_calls.add(b.id)
            elif isinstance(b, ToolResultBlock):
                open_calls.discard(b.call_id)
    return turns, rounds

"""Compaction: summarize the older part of a partition once clearing old tool results cannot keep
its requests under 80% of the window.

The summary call is the agent's own request (its system prompt, tools and history, as sent) with the
instruction added as a last user message, so a vendor that caches prefixes bills all but that message
as cached. There is no portable way to forbid tool calls in it (and a vendor's tool-choice switch would
itself change what is cached), so the instruction says so and an answer that calls a tool is no summary.
The tail is kept from a clean boundary (never a tool result whose call was summarized); the
summary is one stored message that names what it replaces, so the swap is one transaction.
Results of tools marked `kept` (activated skills) are carried into the summary verbatim.
"""
from __future__ import annotations

import time
from functools import cache

import msgspec

from orchestrator.core.events import CallUsage
from orchestrator.core.log import logger
from orchestrator.core.prompts import render
from orchestrator.core.tokens import estimate
from orchestrator.core.types import (
    Draft, ModelMessage, Request, TextBlock, ToolCallBlock, ToolResultBlock, block_text,
)
from orchestrator.engine import telemetry
from orchestrator.engine.budget import cut_points, fit, output_room
from orchestrator.providers.base import complete
from orchestrator.trace.spans import OFF, Span

log = logger(__name__)

SUMMARY_OUTPUT = 2048  # an auxiliary call: small cap, and never more than a quarter of a small window
KEEP = 0.25  # share of the window the kept tail may take


def summary_room(window: int) -> int:
    """What a summary call needs besides the history it repeats: its answer and the instruction."""
    return min(SUMMARY_OUTPUT, window // 4) + _instruction_tokens()


@cache
def _instruction_tokens() -> int:
    return estimate(render("compaction.md.j2", start="x" * 80, call=""))  # the longest it gets


def cut_point(partition, keep: int) -> int | None:
    """The view index where the kept tail starts: the earliest clean boundary whose tail fits `keep`."""
    view, sizes = partition.view, partition.sizes
    turns, rounds = cut_points(view)
    clean = sorted(turns | rounds)
    tail = 0
    best = None
    j = len(view)
    for i in reversed(clean):
        tail += sum(sizes[i:j])
        j = i
        if tail > keep:
            break
        best = i
    return best if best is not None else (clean[-1] if clean else None)


KEPT = "[Kept word for word through the summary: an activated skill]"  # summary.md.j2 puts it before each kept text


def _kept(messages, tools: set[str]) -> list[str]:
    """The results of `tools` among `messages`, and what earlier summaries kept: each text once, oldest first."""
    found: list[str] = []
    for m in messages:
        for b in m.blocks:
            if isinstance(b, ToolResultBlock) and b.name in tools and not b.is_error:
                found.append(b.content)
            elif isinstance(b, TextBlock) and KEPT in b.text:
                found += [part.strip("\n") for part in b.text.split(KEPT)[1:]]
    return list(dict.fromkeys(found))


async def compact(agent, partition, commit, request: Request, *, window: int, fixed: int, history: int | None = None,
                  overflow: bool = False, calls: list[CallUsage] | None = None,
                  span: Span = OFF) -> tuple[int, int] | None:
    """Summarize everything before the cut; returns (tokens before, after), or None when it cannot help.

    `request` is the agent's own request; `history` the tokens its messages come to when they are its whole
    history, nothing cut to fit. When they also leave the window `summary_room`, the summary call sends them
    again with the instruction after them. Otherwise (a small window, or `overflow`: the provider refused
    `request`, so our window estimate was wrong and only the newest unit is kept) it carries only what it
    replaces, fitted to the window, after the same system prompt and tools. `fixed` is what every request
    carries besides history. The summary call's usage is appended to `calls`, whether or not it is kept.
    """
    cut = cut_point(partition, 0 if overflow else int(window * KEEP))
    before = partition.tokens + fixed
    if cut is None:
        return None
    tail = sum(partition.sizes[cut:])
    if tail + fixed >= window:  # no-benefit guard: the tail alone fills the window
        log.info("compaction skipped: the recent messages alone fill the context window",
                    agent=agent.name, tail_tokens=tail, window=window)
        return None
    older = partition.view[:cut]
    budget = max(1, window - summary_room(window) - fixed)
    if history is not None and history <= budget and not overflow:
        instruction = render("compaction.md.j2", **_landmark(partition.view[cut]))
        messages, sent = request.messages, history
    else:
        instruction = render("compaction.md.j2", start="", call="")
        messages, sent = fit(older, partition.sizes[:cut], budget), min(sum(partition.sizes[:cut]), budget)
    sent += fixed + estimate(instruction)
    room = output_room(window, sent)  # what the window leaves the summary
    request = msgspec.structs.replace(request, messages=[*messages, ModelMessage("user", [TextBlock(instruction)])],
                                      max_output_tokens=min(SUMMARY_OUTPUT, window // 4, room), auxiliary=True,
                                      output_room=room, response_model="")
    chat = telemetry.chat_span(agent.provider.id, span, request)
    started = time.perf_counter()
    try:
        response = await complete(agent.provider, request, agent.retry)
    except BaseException as exc:
        chat.end(exc)
        raise
    usage = response.usage or telemetry.estimated_usage(sent, response.blocks)
    telemetry.end_chat(chat, request.response_model, usage, response.usage is None, response.stop_reason,
                       response.blocks)
    if calls is not None:
        calls.append(CallUsage(ts=time.time(), agent=agent.name, provider=agent.provider.id, model=agent.model,
                               input_tokens=usage.input, output_tokens=usage.output, cached_tokens=usage.cached,
                               estimated=response.usage is None, seconds=time.perf_counter() - started,
                               auxiliary=True))
    said = "".join(b.text for b in response.blocks if isinstance(b, TextBlock)).strip()
    if not said or any(isinstance(b, ToolCallBlock) for b in response.blocks):
        log.info("compaction skipped: the model did not answer with a summary", agent=agent.name)
        return None
    text = render("summary.md.j2", summary=said, kept=_kept(older, agent.tools.kept()), kept_mark=KEPT)
    if estimate(text) >= sum(partition.sizes[:cut]):  # a summary no shorter than its source helps nobody
        log.info("compaction skipped: the summary is no shorter than what it would replace", agent=agent.name)
        return None
    await commit(Draft(author=agent.name, kind="summary", visible_to=[agent.name],
                       blocks=[TextBlock(text)], replaces=list(partition.ids[:cut])))
    return before, partition.tokens + fixed


def _landmark(first: ModelMessage) -> dict[str, str]:
    """How the instruction names the first message kept: its opening words, or the tool it calls (neither:
    an image alone, and the instruction names no boundary)."""
    text = " ".join(block_text(first.blocks).split())
    return {"start": text[:80], "call": "" if text else
            next((b.name for b in first.blocks if isinstance(b, ToolCallBlock)), "")}

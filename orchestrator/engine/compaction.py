"""Compaction (E5): summarize the older part of a partition once it reaches 80% of the window.

The tail is kept from a clean boundary (never a tool result whose call was summarized); the
summary is one stored message that names what it replaces, so the swap is one transaction.
Results of tools marked `kept` (activated skills) are carried into the summary verbatim.
"""
from __future__ import annotations

import time


from orchestrator.core.events import CallUsage
from orchestrator.core.log import logger
from orchestrator.core.prompts import render
from orchestrator.core.tokens import estimate
from orchestrator.core.types import Draft, Request, TextBlock, ToolResultBlock
from orchestrator.engine import telemetry
from orchestrator.engine.budget import cut_points, fit, output_room
from orchestrator.providers.base import complete
from orchestrator.trace.spans import OFF, Span

log = logger(__name__)

SUMMARY_OUTPUT = 2048  # an auxiliary call: small cap (E16), and never more than a quarter of a small window
KEEP = 0.25  # share of the window the kept tail may take


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


async def compact(agent, partition, commit, *, window: int, fixed: int, overflow: bool = False,
                  calls: list[CallUsage] | None = None, span: Span = OFF) -> tuple[int, int] | None:
    """Summarize everything before the cut; returns (tokens before, after), or None when it cannot help.

    `fixed` is what every request carries besides history (system prompt, tool definitions). After
    the provider said `overflow`, our window estimate was wrong, so only the newest unit is kept.
    The summary call's usage is appended to `calls`, whether or not the summary is kept.
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
    system = render("compaction.md.j2")
    # The summary call carries its own short prompt, not the agent's system prompt and tools.
    budget = max(1, window - min(SUMMARY_OUTPUT, window // 4) - estimate(system))
    sent = estimate(system) + min(sum(partition.sizes[:cut]), budget)
    room = output_room(window, sent)  # what the window leaves the summary
    request = Request(agent=agent.name, model=agent.model, system=system,
                      messages=fit(older, partition.sizes[:cut], budget),
                      max_output_tokens=min(SUMMARY_OUTPUT, room), auxiliary=True, cache_key=agent.cache_key,
                      output_room=room)
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
    summary = response.blocks
    text = render("summary.md.j2", summary="".join(b.text for b in summary if isinstance(b, TextBlock)).strip(),
                  kept=_kept(older, agent.tools.kept()), kept_mark=KEPT)
    if estimate(text) >= sum(partition.sizes[:cut]):  # a summary no shorter than its source helps nobody
        log.info("compaction skipped: the summary is no shorter than what it would replace", agent=agent.name)
        return None
    await commit(Draft(author=agent.name, kind="summary", visible_to=[agent.name],
                       blocks=[TextBlock(text)], replaces=list(partition.ids[:cut])))
    return before, partition.tokens + fixed

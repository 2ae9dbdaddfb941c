"""Running one response's tool calls: adjacent read-only calls as one concurrent group.

A writing tool is a barrier; results come back in declared order whatever finishes first,
and a failing or unknown tool becomes an error result for the model, never a crash.
"""
from __future__ import annotations

import time

import msgspec
import trio

from orchestrator.core.log import logger
from orchestrator.core.secrets import redact
from orchestrator.core.types import ToolCallBlock, ToolResultBlock
from orchestrator.engine import telemetry
from orchestrator.tools.base import Registry, ToolContext, ToolError, ToolOutput
from orchestrator.tools.session import ToolSession
from orchestrator.trace.spans import Span, active

log = logger(__name__)


def groups(calls: list[ToolCallBlock], registry: Registry) -> list[list[int]]:
    """Indices of calls, grouped: a run of read-only calls together, every other call alone."""
    out: list[list[int]] = []
    for i, call in enumerate(calls):
        if _concurrent(call, registry) and out and out[-1][-1] == i - 1 and _concurrent(calls[i - 1], registry):
            out[-1].append(i)
        else:
            out.append([i])
    return out


def _concurrent(call: ToolCallBlock, registry: Registry) -> bool:
    tool = registry.get(call.name)
    return tool is not None and tool.concurrent


Run = tuple[ToolResultBlock, str | None, float]  # the result, the stop reason if any, seconds


async def execute(call: ToolCallBlock, registry: Registry, ctx: ToolContext, parent: Span | None = None) -> Run:
    """The call's result, the stop reason if the tool ends the turn, and its wall time.

    Its `execute_tool` span is current while the tool runs, so work it starts (a dispatched
    worker's turn) nests under it.
    """
    span = telemetry.tool_span(call, parent)
    started = time.perf_counter()
    if not span.recording:
        result, end = await _execute(call, registry, ctx)
        return result, end, time.perf_counter() - started
    try:
        with active(span):
            result, end = await _execute(call, registry, ctx)
    except BaseException as exc:
        span.end(exc)
        raise
    telemetry.end_tool(span, result.content, result.is_error)
    return result, end, time.perf_counter() - started


async def _execute(call: ToolCallBlock, registry: Registry, ctx: ToolContext) -> tuple[ToolResultBlock, str | None]:
    result, end = await _outcome(call, registry, ctx)
    # A server or command may echo back a credential it was given: masked here, before the model, the store,
    # the events or a trace can see it.
    if (masked := redact(result.content)) is not result.content:
        result = msgspec.structs.replace(result, content=masked)
    return result, end


async def _outcome(call: ToolCallBlock, registry: Registry, ctx: ToolContext) -> tuple[ToolResultBlock, str | None]:
    tool = registry.get(call.name)
    if tool is None:
        return ToolResultBlock(call.id, call.name, registry.missing(call.name), True), None
    try:
        args = tool.parse(call.input)
        out = await tool.run(args, ctx)
    except ToolError as exc:
        return ToolResultBlock(call.id, call.name, str(exc), True), None
    except Exception as exc:  # a tool bug is information for the model, not the end of the turn
        log.warning("tool crashed", tool=call.name, agent=ctx.agent, error=type(exc).__name__)
        return ToolResultBlock(call.id, call.name, f"{call.name} failed: {type(exc).__name__}: {exc}", True), None
    if isinstance(out, ToolOutput):
        return ToolResultBlock(call.id, call.name, out.text, out.is_error, list(out.images)), out.end_turn
    return ToolResultBlock(call.id, call.name, out), None


async def execute_group(calls: list[ToolCallBlock], registry: Registry, agent: str, session: ToolSession,
                        siblings: tuple[ToolCallBlock, ...], parent: Span | None = None) -> list[Run]:
    def ctx(call: ToolCallBlock) -> ToolContext:
        return ToolContext(agent=agent, call_id=call.id, session=session, siblings=siblings)

    if len(calls) == 1:
        return [await execute(calls[0], registry, ctx(calls[0]), parent)]
    results: list = [None] * len(calls)

    async def one(i: int) -> None:
        results[i] = await execute(calls[i], registry, ctx(calls[i]), parent)

    async with trio.open_nursery() as nursery:
        for i in range(len(calls)):
            nursery.start_soon(one, i)
    return results

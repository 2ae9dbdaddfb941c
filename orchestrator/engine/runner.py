"""The run loop of one agent: an async generator of turn events.

It knows nothing of rooms: history comes in as a Partition, messages go out through `commit`,
and whoever drives it decides who may see what. `run` is the non-streaming entry; it consumes the stream.
"""
from __future__ import annotations

import time
from contextlib import aclosing
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import AsyncGenerator, Awaitable, Callable, Protocol, Sequence

import trio

from orchestrator.core.errors import ContextOverflowError, ProviderError
from orchestrator.core.events import (
    CallUsage, Compaction, Done, Event, Retry, TextDeltaEvent, ToolEnd, ToolStart,
)
from orchestrator.core.prompts import render
from orchestrator.core.types import (
    Block, Draft, Message, MessageKind, Request, TextBlock, TextDelta, ToolCallBlock, ToolResultBlock,
    Usage, block_text,
)
from orchestrator.core.tokens import estimate
from orchestrator.engine import telemetry
from orchestrator.engine.budget import fitted, output_room
from orchestrator.engine.compaction import compact, summary_room
from orchestrator.engine.loopguard import LoopGuard
from orchestrator.engine.partition import Partition
from orchestrator.core.retry import RetryPolicy
from orchestrator.engine.toolcalls import execute_group, groups
from orchestrator.providers.base import Assembler, Provider, Response, server_window
from orchestrator.tools.base import Registry
from orchestrator.tools.session import ToolSession
from orchestrator.trace import semconv as sc
from orchestrator.trace.spans import Span

CANCELLED = "cancelled: the group was stopped before this tool finished"

# None: the caller holds the draft to commit it first with its next message (a tool call whose tools' first act
# is to post one: room/bus.py, Bus.hold).
Commit = Callable[[Draft], Awaitable[Message | None]]

# A request this small fits any window a server is started with, so its server is not asked for the window yet;
# one with a smaller window refuses the request, and the refusal names the window.
ASK_WINDOW_FROM = 1_024


class Meter(Protocol):
    """Counts model calls and tokens for whoever set limits; it may stop the group."""

    def on_call(self, agent: str) -> None: ...

    def on_usage(self, agent: str, usage: Usage) -> None: ...


@dataclass
class Agent:
    """What one engine turn needs to know about the agent it runs."""

    name: str
    provider: Provider
    model: str  # the model id sent to the provider, stamped on what it writes
    system: str
    tools: Registry = field(default_factory=Registry)
    workspace: Path = field(default_factory=Path.cwd)
    max_output_tokens: int | None = None
    thinking_budget: int | None = None  # extended thinking, where the vendor has it; None: the model's setting
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    cache_key: str = ""
    window: int = 200_000  # the model's real context window, in tokens
    budget: int | None = None  # tokens per request; default: the window less an output reserve
    compact_at: float = 0.8  # share of the window that triggers compaction
    session: ToolSession | None = None  # what tools share; alone, a session over `workspace`
    system_tokens: int = -1  # the system prompt's estimate, when the caller keeps it; else estimated here

    def __post_init__(self) -> None:
        if self.session is None:
            self.session = ToolSession(self.workspace)
        if self.system_tokens < 0:
            self.system_tokens = _system_tokens(self.system)

    @property
    def request_budget(self) -> int:
        """Tokens one request may take: the budget set, never beyond the window less an output reserve."""
        default = self.window - min(16_000, self.window // 5)
        return min(self.budget, default) if self.budget else default


# A member's system prompt is the same turn after turn until its inputs change (roster, floor, ledger,
# memory): estimated once per distinct text, not once per turn (a room keeps its own: Agent.system_tokens).
_system_tokens = lru_cache(maxsize=256)(estimate)


def _draft(agent: Agent, kind: MessageKind, blocks: list[Block], provider: str = "", model: str = "") -> Draft:
    return Draft(author=agent.name, kind=kind, blocks=blocks, visible_to=[agent.name], provider=provider, model=model)


async def run_turn(agent: Agent, partition: Partition, commit: Commit, meter: Meter | None = None,
                   links: tuple[Span, ...] = ()) -> AsyncGenerator[Event, None]:
    """One turn over `partition`: model call, tools, again, until the model stops calling tools.

    The caller has already committed the user's line. Drafts passed to `commit` carry
    `visible_to=[agent]`; the caller widens them by its own rules. The turn's span nests under the
    caller's current span; `links` name spans it follows from without being inside them.
    """
    # never made current: this generator yields, and a consumer may leave it suspended for good
    span = telemetry.agent_span(agent.name, agent.provider.id, agent.model, links)
    try:
        guard = LoopGuard()
        usage = Usage()
        while True:
            # Read every round: a tool may add tools for the next request (find_tools loads MCP schemas),
            # or take some away (a skill's allowed-tools).
            specs = agent.tools.specs()
            fixed = _fixed_tokens(agent)
            if meter:
                meter.on_call(agent.name)
            await trio.lowlevel.checkpoint_if_cancelled()  # a stop (or a limit just hit) sends nothing more
            # The server's own window, once it has said: the budget and compaction go by it from this call on.
            _narrow(agent, await server_window(agent.provider, agent.model,
                                               ask=partition.tokens + fixed >= ASK_WINDOW_FROM))
            request, history = _request(agent, partition, specs, fixed)
            # Compaction is checked before every call, so after each tool round and also for agents that only
            # talk; measured once old results are cleared, so the summary call waits until clearing cannot keep
            # the request under its threshold
            if history >= _compact_from(agent, fixed):
                side: list[CallUsage] = []
                # the summary call repeats this very request, so its prefix is the one the last call cached
                as_sent, _ = _request(agent, partition, specs, fixed,
                                      max(1, agent.window - summary_room(agent.window) - fixed))
                done = await compact(agent, partition, commit, as_sent, window=agent.window, fixed=fixed,
                                     history=history, calls=side, span=span)
                for ev in side:
                    yield ev
                if done:
                    yield _compacted(agent, span, done)
                    request, _ = _request(agent, partition, specs, fixed)
            attempt, compacted = 0, False
            while True:
                attempt += 1
                if attempt > 1:  # after a retry's wait or an overflow's compaction: the history may have changed
                    request, _ = _request(agent, partition, specs, fixed)
                sent = fixed + min(partition.tokens, agent.request_budget - fixed)
                partition.mark_read()
                asm = Assembler()
                chat = telemetry.chat_span(agent.provider.id, span, request)
                started = time.perf_counter()
                try:
                    try:
                        async with aclosing(agent.provider.stream(request)) as stream:
                            async for delta in stream:
                                asm.feed(delta)
                                if isinstance(delta, TextDelta):
                                    yield TextDeltaEvent(ts=time.time(), agent=agent.name, text=delta.text)
                    except BaseException as exc:
                        chat.end(exc)
                        raise
                    break
                except ContextOverflowError as exc:
                    # An overflow: compact and retry once; if that cannot help, the overflow goes up
                    _narrow(agent, exc.window)  # the refusal named the real window: compact to that
                    side = []
                    if not compacted:
                        done = await compact(agent, partition, commit, request, window=agent.window, fixed=fixed,
                                             overflow=True, calls=side, span=span)
                    for ev in side:
                        yield ev
                    if compacted or done is None:
                        raise
                    compacted = True
                    yield _compacted(agent, span, done)
                except ProviderError as exc:
                    delay = agent.retry.delay(attempt, exc)
                    if delay is None:
                        raise
                    span.event(sc.RETRY, {sc.ATTEMPT: attempt, sc.REASON: exc.kind, sc.DELAY: delay})
                    yield Retry(ts=time.time(), agent=agent.name, attempt=attempt, reason=exc.kind, delay=delay)
                    await trio.sleep(delay)
            response = asm.response
            seconds = time.perf_counter() - started
            # The reply may have taught the window (a cut that filled it): the notice and the next call use it.
            _narrow(agent, await server_window(agent.provider, agent.model, ask=False))
            calls = response.calls
            msg = None
            if response.blocks:
                msg = await commit(_draft(agent, "tool_call" if calls else "text", response.blocks,
                                          agent.provider.id, agent.model))
            # No counts from the provider: the partition has just estimated what came back.
            call = response.usage or telemetry.estimated_usage(sent, response.blocks,
                                                               partition.size_of(msg.id) if msg else None)
            telemetry.end_chat(chat, request.response_model, call, response.usage is None, response.stop_reason,
                               response.blocks)
            usage = Usage(usage.input + call.input, usage.output + call.output, usage.cached + call.cached)
            yield CallUsage(ts=time.time(), agent=agent.name, provider=agent.provider.id, model=agent.model,
                            input_tokens=call.input, output_tokens=call.output, cached_tokens=call.cached,
                            estimated=response.usage is None, seconds=seconds)
            if meter:
                meter.on_usage(agent.name, call)
            if not calls:
                if partition.unread:  # a line arrived while the model spoke: answer it in this turn
                    continue
                yield _done(span, agent, response.stop_reason, block_text(response.blocks), usage,
                            response=response)
                return
            # A call cut off by the output limit is answered with an error and never run (its arguments are
            # incomplete); the turn then ends, since asking again would most likely be cut again.
            whole = [c for c in calls if c.id not in response.cut]
            seen = dict(zip((c.id for c in whole), guard.see([(c.name, c.input) for c in whole])))
            verdicts = [seen.get(c.id, "cut") for c in calls]
            ended: list[str] = []
            async with aclosing(_run_calls(agent, calls, verdicts, commit, ended, response.cut, span,
                                           partition)) as round_events:
                async for round_event in round_events:
                    yield round_event
            if "nudge" in verdicts:
                await commit(_draft(agent, "notice", [TextBlock(render("loop_nudge.md.j2", count=guard.count))]))
            if "stop" in verdicts:
                yield _done(span, agent, "loop_detected", render("loop_stop.md.j2"), usage)
                return
            if ended or "cut" in verdicts:
                yield _done(span, agent, ended[0] if ended else "max_tokens", block_text(response.blocks), usage,
                            cut=[c.name for c in calls if c.id in response.cut], response=response)
                return
    except BaseException as exc:  # a stop, an error, or a consumer that went away: the span says which
        span.end(exc)
        raise
    finally:
        span.end()


def _compacted(agent: Agent, span: Span, done: tuple[int, int]) -> Compaction:
    span.event(sc.COMPACTION, {sc.TOKENS_BEFORE: done[0], sc.TOKENS_AFTER: done[1]})
    return Compaction(ts=time.time(), agent=agent.name, tokens_before=done[0], tokens_after=done[1])


def _done(span: Span, agent: Agent, stop_reason: str, result: str, usage: Usage,
          cut: Sequence[str] = (), response: Response | None = None) -> Done:
    """The turn's last event; its span ends here, whatever the consumer does after reading it. A reply the
    output limit ended says which limit it was (`response`'s), so the notice can say what would help."""
    if span.recording:
        span.update({sc.STOP_REASON: stop_reason, sc.USAGE_INPUT_TOKENS: usage.input,
                     sc.USAGE_OUTPUT_TOKENS: usage.output, sc.USAGE_CACHE_READ_INPUT_TOKENS: usage.cached})
        span.end()
    limit = (response.limit or "output") if response is not None and stop_reason == "max_tokens" else ""
    return Done(ts=time.time(), agent=agent.name, stop_reason=stop_reason, result=result,
                input_tokens=usage.input, output_tokens=usage.output, cached_tokens=usage.cached, cut=list(cut),
                limit=limit, max_tokens=response.max_tokens if limit and response else 0,
                window=agent.window if limit else 0)


def _narrow(agent: Agent, window: int | None) -> None:
    """The server's window, where it is smaller than the one assumed (a larger one the catalog gives next turn)."""
    if window and window < agent.window:
        agent.window = window


def next_request(agent: Agent, partition: Partition) -> Request:
    """What the agent's model would be sent now: the same request the next turn builds (the agent view)."""
    return _request(agent, partition, agent.tools.specs(), _fixed_tokens(agent))[0]


def _fixed_tokens(agent: Agent) -> int:
    """What every request spends before the history: the system prompt and the tool schemas."""
    return agent.system_tokens + agent.tools.spec_tokens()


def _compact_from(agent: Agent, fixed: int) -> int:
    """The history tokens at which compaction starts: what is left of its share of the window after the system
    prompt and tools. Old results are cleared down to it first."""
    return int(agent.compact_at * agent.window) - fixed


def _request(agent: Agent, partition: Partition, specs: list, fixed: int,
             budget: int | None = None) -> tuple[Request, int]:
    """The agent's next request, and its history's tokens once old results are cleared (before whole turns or
    rounds are cut). `budget`: the history's tokens at most (default: the request budget less `fixed`)."""
    budget = agent.request_budget - fixed if budget is None else budget
    # A line longer than the window less what every request carries can never be sent: it is left out.
    # Old results are cleared below where compaction would start, so that clearing comes first.
    messages, history = fitted(partition.view, partition.sizes, budget, partition.tokens,
                               most=agent.window - fixed, clear_to=_compact_from(agent, fixed) - 1)
    return Request(agent=agent.name, model=agent.model, system=agent.system, messages=list(messages),
                   tools=specs, max_output_tokens=agent.max_output_tokens, cache_key=agent.cache_key,
                   thinking_budget=agent.thinking_budget,
                   output_room=output_room(agent.window, fixed + min(partition.tokens, budget))), history


async def _run_calls(agent: Agent, calls: list[ToolCallBlock], verdicts: list[str],
                     commit: Commit, ended: list[str], cut: dict[str, str], span: Span,
                     partition: Partition) -> AsyncGenerator[Event, None]:
    """Execute, then commit results in declared order; on cancel, every open call gets a result.

    Calls whose verdict is "stop" (the loop guard) or "cut" (incomplete arguments) are answered, not run.
    """
    session = agent.session
    if session is None:  # never: Agent.__post_init__ makes one
        raise RuntimeError(f"agent {agent.name} has no tool session")
    answered: set[str] = set()
    try:
        for group in groups(calls, agent.tools):
            batch = [calls[i] for i in group]
            for call in batch:
                yield ToolStart(ts=time.time(), agent=agent.name, call_id=call.id, name=call.name, input=call.input)
            runnable = [c for c, i in zip(batch, group) if verdicts[i] not in ("stop", "cut")]
            siblings = tuple(calls)
            done = {r.call_id: (r, end, secs) for r, end, secs in
                    await execute_group(runnable, agent.tools, agent.name, session, siblings, span)}
            for call in batch:
                result, end, seconds = done.get(call.id, (None, None, 0.0))
                if end:
                    ended.append(end)
                    partition.ending = True  # the turn ends after this round: its results are its last words
                result = result or (_cut_result(call, cut[call.id]) if call.id in cut else
                                    ToolResultBlock(call.id, call.name, render("loop_stop.md.j2"), True))
                await commit(_draft(agent, "tool_result", [result]))
                answered.add(call.id)
                yield ToolEnd(ts=time.time(), agent=agent.name, call_id=call.id, name=call.name,
                              result=result.content, is_error=result.is_error, seconds=seconds)
    except BaseException:
        with trio.CancelScope(shield=True):
            for call in calls:
                if call.id not in answered:
                    await commit(_draft(agent, "tool_result", [
                        ToolResultBlock(call.id, call.name, CANCELLED, True)]))
        raise


async def run(agent: Agent, partition: Partition, commit: Commit, meter: Meter | None = None) -> Done:
    """The non-streaming entry point: consumes `run_turn` and returns its `done` event."""
    done: Done | None = None
    async with aclosing(run_turn(agent, partition, commit, meter)) as events:
        async for ev in events:
            if isinstance(ev, Done):
                done = ev
    assert done is not None
    return done


def _cut_result(call: ToolCallBlock, partial: str) -> ToolResultBlock:
    head = " ".join(partial.split())[:160]
    return ToolResultBlock(call.id, call.name, render("cut_call.md.j2", size=f"{len(partial):,}", head=head), True)

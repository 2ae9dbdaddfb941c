"""The one provider interface, the helper that turns a stream into a whole response, and the one that
asks any provider for the window its server said it has.

The engine sees only this: every vendor quirk stays inside its provider module.
"""
from __future__ import annotations

from contextlib import aclosing
from typing import AsyncGenerator, Protocol

import trio
from msgspec import Struct, field

from orchestrator.core.errors import ProviderError
from orchestrator.core.log import logger
from orchestrator.core.retry import RetryPolicy
from orchestrator.core.types import (
    Block, Limit, ModelMessage, Request, StreamEnd, StreamEvent, TextBlock, TextDelta, ThinkingBlock, ThinkingDelta,
    ToolCallBlock, ToolCallCut, ToolCallDone, Usage,
)

log = logger(__name__)


class Provider(Protocol):
    id: str

    def stream(self, request: Request) -> AsyncGenerator[StreamEvent, None]: ...  # closed with aclosing()

    async def validate_auth(self) -> None: ...


async def server_window(provider: Provider, model: str, *, ask: bool = True) -> int | None:
    """The context window the provider's server runs `model` with, when it has said (None: it has not, or the
    provider cannot tell). `ask`: it may be asked now, once; else only what is already known.

    Optional for a provider (`async def window(model, *, ask)`): the scripted model and test doubles have none.
    """
    window = getattr(provider, "window", None)
    return await window(model, ask=ask) if window is not None else None


async def served_models(provider: Provider) -> list[str] | None:
    """The model ids the provider's server lists (None: it cannot tell). Optional for a provider
    (`async def served()`), like `window`; errors are the provider's own (unreachable, auth)."""
    served = getattr(provider, "served", None)
    return await served() if served is not None else None


class Response(Struct, kw_only=True):
    blocks: list[Block] = field(default_factory=list)
    stop_reason: str = "end_turn"
    usage: Usage | None = None  # as the provider reported it
    cut: dict[str, str] = field(default_factory=dict)  # call id -> the arguments that arrived (ToolCallCut)
    limit: Limit = ""  # with stop_reason max_tokens: which limit ended it, and the cap sent (StreamEnd's)
    max_tokens: int = 0

    @property
    def calls(self) -> list[ToolCallBlock]:
        return [b for b in self.blocks if isinstance(b, ToolCallBlock)]


class Assembler:
    """Folds stream events into blocks: adjacent deltas of one kind join into one block."""

    def __init__(self) -> None:
        self.response = Response()
        self._text: list[str] = []
        self._thinking: list[str] = []
        self._signature = ""

    def feed(self, ev: StreamEvent) -> None:
        if isinstance(ev, TextDelta):
            self._flush_thinking()
            self._text.append(ev.text)
        elif isinstance(ev, ThinkingDelta) and ev.redacted:
            self._flush()
            self.response.blocks.append(ThinkingBlock(ev.text, ev.signature, redacted=True))
        elif isinstance(ev, ThinkingDelta):
            self._flush_text()
            if self._signature:  # a signature closes its block: the next thinking is a block of its own
                self._flush_thinking()
            self._thinking.append(ev.text)
            self._signature = ev.signature or self._signature
        elif isinstance(ev, ToolCallDone):
            self._flush()
            self.response.blocks.append(ToolCallBlock(ev.id, ev.name, ev.input))
        elif isinstance(ev, ToolCallCut):
            # Kept as a call with no arguments, so the stored reply and the error result that answers
            # it pair up like any other call.
            self._flush()
            self.response.blocks.append(ToolCallBlock(ev.id, ev.name, {}))
            self.response.cut[ev.id] = ev.partial
        elif isinstance(ev, StreamEnd):
            self._flush()
            self.response.stop_reason = ev.stop_reason
            self.response.usage = ev.usage
            self.response.limit, self.response.max_tokens = ev.limit, ev.max_tokens

    def _flush_text(self) -> None:
        if self._text:
            self.response.blocks.append(TextBlock("".join(self._text)))
            self._text = []

    def _flush_thinking(self) -> None:
        if self._thinking:
            self.response.blocks.append(ThinkingBlock("".join(self._thinking), self._signature))
            self._thinking, self._signature = [], ""

    def _flush(self) -> None:
        self._flush_thinking()
        self._flush_text()


async def complete(provider: Provider, request: Request, retry: RetryPolicy | None = None) -> Response:
    """Non-streaming call: consumes the same stream (one implementation of the call). `retry`: retryable errors wait and
    try again as that policy says (an auxiliary call has no turn whose loop would retry it)."""
    attempt = 0
    while True:
        attempt += 1
        asm = Assembler()
        try:
            async with aclosing(provider.stream(request)) as stream:
                async for ev in stream:
                    asm.feed(ev)
            return asm.response
        except ProviderError as exc:
            delay = retry.delay(attempt, exc) if retry is not None else None
            if delay is None:
                raise
            log.info("auxiliary call retried", agent=request.agent, reason=exc.kind, attempt=attempt, delay=delay)
            await trio.sleep(delay)


def thinking_for(messages: list[ModelMessage], provider: str, model: str) -> list[ModelMessage]:
    """Thinking goes back verbatim (signature included) only to the model that wrote it.

    For any other model it becomes plain text, and redacted thinking (opaque to everyone else) is dropped.
    """
    out = []
    for m in messages:
        if m.role != "assistant" or (m.provider == provider and m.model == model) or \
                not any(isinstance(b, ThinkingBlock) for b in m.blocks):
            out.append(m)
            continue
        blocks: list[Block] = []
        for b in m.blocks:
            if isinstance(b, ThinkingBlock):
                if not b.redacted and b.thinking:
                    blocks.append(TextBlock(f"(earlier reasoning) {b.thinking}"))
            else:
                blocks.append(b)
        out.append(ModelMessage(m.role, blocks, m.provider, m.model))
    return out

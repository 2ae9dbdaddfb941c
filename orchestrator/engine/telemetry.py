"""What the engine records about its own work: GenAI spans for agents, model calls and tools, and
the usage of each model call (the provider's counts, else our estimate, marked as such).

Every span helper returns the inert `OFF` span at its first check while tracing is off.
"""
from __future__ import annotations

import os
import msgspec

from orchestrator.core.tokens import estimate
from orchestrator.core.types import (
    Block, ModelMessage, Request, TextBlock, ThinkingBlock, ToolCallBlock, Usage, block_text,
)
from orchestrator.trace import semconv as sc
from orchestrator.trace.spans import OFF, TRACER, Attributes, Span


def capture_content() -> bool:
    """Opt-in (privacy): message text, tool arguments and results go on spans only when asked for."""
    return os.environ.get(sc.CAPTURE_CONTENT_ENV, "").lower() in ("1", "true", "yes")


def agent_span(agent: str, provider: str, model: str, links: tuple[Span, ...] = ()) -> Span:
    """Under the current span: the room makes the line, or the tool call that started this turn, current."""
    if not TRACER.on:
        return OFF
    return TRACER.start(f"{sc.INVOKE_AGENT} {agent}", links=links, attributes={
        sc.OPERATION_NAME: sc.INVOKE_AGENT, sc.AGENT_NAME: agent, sc.PROVIDER_NAME: provider, sc.REQUEST_MODEL: model})


def chat_span(provider: str, parent: Span, request: Request) -> Span:
    if not TRACER.on:
        return OFF
    attrs: Attributes = {sc.OPERATION_NAME: sc.CHAT, sc.AGENT_NAME: request.agent, sc.PROVIDER_NAME: provider,
                         sc.REQUEST_MODEL: request.model}
    if request.max_output_tokens:
        attrs[sc.REQUEST_MAX_TOKENS] = request.max_output_tokens
    if request.auxiliary:
        attrs[sc.AUXILIARY] = True
    if capture_content():
        attrs[sc.INPUT_MESSAGES] = _messages(request.messages)
    return TRACER.start(f"{sc.CHAT} {request.model}", "client", parent=parent, attributes=attrs)


def end_chat(span: Span, model: str, usage: Usage, estimated: bool, stop_reason: str, blocks: list[Block]) -> None:
    """`model` is what the server said answered ("" when it did not say: then no response model is claimed)."""
    if not span.recording:
        return
    span.update({sc.USAGE_INPUT_TOKENS: usage.input,
                 sc.USAGE_OUTPUT_TOKENS: usage.output, sc.USAGE_CACHE_READ_INPUT_TOKENS: usage.cached,
                 sc.RESPONSE_FINISH_REASONS: [stop_reason]})
    if model:
        span.set(sc.RESPONSE_MODEL, model)
    if estimated:
        span.set(sc.USAGE_ESTIMATED, True)
    if capture_content():
        span.set(sc.OUTPUT_MESSAGES, _messages([ModelMessage("assistant", blocks)]))
    span.end()


def tool_span(call: ToolCallBlock, parent: Span | None) -> Span:
    if not TRACER.on:
        return OFF
    attrs = {sc.OPERATION_NAME: sc.EXECUTE_TOOL, sc.TOOL_NAME: call.name, sc.TOOL_CALL_ID: call.id,
             sc.TOOL_TYPE: "function"}
    if capture_content():
        attrs[sc.TOOL_CALL_ARGUMENTS] = msgspec.json.encode(call.input).decode()
    return TRACER.start(f"{sc.EXECUTE_TOOL} {call.name}", parent=parent or "current", attributes=attrs)


def end_tool(span: Span, content: str, is_error: bool) -> None:
    if not span.recording:
        return
    if capture_content():
        span.set(sc.TOOL_CALL_RESULT, content)
    span.end(content[:300] if is_error else None)


def estimated_usage(sent_tokens: int, blocks: list[Block], received: int | None = None) -> Usage:
    """What a call cost by our count, for providers that report nothing: what was sent, and what came
    back (`received` when it was already estimated, else one estimate over all of it)."""
    if received is not None:
        return Usage(input=sent_tokens, output=received)
    parts = [block_text(blocks)]
    for b in blocks:
        if isinstance(b, ThinkingBlock) and not b.redacted:
            parts.append(b.thinking)
        elif isinstance(b, ToolCallBlock):
            parts.append(f"{b.name} {msgspec.json.encode(b.input).decode()}")
    return Usage(input=sent_tokens, output=estimate("\n".join(parts) if len(parts) > 1 else parts[0]))


def _messages(messages: list[ModelMessage]) -> str:
    """The conventions' message shape, as a JSON string: span attributes hold only flat values."""
    return msgspec.json.encode([{"role": m.role, "parts": [{"type": "text", "content": b.text} for b in m.blocks
                                                          if isinstance(b, TextBlock)]} for m in messages]).decode()

"""The Anthropic Messages provider: request bodies (roles merged, thinking echoed, cache breakpoints) and
the streamed reply parsed into stream events, with every failure mapped to an error class.
"""
from __future__ import annotations

from typing import Any, AsyncGenerator, Callable, Sequence

import httpx
import msgspec
from msgspec import Struct

from orchestrator.core import errors as E
from orchestrator.core.types import (
    Block, ImageBlock, Limit, Request, StopReason, StreamEnd, StreamEvent, TextBlock, TextDelta, ThinkingBlock,
    ThinkingDelta, ToolCallBlock, ToolCallCut, ToolCallDone, ToolResultBlock, Usage,
)
from orchestrator.providers import http, windows
from orchestrator.providers.base import thinking_for
from orchestrator.providers.sse import SSE
from orchestrator.providers.windows import Windows

_EPHEMERAL = {"type": "ephemeral"}
_ANSWER_ROOM = 4096  # output tokens kept for the answer above a thinking budget
# The API requires the first message to be the user's; a history cut by compaction may start with the model.
_PLACEHOLDER = "(The conversation continues.)"

_ERROR_TYPES: dict[str, type[E.ProviderError]] = {
    "overloaded_error": E.OverloadedError,
    "api_error": E.ServerError,
    "rate_limit_error": E.RateLimitError,
    "authentication_error": E.AuthError,
    "permission_error": E.AuthError,
    "billing_error": E.QuotaError,
    "invalid_request_error": E.InvalidRequestError,
    "timeout_error": E.ProviderTimeout,
    "request_too_large": E.InvalidRequestError,  # bytes (images, documents), not tokens: not an overflow
}

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn", "tool_use": "tool_use", "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence", "refusal": "refusal",
    "pause_turn": "end_turn",  # a paused server-tool turn: what came so far is the answer
}


# --- request ----------------------------------------------------------------------------

def _image(b: ImageBlock) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": b.media_type, "data": b.data}}


def _tool_result(b: ToolResultBlock) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "tool_result", "tool_use_id": b.call_id, "is_error": b.is_error}
    if b.images:  # Anthropic takes a tool's images inside its result, so no extra user message
        out["content"] = ([{"type": "text", "text": b.content}] if b.content.strip() else []) + \
            [_image(i) for i in b.images]
    elif b.content:
        out["content"] = b.content
    return out


def _assistant_blocks(blocks: list[Block]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for b in blocks:
        if isinstance(b, ThinkingBlock) and b.redacted:
            out.append({"type": "redacted_thinking", "data": b.thinking})
        elif isinstance(b, ThinkingBlock):
            out.append({"type": "thinking", "thinking": b.thinking, "signature": b.signature})
        elif isinstance(b, TextBlock) and b.text.strip():  # the API rejects empty and whitespace-only text
            out.append({"type": "text", "text": b.text})
        elif isinstance(b, ToolCallBlock):
            out.append({"type": "tool_use", "id": b.id, "name": b.name, "input": b.input})
    return out


def _user_blocks(blocks: list[Block]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(tool results, everything else): results must lead the user message they are in."""
    results, rest = [], []
    for b in blocks:
        if isinstance(b, ToolResultBlock):
            results.append(_tool_result(b))
        elif isinstance(b, TextBlock) and b.text.strip():
            rest.append({"type": "text", "text": b.text})
        elif isinstance(b, ImageBlock):
            rest.append(_image(b))
    return results, rest


def build_body(request: Request, provider_id: str, max_tokens: int, thinking: int | None = None) -> dict[str, Any]:
    """The JSON body of one streamed Messages call.

    Cache breakpoints (Anthropic allows at most 4): the last tool definition and the system block cache the stable
    prefix; the last block of the last user message caches the conversation so far, and the same mark
    on the user message before it makes the previous call's entry an exact hit even when one round
    added more blocks than the API looks back over (about 20).
    """
    turns: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]]]] = []  # (role, tool results, blocks)
    for m in thinking_for(request.messages, provider_id, request.model):
        results: list[dict[str, Any]]
        if m.role == "assistant":
            results, rest = [], _assistant_blocks(m.blocks)
        else:
            results, rest = _user_blocks(m.blocks)
        if not results and not rest:
            continue
        if turns and turns[-1][0] == m.role:  # the API needs alternating roles: merge same-role neighbours
            turns[-1][1].extend(results)
            turns[-1][2].extend(rest)
        else:
            turns.append((m.role, results, rest))
    if not turns or turns[0][0] != "user":
        turns.insert(0, ("user", [], [{"type": "text", "text": _PLACEHOLDER}]))
    messages: list[dict[str, Any]] = [{"role": role, "content": results + rest} for role, results, rest in turns]
    for msg in [m for m in messages if m["role"] == "user"][-2:]:
        msg["content"][-1]["cache_control"] = _EPHEMERAL

    body: dict[str, Any] = {"model": request.model, "max_tokens": max_tokens, "stream": True}
    budget = request.thinking_budget or thinking
    if budget and not request.auxiliary:  # summaries get a small output cap and need no reasoning
        # The budget counts inside max_tokens and must stay below it: room is kept for the answer.
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        body["max_tokens"] = max(max_tokens, budget + _ANSWER_ROOM)
    if request.system.strip():
        body["system"] = [{"type": "text", "text": request.system, "cache_control": _EPHEMERAL}]
    if request.tools:
        body["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.input_schema}
                         for t in request.tools]
        body["tools"][-1]["cache_control"] = _EPHEMERAL
    body["messages"] = messages
    return body


# --- errors -----------------------------------------------------------------------------

class _ErrorBody(Struct, frozen=True):
    type: str = ""
    message: str = ""
    details: dict[str, Any] | None = None


class _ErrorEnvelope(Struct, frozen=True):
    error: _ErrorBody


def classify(error: _ErrorBody, provider: str, *, status: int | None = None,
             wait: float | None = None) -> E.ProviderError:
    """The class of an error body, from `error.type` first (the status is less precise); the caller redacts."""
    where = f"HTTP {status}" if status else "stream error"
    message = f"{where} {error.type or 'error'}: {error.message}"
    if (error.details or {}).get("error_code") == "enforced_spend_limit_reached":  # a 429 that waiting won't fix
        return E.QuotaError(message, provider=provider, retry_after=wait)
    cls = _ERROR_TYPES.get(error.type)
    if cls is E.InvalidRequestError and error.type == "invalid_request_error" and http.is_overflow(error.message):
        # "prompt is too long: 210000 tokens > 200000 maximum": the window is learned from it
        return E.ContextOverflowError(message, provider=provider, window=windows.from_refusal(None, error.message))
    if cls in (None, E.ServerError) and http.is_malformed_output(error.message):  # llama.cpp's Messages route
        return E.MalformedOutputError(f"{http.MALFORMED}: {message}", provider=provider, retry_after=wait)
    if cls is None:
        if status is not None:
            return http.by_status(status, message, provider, wait)
        cls = E.ServerError  # an unknown failure after a 200: the request was accepted, so the server failed
    return cls(message, provider=provider, retry_after=wait)


# --- stream -----------------------------------------------------------------------------

class _Usage(Struct, frozen=True):
    # None = not sent: older streams repeat only output_tokens in message_delta
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None


class _StartMessage(Struct, frozen=True):
    usage: _Usage = _Usage()
    model: str = ""  # the model that answers, as the server names it


class _MessageStart(Struct, frozen=True):
    message: _StartMessage


class _Block(Struct, frozen=True):
    type: str
    text: str = ""
    thinking: str = ""
    data: str = ""
    id: str = ""
    name: str = ""


class _BlockStart(Struct, frozen=True):
    index: int
    content_block: _Block


class _Delta(Struct, frozen=True):
    type: str
    text: str = ""
    thinking: str = ""
    signature: str = ""
    partial_json: str = ""


class _BlockDelta(Struct, frozen=True):
    index: int
    delta: _Delta


class _BlockStop(Struct, frozen=True):
    index: int


class _MessageDeltaBody(Struct, frozen=True):
    stop_reason: str | None = None


class _MessageDelta(Struct, frozen=True):
    delta: _MessageDeltaBody = _MessageDeltaBody()
    usage: _Usage = _Usage()


class _Open:
    """A content block between its start and stop events."""

    def __init__(self, block: _Block):
        self.type, self.id, self.name = block.type, block.id, block.name
        self.signature = ""
        self.json: list[str] = []


class StreamParser:
    """Turns the SSE events of one streamed reply into stream events; fed one event at a time (no I/O)."""

    def __init__(self, provider: str = "anthropic", secrets: Sequence[str] = ()):
        self.provider = provider
        self.done = False
        self._secrets = list(secrets)
        self._blocks: dict[int, _Open] = {}
        self._unreadable: list[_Open] = []  # tool calls whose JSON did not parse: cut off, or broken
        self._usage: dict[str, int] = {}
        self._stop: str | None = None
        self.model = ""  # as message_start names it
        self._handlers = {
            "message_start": self._message_start, "content_block_start": self._block_start,
            "content_block_delta": self._block_delta, "content_block_stop": self._block_stop,
            "message_delta": self._message_delta, "message_stop": self._message_stop, "error": self._error,
        }

    def feed(self, sse: SSE) -> list[StreamEvent]:
        if self.done:
            return []
        try:
            data = msgspec.json.decode(sse.data)
        except msgspec.DecodeError:
            raise self._protocol(f"malformed JSON in a {sse.event!r} event: {sse.data[:200]!r}") from None
        if not isinstance(data, dict):
            raise self._protocol(f"a {sse.event!r} event is not a JSON object: {sse.data[:200]!r}")
        # Every Anthropic event is named; the name is repeated in data.type for unnamed relays
        kind = sse.event if sse.event != "message" else str(data.get("type"))
        handler = self._handlers.get(kind)
        if handler is None:  # ping and event types newer than this code
            return []
        try:
            return handler(data)
        except msgspec.ValidationError as exc:
            raise self._protocol(f"malformed {kind} event: {exc}") from None

    def finish(self) -> None:
        """Call when the byte stream ended: without message_stop the transfer was cut."""
        if not self.done:
            raise http.interrupted(self.provider)

    def _protocol(self, message: str) -> E.ProtocolError:
        return E.ProtocolError(http.redact(message, self._secrets), provider=self.provider)

    def _merge_usage(self, usage: _Usage) -> None:
        self._usage.update({k: v for k, v in msgspec.structs.asdict(usage).items() if v is not None})

    def _message_start(self, data: dict) -> list[StreamEvent]:
        message = msgspec.convert(data, _MessageStart).message
        self._merge_usage(message.usage)
        self.model = message.model
        return []

    def _block_start(self, data: dict) -> list[StreamEvent]:
        ev = msgspec.convert(data, _BlockStart)
        block = ev.content_block
        self._blocks[ev.index] = _Open(block)
        if block.type == "text" and block.text:
            return [TextDelta(block.text)]
        if block.type == "thinking" and block.thinking:
            return [ThinkingDelta(block.thinking)]
        if block.type == "redacted_thinking":  # arrives whole, has no deltas, goes back verbatim
            return [ThinkingDelta(block.data, redacted=True)]
        return []  # tool_use waits for its stop; server tools, citations and newer types are not ours

    def _open(self, index: int, what: str) -> _Open:
        if index not in self._blocks:
            raise self._protocol(f"{what} for content block {index}, which was never started")
        return self._blocks[index]

    def _block_delta(self, data: dict) -> list[StreamEvent]:
        ev = msgspec.convert(data, _BlockDelta)
        block, delta = self._open(ev.index, ev.delta.type), ev.delta
        if block.type == "text" and delta.type == "text_delta" and delta.text:
            return [TextDelta(delta.text)]
        if block.type == "thinking" and delta.type == "thinking_delta" and delta.thinking:
            return [ThinkingDelta(delta.thinking)]
        if block.type == "thinking" and delta.type == "signature_delta":
            block.signature = delta.signature
        elif block.type == "tool_use" and delta.type == "input_json_delta":
            block.json.append(delta.partial_json)
        return []

    def _block_stop(self, data: dict) -> list[StreamEvent]:
        index = msgspec.convert(data, _BlockStop).index
        block = self._open(index, "content_block_stop")
        del self._blocks[index]
        if block.type == "thinking" and block.signature:
            return [ThinkingDelta("", block.signature)]  # the Assembler attaches it to the thinking so far
        if block.type != "tool_use":
            return []
        args = _arguments(block)
        if args is None:
            # Whether the output limit cut it (max_tokens) or the server broke it is known only from the
            # stop reason, which comes later in message_delta.
            self._unreadable.append(block)
            return []
        return [ToolCallDone(block.id, block.name, args)]

    def _message_delta(self, data: dict) -> list[StreamEvent]:
        ev = msgspec.convert(data, _MessageDelta)
        self._stop = ev.delta.stop_reason or self._stop
        self._merge_usage(ev.usage)  # cumulative counts: they replace message_start's
        return []

    def _message_stop(self, data: dict) -> list[StreamEvent]:
        self.done = True
        if self._stop == "model_context_window_exceeded":
            raise E.ContextOverflowError("the output reached the model's context window "
                                         "(stop_reason model_context_window_exceeded)", provider=self.provider)
        # A tool_use block still open at the end lost its stop event; its arguments may still be whole.
        cut: list[StreamEvent] = []
        for block in self._unreadable + [b for b in self._blocks.values() if b.type == "tool_use"]:
            raw = "".join(block.json)
            if (args := _arguments(block)) is not None:
                cut.append(ToolCallDone(block.id, block.name, args))
            elif self._stop == "max_tokens":  # the output limit, not the server: the model sees what it lost
                cut.append(ToolCallCut(block.id, block.name, raw))
            else:
                raise self._protocol(f"tool call {block.name!r} has invalid JSON arguments: {raw[:200]!r}")
        u = self._usage
        cached = u.get("cache_read_input_tokens", 0)
        usage = Usage(input=u.get("input_tokens", 0) + u.get("cache_creation_input_tokens", 0) + cached,
                      output=u.get("output_tokens", 0), cached=cached)
        return cut + [StreamEnd(_STOP_REASONS.get(self._stop or "", "end_turn"), usage)]

    def _error(self, data: dict) -> list[StreamEvent]:
        err = msgspec.convert(data, _ErrorEnvelope).error
        raise classify(msgspec.structs.replace(err, message=http.redact(err.message, self._secrets)), self.provider)


def _arguments(block: _Open) -> dict[str, Any] | None:
    """The call's arguments, or None when the JSON is unreadable or not an object."""
    raw = "".join(block.json)
    if not raw.strip():
        return {}
    try:
        args = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return None
    return args if isinstance(args, dict) else None


def whole_message(payload: Any) -> list[SSE]:
    """The events a stream of this complete Message (or error body) would have had."""
    def event(kind: str, **data: Any) -> SSE:
        return SSE(kind, msgspec.json.encode({"type": kind, **data}).decode())

    if not isinstance(payload, dict) or payload.get("type") == "error" or "error" in payload:
        return [SSE("error", msgspec.json.encode(payload).decode())]
    content = payload.get("content")
    if not isinstance(content, list):
        raise ValueError("a complete JSON reply that is neither a message nor an error")
    usage = payload.get("usage") or {}
    events = [event("message_start", message={**payload, "content": [], "usage": usage})]
    for i, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "tool_use":
            events += [event("content_block_start", index=i, content_block={**block, "input": {}}),
                       event("content_block_delta", index=i, delta={
                           "type": "input_json_delta", "partial_json": msgspec.json.encode(block.get("input")).decode()})]
        elif kind == "thinking":
            events += [event("content_block_start", index=i, content_block=block),
                       event("content_block_delta", index=i,
                             delta={"type": "signature_delta", "signature": block.get("signature", "")})]
        elif kind is not None:
            events.append(event("content_block_start", index=i, content_block=block))
        events.append(event("content_block_stop", index=i))
    return events + [event("message_delta", delta={"stop_reason": payload.get("stop_reason")}, usage=usage),
                     event("message_stop")]


# --- provider ---------------------------------------------------------------------------

class Anthropic:
    """One Anthropic endpoint and key; `stream` is the only call the engine makes."""

    def __init__(self, *, id: str = "anthropic", base_url: str = "https://api.anthropic.com",  # noqa: A002
                 api_key: str | None = None, client: httpx.AsyncClient | None = None,
                 version: str = "2023-06-01", max_tokens_for: Callable[[str], int] = lambda model: 8192,
                 thinking_for: Callable[[str], int | None] = lambda model: None, learned: Windows | None = None):
        self.id = id
        self._base = base_url.rstrip("/")
        self._key = api_key or ""
        self._own_client = client is None
        self._client = client or httpx.AsyncClient(timeout=http.TIMEOUT)
        self._headers = {"anthropic-version": version, "content-type": "application/json"}
        if api_key:
            self._headers["x-api-key"] = api_key
        self._max_tokens_for = max_tokens_for
        self._thinking_for = thinking_for
        self.learned = learned or Windows()  # windows the API named in its refusals

    async def stream(self, request: Request) -> AsyncGenerator[StreamEvent, None]:
        asked = request.max_output_tokens or self._max_tokens_for(request.model)
        cap = min(asked, request.output_room) if request.output_room else asked
        body = build_body(request, self.id, cap, self._thinking_for(request.model))
        parser = StreamParser(self.id, [self._key])
        try:
            async with http.post_events(self._client, f"{self._base}/v1/messages", body, self._headers,
                                        self._http_error, whole_message, self.id) as events:
                async for sse in events:
                    for ev in parser.feed(sse):
                        if isinstance(ev, StreamEnd):
                            request.response_model = parser.model
                            if ev.stop_reason == "max_tokens":  # only ever at the cap sent: ours, or the room left
                                sent = body["max_tokens"]
                                limit: Limit = "window" if sent < asked else "output"
                                ev = msgspec.structs.replace(ev, limit=limit, max_tokens=sent)
                        yield ev
                    if parser.done:  # the end marker: a fault after it no longer matters
                        return
            parser.finish()
        except httpx.TransportError as exc:
            raise self._scrubbed(http.transport(exc, self.id, self._base)) from exc
        except httpx.DecodingError as exc:
            raise E.ProtocolError(self._redact(f"undecodable response body: {exc}"), provider=self.id) from exc
        except E.ContextOverflowError as exc:
            self.learned.learn(self._base, request.model, exc.window)
            raise

    async def window(self, model: str, *, ask: bool = True) -> int | None:
        """The window learned from a refusal; the Messages API's model listing names none, so nothing is asked."""
        return self.learned.known(self._base, model)

    async def validate_auth(self) -> None:
        await self.served()

    async def served(self) -> list[str] | None:
        """The model ids the server lists (None: its answer is no listing)."""
        try:
            resp = await self._client.get(f"{self._base}/v1/models", headers=self._headers)
        except httpx.TransportError as exc:
            raise self._scrubbed(http.transport(exc, self.id, self._base)) from exc
        if not resp.is_success:
            raise self._http_error(resp)
        try:
            return windows.listed_ids(msgspec.json.decode(resp.content))
        except (msgspec.DecodeError, RecursionError):
            return None

    async def aclose(self) -> None:
        if self._own_client:
            await self._client.aclose()

    def _redact(self, text: str) -> str:
        return http.redact(text, [self._key])

    def _scrubbed(self, err: E.ProviderError) -> E.ProviderError:
        return type(err)(self._redact(str(err)), provider=err.provider, retry_after=err.retry_after)

    def _http_error(self, resp: httpx.Response) -> E.ProviderError:
        text = self._redact(resp.text)
        try:
            error = msgspec.json.decode(resp.content, type=_ErrorEnvelope).error
        except msgspec.DecodeError:  # also a ValidationError: a proxy's HTML page or another vendor's shape
            message = f"HTTP {resp.status_code}: {text[:500] or resp.reason_phrase}"
            return http.by_status(resp.status_code, message, self.id, http.retry_after(resp.headers, text))
        error = msgspec.structs.replace(error, message=self._redact(error.message))
        return classify(error, self.id, status=resp.status_code, wait=http.retry_after(resp.headers, error.message))

"""OpenAI-compatible Chat Completions, streamed: OpenAI and its imitators (Ollama, vLLM, llama.cpp, OpenRouter).
Owns the request body, the chunk parser with each server's quirks, error classes,
and asking a server for the window it runs a model with.
"""
from __future__ import annotations

import hashlib
import secrets as _random
from contextlib import suppress
from typing import Any, AsyncGenerator, Callable

import httpx
import msgspec
import trio
from msgspec import Struct, field

from orchestrator.core import errors as E
from orchestrator.core.tokens import estimate
from orchestrator.core.types import (
    request_text,
    ImageBlock, Limit, ModelMessage, Request, StopReason, StreamEnd, StreamEvent, TextBlock, TextDelta, ThinkingDelta,
    ToolCallBlock, ToolCallCut, ToolCallDone, ToolResultBlock, Usage,
)
from orchestrator.providers import http, windows
from orchestrator.providers.base import thinking_for
from orchestrator.providers.windows import Windows
from orchestrator.providers.sse import SSE

_CACHE_KEY_MAX = 64  # OpenAI's limit for prompt_cache_key

# --- the request ---------------------------------------------------------------------------


def build_body(request: Request, provider_id: str, *, official: bool) -> dict:
    """The JSON body for one streamed call. `official` is api.openai.com, whose newer fields others reject."""
    body: dict[str, Any] = {
        "model": request.model,
        "messages": _messages(request, provider_id),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        body["tools"] = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                           "parameters": t.input_schema}}
                         for t in request.tools]
    if request.max_output_tokens is not None:
        # max_tokens is deprecated at OpenAI (and refused by o-series models), but it is all Ollama and co. know.
        body["max_completion_tokens" if official else "max_tokens"] = request.max_output_tokens
    if official and request.cache_key:
        key = request.cache_key
        # The cache key: a sha256 hex digest is exactly 64 characters, so long keys stay unique and within the limit.
        body["prompt_cache_key"] = key if len(key) <= _CACHE_KEY_MAX else hashlib.sha256(key.encode()).hexdigest()
    return body


def _messages(request: Request, provider_id: str) -> list[dict]:
    out: list[dict] = [{"role": "system", "content": request.system}] if request.system else []
    run: list[ModelMessage] = []  # consecutive user-side messages: one tool round plus what the user added
    for m in thinking_for(request.messages, provider_id, request.model):
        if m.role == "user":
            run.append(m)
            continue
        out += _user_side(run)
        run = []
        out.append(_assistant(m))
    return out + _user_side(run)


def _assistant(m: ModelMessage) -> dict:
    # ThinkingBlocks left here belong to this very model (thinking_for turned the others into text), but
    # Chat Completions has no field to echo reasoning back, so they are dropped.
    # Several text blocks in one turn (split by calls, or reasoning turned into text) must not run together.
    text = "\n\n".join(b.text for b in m.blocks if isinstance(b, TextBlock))
    calls = [{"id": b.id, "type": "function",
              "function": {"name": b.name, "arguments": msgspec.json.encode(b.input).decode()}}
             for b in m.blocks if isinstance(b, ToolCallBlock)]
    if not calls:
        return {"role": "assistant", "content": text}  # never null without calls: servers reject that
    return {"role": "assistant", "content": text or None, "tool_calls": calls}


def _user_side(run: list[ModelMessage]) -> list[dict]:
    """Tool messages first, right after the assistant turn; then one user message.

    A tool message holds text only, so a tool's images travel in the user message that follows all the
    tool messages of the round, ahead of whatever the user said.
    """
    tools: list[dict] = []
    parts: list[dict] = []
    said: list[dict] = []
    for m in run:
        for b in m.blocks:
            if isinstance(b, ToolResultBlock):
                # The model must know the call failed, and a tool message has no error flag.
                tools.append({"role": "tool", "tool_call_id": b.call_id,
                              "content": f"ERROR: {b.content}" if b.is_error else b.content})
                if b.images:
                    parts.append({"type": "text", "text": f"Image(s) returned by tool call {b.name} ({b.call_id}):"})
                    parts += [_image(i) for i in b.images]
            elif isinstance(b, TextBlock):
                said.append({"type": "text", "text": b.text})
            elif isinstance(b, ImageBlock):
                said.append(_image(b))
    parts += said
    if not parts:
        return tools
    if all(p["type"] == "text" for p in parts):
        return tools + [{"role": "user", "content": "\n\n".join(p["text"] for p in parts)}]
    return tools + [{"role": "user", "content": parts}]


def _image(b: ImageBlock) -> dict:
    # Data URLs, because Ollama does not fetch remote images.
    return {"type": "image_url", "image_url": {"url": f"data:{b.media_type};base64,{b.data}"}}


# --- errors --------------------------------------------------------------------------------

_QUOTA = {"insufficient_quota"}
_OVERFLOW = {"context_length_exceeded", "exceed_context_size_error"}
_POLICY = {"content_filter", "content_policy_violation"}
# An in-stream error has no HTTP status to go by: these names say more than the default (a server fault).
_STREAM_KINDS: dict[str, type[E.ProviderError]] = {
    "rate_limit_exceeded": E.RateLimitError,
    "invalid_request_error": E.InvalidRequestError,
}


def _clean(err: E.ProviderError, keys: list[str]) -> E.ProviderError:
    """The same error with every key removed from its message (servers echo keys back)."""
    return type(err)(http.redact(str(err), keys), provider=err.provider, retry_after=err.retry_after)


def _classify(payload: Any, *, provider: str, keys: list[str], status: int | None = None,
              headers: httpx.Headers | None = None, text: str = "") -> E.ProviderError:
    """One error class from an error body: an HTTP error response, or an error sent inside a 200 stream.

    Shapes: `{"error": {...}}` (OpenAI, vLLM, OpenRouter, llama.cpp), `{"error": "..."}`, and flat
    `{"object": "error", "message", "type", "code"}` (older vLLM, llama.cpp's `error:` field).
    """
    err = payload.get("error", payload) if isinstance(payload, dict) else None
    if not isinstance(err, dict):
        err = {"message": err if isinstance(err, str) else text}
    code, kind = err.get("code"), err.get("type")
    names = {str(v).lower() for v in (code, kind) if v is not None}
    if status is None and isinstance(code, int) and 400 <= code <= 599:
        status = code  # vLLM, llama.cpp and OpenRouter put the HTTP status in `code` of an in-stream error
    message = str(err.get("message") or text or "no error message")[:1000]
    label = f"HTTP {status}" if status else "error in the stream"
    if tag := next((str(v) for v in (code, kind) if isinstance(v, str) and v), ""):
        label += f" ({tag})"
    message = http.redact(f"{label}: {message}", keys)
    try:
        wait = http.retry_after(headers if headers is not None else httpx.Headers(), message)
    except ValueError:  # a Retry-After that is neither seconds nor a date: no server delay
        wait = None
    cls: type[E.ProviderError]
    if names & _QUOTA:
        cls = E.QuotaError  # billing, not a rate limit: waiting does not help
    elif names & _OVERFLOW:
        cls = E.ContextOverflowError
    elif names & _POLICY:
        cls = E.ContentPolicyError
    elif http.is_malformed_output(message):  # before the status: llama.cpp sends it as a 500
        return E.MalformedOutputError(f"{http.MALFORMED}: {message}", provider=provider, retry_after=wait)
    elif status:
        err = http.by_status(status, message, provider, wait)
        if not isinstance(err, E.ContextOverflowError):
            return err
        cls = E.ContextOverflowError
    elif http.is_overflow(message):
        cls = E.ContextOverflowError
    else:
        cls = next((_STREAM_KINDS[n] for n in names if n in _STREAM_KINDS), E.ServerError)
    if cls is E.ContextOverflowError:  # the refusal may say how large the window is: it is learned
        return E.ContextOverflowError(message, provider=provider, window=windows.from_refusal(payload, message))
    return cls(message, provider=provider, retry_after=wait)


_INVALID = object()


def _decode(data: str | bytes) -> Any:
    """JSON, or the marker `_INVALID` (msgspec raises RecursionError on absurd nesting)."""
    try:
        return msgspec.json.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return _INVALID


# --- the stream ----------------------------------------------------------------------------

class _Function(Struct):
    name: str | None = None
    arguments: str | None = None  # vLLM omits it in a call's first chunk


class _CallDelta(Struct):
    index: int | None = None
    id: str | None = None
    function: _Function | None = None


class _Delta(Struct):
    content: str | None = None
    reasoning: str | None = None  # Ollama, vLLM, OpenRouter
    reasoning_content: str | None = None  # older vLLM, DeepSeek, llama.cpp
    tool_calls: list[_CallDelta] | None = None


class _Choice(Struct):
    index: int = 0
    delta: _Delta | None = None
    finish_reason: str | None = None


class _Details(Struct):
    cached_tokens: int | None = None


class _Usage(Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_tokens_details: _Details | None = None


class _Chunk(Struct):
    choices: list[_Choice] | None = None
    usage: _Usage | None = None
    model: str | None = None  # what answered: a router's pick, a server's own name for the model


class _Call(Struct):
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


_STOP: dict[str, StopReason] = {"length": "max_tokens", "content_filter": "refusal"}


class ChunkParser:
    """Turns the SSE events of one response into StreamEvents; knows nothing of sockets.

    Text and thinking go out as they come; tool calls are assembled by `index` and go out from
    `finish()`, once their arguments are whole. The answer is complete once a finish_reason has
    arrived, with or without `[DONE]`: servers differ on sending `[DONE]` (vLLM sends it even after an
    error), while a cut stream never has a finish_reason (Ollama's failed streams just stop).
    `done` says `[DONE]` arrived: nothing after it counts, so the caller stops reading.
    """

    def __init__(self, provider: str, keys: list[str] | None = None):
        self.provider = provider
        self.keys = keys or []
        self.done = False
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.model = ""  # as the first chunk that names one says
        self._calls: dict[int, _Call] = {}

    def feed(self, sse: SSE) -> list[StreamEvent]:
        if sse.event == "error":  # llama.cpp's `error:` field, or a proxy's `event: error`
            payload = _decode(sse.data)
            raise self._error(None if payload is _INVALID else payload, sse.data)
        if sse.data.strip() == "[DONE]":
            self.done = True
            return []
        payload = _decode(sse.data)
        if not isinstance(payload, dict):
            raise self._protocol(f"a data line is not a JSON object: {sse.data[:200]!r}")
        if payload.get("error") is not None or payload.get("object") == "error":
            raise self._error(payload, sse.data)
        try:
            chunk = msgspec.convert(payload, _Chunk)
        except msgspec.ValidationError as exc:
            raise self._protocol(f"unexpected chunk shape ({exc}): {sse.data[:200]!r}") from None
        self.model = self.model or chunk.model or ""
        if chunk.usage is not None:  # the last one wins: vLLM's continuous usage is cumulative
            u = chunk.usage
            cached = u.prompt_tokens_details.cached_tokens if u.prompt_tokens_details else None
            self.usage = Usage(u.prompt_tokens or 0, u.completion_tokens or 0, cached or 0)
        events: list[StreamEvent] = []
        for choice in chunk.choices or ():
            if choice.index != 0:
                continue  # `n` is never set, so other choices are noise
            if d := choice.delta:
                # A server may fill both names with the same text (old and new spelling): take one.
                if thinking := d.reasoning or d.reasoning_content:
                    events.append(ThinkingDelta(thinking))
                if d.content:
                    events.append(TextDelta(d.content))
                for call in d.tool_calls or ():
                    self._add(call)
            if choice.finish_reason == "error":  # OpenRouter, when no `error` object came with it
                raise self._error({"error": {"message": "the server ended the stream with finish_reason error",
                                             "type": "server_error"}}, "")
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
        return events

    def finish(self) -> list[StreamEvent]:
        """Tool calls in index order, then StreamEnd; an interrupted transfer when no finish_reason came."""
        if self.finish_reason is None:
            raise _clean(http.interrupted(self.provider), self.keys)
        events: list[StreamEvent] = []
        for index in sorted(self._calls):
            call = self._calls[index]
            if not call.name:
                raise self._protocol(f"tool call #{index} arrived without a name")
            call_id = call.id or f"call_{_random.token_hex(12)}"
            args = self._arguments(call)
            # Cut by the token limit: the same request would cut it again, so it is never run; the model
            # is shown what arrived instead.
            events.append(ToolCallDone(call_id, call.name, args) if args is not None else
                          ToolCallCut(call_id, call.name, "".join(call.arguments)))
        calls = any(isinstance(e, (ToolCallDone, ToolCallCut)) for e in events)
        # Ollama reports `stop` even when it called tools.
        stop: StopReason = _STOP.get(self.finish_reason) or ("tool_use" if calls else "end_turn")
        return events + [StreamEnd(stop, self.usage)]

    def _add(self, d: _CallDelta) -> None:
        key = d.index
        if key is None:  # some servers omit `index` and send each call whole: tell calls apart by id
            known = next((k for k, c in self._calls.items() if d.id and c.id == d.id), None)
            last = max(self._calls, default=-1)
            key = known if known is not None else last + 1 if d.id or last < 0 else last
        call = self._calls.setdefault(key, _Call())
        # The first non-empty id and name win: DeepSeek and Qwen repeat them in every chunk, Poolside
        # changes the id after the first one. Only the arguments are fragments.
        call.id = call.id or d.id or ""
        if d.function:
            call.name = call.name or d.function.name or ""
            if d.function.arguments:
                call.arguments.append(d.function.arguments)

    def _arguments(self, call: _Call) -> dict | None:
        text = "".join(call.arguments).strip()
        if not text:
            return {}
        args = _decode(text)
        if isinstance(args, dict):
            return args
        if self.finish_reason == "length" and args is _INVALID:
            return None
        raise self._protocol(f"the arguments of tool call {call.name!r} are not a JSON object: {text[:200]!r}")

    def _error(self, payload: Any, text: str) -> E.ProviderError:
        return _classify(payload, provider=self.provider, keys=self.keys, text=text[:1000])

    def _protocol(self, message: str) -> E.ProviderError:
        return E.ProtocolError(http.redact(message, self.keys), provider=self.provider)


def whole_completion(payload: Any) -> list[SSE]:
    """The events a stream of this complete chat.completion (or error body) would have had: one chunk
    holding every choice's message as its delta, then [DONE]."""
    if not isinstance(payload, dict):
        raise ValueError("a complete JSON reply that is not a JSON object")
    if payload.get("error") is not None or payload.get("object") == "error":
        return [SSE("message", msgspec.json.encode(payload).decode())]
    choices = payload.get("choices")
    if not isinstance(choices, list):
        raise ValueError("a complete JSON reply that is neither a chat completion nor an error")
    deltas = []
    for choice in choices:
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            raise ValueError("a chat completion choice without a message")
        calls = []
        for i, call in enumerate(message.get("tool_calls") or []):
            function = dict(call.get("function") or {}) if isinstance(call, dict) else {}
            if not isinstance(function.get("arguments", ""), str):  # some servers send the object itself
                function["arguments"] = msgspec.json.encode(function["arguments"]).decode()
            calls.append({"index": i, "id": call.get("id") if isinstance(call, dict) else None, "function": function})
        delta = {k: message.get(k) for k in ("content", "reasoning", "reasoning_content")}
        deltas.append({"index": choice.get("index", 0), "finish_reason": choice.get("finish_reason"),
                       "delta": {**delta, "tool_calls": calls or None}})
    chunk = {"choices": deltas, "usage": payload.get("usage"), "model": payload.get("model")}
    return [SSE("message", msgspec.json.encode(chunk).decode()), SSE("message", "[DONE]")]


# Ollama's count may run below our estimate (another tokenizer, -5%..+30% error), never to half of it
# unless messages were dropped; short prompts are left alone, their estimate is too coarse.
_READ_SHARE = 0.5
_CHECKED_FROM = 2_000


def _dropped(request: Request, read: int) -> tuple[int, int] | None:
    """(tokens the server read, tokens we sent) when the server's count says part of the prompt was dropped."""
    if read <= 0:
        return None  # no usage reported: nothing to compare
    schemas = (t.description + msgspec.json.encode(t.input_schema).decode() for t in request.tools)
    sent = estimate(request_text(request)) + sum(estimate(s) for s in schemas)
    return (read, sent) if sent >= _CHECKED_FROM and read < sent * _READ_SHARE else None


# --- the provider --------------------------------------------------------------------------

class OpenAICompatible:
    """One endpoint and key; reuses one httpx client for every call.

    `max_tokens_for(model)` is the output cap of a request that names none (the registry's: the config file's
    or the catalog's), so no reply runs unbounded; without it such a request carries no cap. `learn_window(model)`
    says whether to ask the server for the model's window (the registry's: when the catalog only assumes one);
    what it learns goes into `learned` (a store the registry shares among a source's candidates).
    """

    def __init__(self, *, id: str = "openai", base_url: str = "https://api.openai.com/v1",  # noqa: A002
                 api_key: str | None = None, headers: dict[str, str] | None = None,
                 client: httpx.AsyncClient | None = None, official: bool | None = None, ollama: bool = False,
                 max_tokens_for: Callable[[str], int] | None = None,
                 learn_window: Callable[[str], bool] = lambda model: False, learned: Windows | None = None):
        self.id = id
        self.ollama = ollama  # a server that cuts a too-long prompt silently: its counts are checked
        self._max_tokens_for = max_tokens_for
        self._learn_window = learn_window
        self.learned = learned or Windows()
        self.base_url = base_url.rstrip("/")
        self.official = httpx.URL(self.base_url).host == "api.openai.com" if official is None else official
        self._keys = [api_key] if api_key else []
        self._headers = {"content-type": "application/json", **(headers or {})}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._own_client = client is None
        self._client = client or httpx.AsyncClient(timeout=http.TIMEOUT)

    async def stream(self, request: Request) -> AsyncGenerator[StreamEvent, None]:
        asked = request.max_output_tokens or (self._max_tokens_for(request.model) if self._max_tokens_for else None)
        cap = min(asked, request.output_room) if asked and request.output_room else asked
        body = build_body(msgspec.structs.replace(request, max_output_tokens=cap), self.id, official=self.official)
        parser = ChunkParser(self.id, self._keys)
        try:
            async with http.post_events(self._client, f"{self.base_url}/chat/completions", body, self._headers,
                                        self._http_error, whole_completion, self.id) as events:
                async for sse in events:
                    for ev in parser.feed(sse):
                        yield ev
                    if parser.done:
                        break  # some servers keep the connection open after [DONE]
        except httpx.TransportError as exc:
            # After finish_reason the answer is whole: a fault while waiting for usage or [DONE] costs only the counts.
            if parser.finish_reason is None:
                raise _clean(http.transport(exc, self.id, self.base_url), self._keys) from exc
        except E.ContextOverflowError as exc:
            self.learned.learn(self.base_url, request.model, exc.window)
            raise
        finished = parser.finish()
        read = parser.usage.input if parser.usage is not None else 0  # 0: no usage reported
        if self.ollama and (cut := _dropped(request, read)):
            raise E.TruncatedPromptError(await self._truncation(request.model, *cut), provider=self.id)
        request.response_model = parser.model
        end = finished[-1]
        if isinstance(end, StreamEnd) and end.stop_reason == "max_tokens" and cap:
            limit = await self._limit(request.model, asked, cap, end.usage)
            finished[-1] = msgspec.structs.replace(end, limit=limit, max_tokens=cap)
        for ev in finished:
            yield ev

    async def _limit(self, model: str, asked: int | None, cap: int, usage: Usage | None) -> Limit:
        """Which limit ended a reply at finish_reason `length`: the cap sent, the window it was lowered to, or
        the server's own, when it stopped short of the cap (llama.cpp's -n, or its window filled)."""
        if usage is not None and usage.output < cap:
            window = self.learned.known(self.base_url, model)
            if window is None and not self.official:  # a rare path, worth one question to tell the two apart
                window = await self.learned.ask(self.base_url, model, lambda: self._lookup(model))
            return "window" if window and usage.input + usage.output >= window else "server"
        return "window" if asked and cap < asked else "output"

    async def window(self, model: str, *, ask: bool = True) -> int | None:
        """The window the server runs `model` with, as learned (a refusal, the model listing); else, when
        `ask` and `learn_window` says so, asked once (bounded, the answer kept, a failure too)."""
        if (known := self.learned.known(self.base_url, model)) or not ask or self.official or \
                not self._learn_window(model):
            return known
        return await self.learned.ask(self.base_url, model, lambda: self._lookup(model))

    async def _lookup(self, model: str) -> int | None:
        """The server's own word on the window: Ollama's /api/show; else the model listing (llama.cpp's
        meta.n_ctx, vLLM's max_model_len), then llama.cpp's /props. None when none of them says."""
        root = self.base_url.removesuffix("/v1")
        try:
            if self.ollama:
                resp = await self._client.post(f"{root}/api/show", content=http.encode({"model": model}),
                                               headers=self._headers)
                return windows.from_show(_decode(resp.content)) if resp.is_success else None
            resp = await self._client.get(f"{self.base_url}/models", headers=self._headers)
            listing = windows.from_listing(_decode(resp.content)) if resp.is_success else {}
            if model in listing or len(listing) == 1:  # llama.cpp serves one model whatever it is called
                return listing.get(model) or next(iter(listing.values()))
            resp = await self._client.get(f"{root}/props", headers=self._headers)
            return windows.from_props(_decode(resp.content)) if resp.is_success else None
        except httpx.HTTPError:
            return None

    async def _truncation(self, model: str, read: int, sent: int) -> str:
        """What to tell the user, with the window Ollama really ran the model with when it says."""
        window = ""
        base = self.base_url.removesuffix("/v1")
        with trio.move_on_after(2), suppress(httpx.HTTPError, msgspec.DecodeError, ValueError):
            resp = await self._client.get(f"{base}/api/ps", headers=self._headers)
            loaded = msgspec.json.decode(resp.content).get("models") or []
            names = (model, f"{model}:latest")  # Ollama tags an untagged name :latest
            sizes = [m.get("context_length") for m in loaded if m.get("name") in names or m.get("model") in names]
            if sizes and isinstance(sizes[0], int):
                window = f" (num_ctx {sizes[0]:,})"
        return (f"Ollama read only {read:,} of about {sent:,} prompt tokens: the prompt is longer than the "
                f"model's context window{window}, and Ollama silently drops the oldest messages. Start Ollama with "
                f"a larger window (OLLAMA_CONTEXT_LENGTH=32768 ollama serve) or set context_window under "
                f"[models.\"{self.id}/{model}\"] in the config file, so history is compacted to fit")

    async def validate_auth(self) -> None:
        await self.served()

    async def served(self) -> list[str] | None:
        """The model ids the server lists (None: its answer is no listing); the windows it states are learned."""
        try:
            resp = await self._client.get(f"{self.base_url}/models", headers=self._headers)
        except httpx.TransportError as exc:
            raise _clean(http.transport(exc, self.id, self.base_url), self._keys) from exc
        if not resp.is_success:
            raise self._http_error(resp)
        payload = _decode(resp.content)
        for model, tokens in windows.from_listing(payload).items():  # what `models` can show
            self.learned.learn(self.base_url, model, tokens)
        return windows.listed_ids(payload)

    async def aclose(self) -> None:
        if self._own_client:
            await self._client.aclose()

    def _http_error(self, resp: httpx.Response) -> E.ProviderError:
        payload = _decode(resp.content) if resp.content else None
        text = resp.text[:1000] if resp.content else resp.reason_phrase
        return _classify(None if payload is _INVALID else payload, provider=self.id, keys=self._keys,
                         status=resp.status_code, headers=resp.headers, text=text)

"""What every HTTP vendor shares: timeouts, retry-after headers, transport faults as error classes,
and the overflow wording check.

Vendor modules decide the class of a body; this module owns everything that does not depend on the vendor.
"""
from __future__ import annotations

import email.utils
import os
import re
import time
from contextlib import aclosing, asynccontextmanager, suppress
from typing import Any, AsyncGenerator, AsyncIterator, Callable

import httpx
import msgspec
import trio

from orchestrator.core import errors as E
from orchestrator.providers.config import URL_ENV
from orchestrator.providers.sse import SSE, iter_sse

TIMEOUT = httpx.Timeout(connect=10.0, read=120.0, write=30.0, pool=10.0)

_OVERFLOW = re.compile(r"prompt is too long|exceeds? (the )?context|maximum context length|context length|"
                       r"context size|context window|context_length_exceeded|exceed_context_size", re.I)
_TRY_AGAIN = re.compile(r"try again in ([\d.]+)\s*(ms|s)\b", re.I)
# llama.cpp (and servers built on it: LM Studio, Ollama) fail the request when the model's own output does not
# fit the chat format it parses tool calls from: the model's fault, reported as a server error.
_MALFORMED = re.compile(r"failed to parse input at pos(ition)? \d+|does not match the expected [\w.-]+ format|"
                        r"model produced output that does not match", re.I)


def retry_after(headers: httpx.Headers, message: str = "") -> float | None:
    """Seconds the server asked us to wait: retry-after-ms, then retry-after (seconds or a date), then the message."""
    if (ms := headers.get("retry-after-ms")) is not None and (wait := _seconds(ms)) is not None:
        return wait / 1000
    if (value := headers.get("retry-after")) is not None:
        if (wait := _seconds(value)) is not None:
            return wait
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            when = None
        if when is not None:
            return max(0.0, when.timestamp() - time.time())
    if (m := _TRY_AGAIN.search(message)) and (wait := _seconds(m.group(1))) is not None:
        return wait / (1000 if m.group(2).lower() == "ms" else 1)
    return None


def _seconds(text: str) -> float | None:
    """A finite, non-negative number of seconds, or None for anything else ("soon", "inf", "-1")."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if 0 <= value < 1e7 else None


def is_overflow(message: str) -> bool:
    return bool(_OVERFLOW.search(message))


def is_malformed_output(message: str) -> bool:
    """The server could not parse what the model wrote (a tool call out of the format): not a server fault."""
    return bool(_MALFORMED.search(message))


MALFORMED = "the model's reply was malformed (its server could not parse it, typically a tool call)"


def by_status(status: int, message: str, provider: str, wait: float | None) -> E.ProviderError:
    """The class an HTTP status gives when the body says nothing more specific."""
    if status in (400, 413, 422) and is_overflow(message):
        return E.ContextOverflowError(message, provider=provider)
    cls: type[E.ProviderError]
    if status == 429:
        cls = E.RateLimitError
    elif status == 529:
        cls = E.OverloadedError
    elif status in (401, 403):
        cls = E.AuthError
    elif status == 402:
        cls = E.QuotaError
    elif status == 404:
        cls = E.ModelNotFoundError
        message += " (is the model name right? `orchestrator models` shows the providers)"
    elif status in (408, 504):
        cls = E.ProviderTimeout
    elif status == 409 or status >= 500:
        cls = E.ServerError
    else:
        cls = E.InvalidRequestError
    return cls(message, provider=provider, retry_after=wait)


_answered = False  # has any server answered a model call in this process?


def answered() -> None:
    global _answered
    _answered = True


def transport(exc: httpx.TransportError, provider: str, address: str = "") -> E.ProviderError:
    """A fault below HTTP: never a success. Retryable, except a connection that could not be opened
    before any server ever answered: then the address is wrong or the server is not running."""
    if isinstance(exc, httpx.TimeoutException):
        return E.ProviderTimeout(f"no answer in time ({type(exc).__name__})", provider=provider)
    if isinstance(exc, httpx.ConnectError) and not _answered:
        return E.UnreachableError(f"cannot connect to {address or 'the server'} ({exc}); {_setting(provider)}",
                                  provider=provider)
    return E.ProviderConnectionError(f"connection failed ({type(exc).__name__}: {exc})", provider=provider)


def _setting(provider: str) -> str:
    """Where the address came from, so the user knows what to change."""
    var = "OLLAMA_HOST" if provider == "ollama" else URL_ENV.get(provider)
    if var is None:
        return f"is the server running? the address is [endpoints.{provider}] base_url in the config file"
    if os.environ.get(var, "").strip():
        return f"is the server running? the address was set by {var}"
    if provider == "ollama":
        return "is Ollama running? start `ollama serve`, or set OLLAMA_HOST to where it listens"
    return f"this is the default address; set {var} (or base_url in the config file) to change it"


def interrupted(provider: str) -> E.ProviderError:
    return E.ProviderConnectionError("the stream ended without its end marker (an interrupted transfer)",
                                     provider=provider)


def redact(text: str, secrets: list[str]) -> str:
    """Keys never reach logs or errors, even when a server echoes them back."""
    for s in secrets:
        if s:
            text = text.replace(s, s[:3] + "…")
    return text


DRAIN = 0.05  # seconds to finish reading a body after its end marker


def encode(body: dict[str, Any]) -> bytes:
    """A JSON request body by msgspec: httpx's json= runs the stdlib encoder, ten times slower on long histories.

    Callers send it with a `content-type: application/json` header.
    """
    return msgspec.json.encode(body)


@asynccontextmanager
async def sse_events(resp: httpx.Response) -> AsyncIterator[AsyncIterator[SSE]]:
    """The SSE events of a streamed response, cleaned up however reading stops.

    After the caller stops at the end marker, the rest of the body (usually already in the buffer)
    is read for a moment, so the connection goes back to the pool instead of being dropped. Then
    the response is closed and read on: httpx's body iterator is a chain of async generators, and
    the closed socket's error is what ends every link (trio warns about stranded ones).
    """
    lines = resp.aiter_lines()
    try:
        async with aclosing(iter_sse(lines)) as events:
            yield events
    finally:
        with trio.move_on_after(DRAIN), suppress(httpx.HTTPError, httpx.StreamError):
            async for _ in lines:
                pass
        await resp.aclose()
        with suppress(httpx.HTTPError, httpx.StreamError):
            async for _ in lines:
                pass


async def _replayed(events: list[SSE]) -> AsyncGenerator[SSE, None]:
    for ev in events:
        yield ev


@asynccontextmanager
async def _posted(client: httpx.AsyncClient, url: str, content: bytes,
                  headers: dict[str, str]) -> AsyncIterator[httpx.Response]:
    """The answer's head, its body to stream. A server closes an idle keep-alive connection on its own clock
    (llama.cpp's after 5 s, before the client's pool lets it go): a request sent on it at that moment fails
    before any answer. It is sent once more at once, on a new connection, and counts as no retry."""
    try:
        resp = await client.send(client.build_request("POST", url, content=content, headers=headers), stream=True)
    except httpx.RemoteProtocolError:
        resp = await client.send(client.build_request("POST", url, content=content, headers=headers), stream=True)
    try:
        yield resp
    finally:
        await resp.aclose()


@asynccontextmanager
async def post_events(client: httpx.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str],
                      error: Callable[[httpx.Response], E.ProviderError],
                      whole: Callable[[Any], list[SSE]], provider: str) -> AsyncIterator[AsyncIterator[SSE]]:
    """POST a JSON body and read its answer as SSE events; a non-2xx answer is read whole and
    raised as the vendor classifies it (`error`).

    A gateway may ignore `stream: true` and answer with the complete JSON message (LiteLLM's
    Anthropic route does): by its content type it is read whole, and `whole` turns it into the
    events its stream would have had, so the vendor's one parser handles both.
    """
    async with _posted(client, url, encode(body), headers) as resp:
        answered()
        if not resp.is_success:
            await resp.aread()
            raise error(resp)
        if resp.headers.get("content-type", "").split(";")[0].strip().lower() == "application/json":
            content = await resp.aread()
            try:
                payload = msgspec.json.decode(content)
            except (msgspec.DecodeError, RecursionError):
                raise E.ProtocolError(f"the reply says it is JSON but is not ({len(content)} bytes)",
                                      provider=provider) from None
            try:
                replayed = whole(payload)
            except ValueError as exc:
                raise E.ProtocolError(str(exc), provider=provider) from None
            async with aclosing(_replayed(replayed)) as events:
                yield events
            return
        async with sse_events(resp) as events:
            yield events

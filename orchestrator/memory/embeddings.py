"""Text to vectors: the Embedder protocol the knowledge base depends on, and its HTTP implementation.
Owns the OpenAI-compatible `/v1/embeddings` client (Ollama, vLLM…) and how a model string picks its endpoint.
"""
from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Protocol

import msgspec
import trio

from orchestrator.core import errors as E
from orchestrator.core.errors import InputError
from orchestrator.core.retry import RetryPolicy
from orchestrator.providers.config import Config
from orchestrator.core.extras import install_hint

if TYPE_CHECKING:
    import httpx
    import numpy as np
    from numpy import ndarray

ENV_MODEL = "ORCHESTRATOR_EMBED_MODEL"  # PROVIDER/MODEL, until config.toml has an [embeddings] table


class Embedder(Protocol):
    """Anything that turns texts into vectors of one fixed width."""

    model: str  # identity stored with every vector: vectors of different models are never compared

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One float32 row per text, in order. Rows need not be normalised."""
        ...


class _Item(msgspec.Struct):
    embedding: list[float]
    index: int | None = None


class _Reply(msgspec.Struct):
    data: list[_Item]


_REPLY = msgspec.json.Decoder(_Reply)


def numpy() -> ModuleType:
    """numpy, imported when vectors are first used: nothing else needs it (the `vectors` extra)."""
    try:
        import numpy
    except ImportError:
        raise InputError(f"vectors need numpy, the `vectors` extra: {install_hint('vectors')}; or search "
                         "the full text only") from None
    return numpy


class HttpEmbedder:
    """POST {base_url}/embeddings in batches; retries what is retryable (rate limits, 5xx, dropped connections)."""

    def __init__(self, *, base_url: str, model: str, api_key: str | None = None, name: str | None = None,
                 headers: dict[str, str] | None = None, batch: int = 64, dimensions: int | None = None,
                 client: httpx.AsyncClient | None = None, retry: RetryPolicy = RetryPolicy(attempts=4)):
        numpy()  # a missing extra is said when the embedder is made, not at the first document
        self.base_url = base_url.rstrip("/")
        self.model = name or model  # `provider/model` when built from the config, so another provider's copy differs
        self._wire_model = model
        self._keys = [api_key] if api_key else []
        self._headers = dict(headers or {})
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._batch = max(1, batch)
        self._dimensions = dimensions
        self._retry = retry
        self._own_client = client is None
        if client is None:  # httpx is loaded here, not with the knowledge base: most rooms never embed
            import httpx

            from orchestrator.providers import http
            client = httpx.AsyncClient(timeout=http.TIMEOUT)
        self._client = client

    async def __aenter__(self) -> HttpEmbedder:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._own_client:
            with trio.CancelScope(shield=True):  # a stop must not leave the socket open
                await self._client.aclose()

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        np = numpy()
        rows: list[ndarray] = []  # `np` here is the module loaded at run time
        for start in range(0, len(texts), self._batch):
            rows.append(await self._with_retry(list(texts[start:start + self._batch])))
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        widths = {r.shape[1] for r in rows}
        if len(widths) > 1:
            raise E.ProtocolError(f"{self.model}: batches came back with different widths {sorted(widths)}",
                                  provider=self.model)
        return np.concatenate(rows)

    async def _with_retry(self, batch: list[str]) -> np.ndarray:
        attempt = 1
        while True:
            try:
                return await self._post(batch)
            except E.ProviderError as exc:
                wait = self._retry.delay(attempt, exc)
                if wait is None:
                    raise
            await trio.sleep(wait)
            attempt += 1

    async def _post(self, batch: list[str]) -> np.ndarray:
        import httpx

        from orchestrator.providers import http
        body: dict = {"model": self._wire_model, "input": batch}
        if self._dimensions:
            body["dimensions"] = self._dimensions
        try:
            resp = await self._client.post(f"{self.base_url}/embeddings", json=body, headers=self._headers)
        except httpx.TransportError as exc:
            err = http.transport(exc, self.model)
            raise type(err)(http.redact(str(err), self._keys), provider=self.model) from exc
        if not resp.is_success:
            raise self._http_error(resp)
        try:
            items = _REPLY.decode(resp.content).data
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise E.ProtocolError(f"{self.model}: not an embeddings reply ({exc})", provider=self.model) from None
        if len(items) != len(batch):
            raise E.ProtocolError(f"{self.model}: {len(items)} embeddings for {len(batch)} inputs", provider=self.model)
        # `index` says which input a row belongs to; servers that omit it answer in order.
        items = sorted(items, key=lambda it: it.index or 0) if all(it.index is not None for it in items) else items
        widths = {len(it.embedding) for it in items}
        if len(widths) != 1 or 0 in widths:
            raise E.ProtocolError(f"{self.model}: embeddings of widths {sorted(widths)} in one reply",
                                  provider=self.model)
        np = numpy()
        out = np.array([it.embedding for it in items], dtype=np.float32)
        if not np.isfinite(out).all():
            raise E.ProtocolError(f"{self.model}: the reply holds NaN or infinite values", provider=self.model)
        return out

    def _http_error(self, resp: httpx.Response) -> E.ProviderError:
        from orchestrator.providers import http
        text = resp.text[:1000] if resp.content else resp.reason_phrase
        try:
            payload = msgspec.json.decode(resp.content)
        except (msgspec.DecodeError, RecursionError):
            payload = None
        # `{"error": {"message": …}}` (OpenAI, vLLM), `{"error": "…"}` (Ollama), or plain text
        err = payload.get("error", payload) if isinstance(payload, dict) else None
        if isinstance(err, dict):
            text = str(err.get("message") or text)
        elif isinstance(err, str):
            text = err
        message = http.redact(f"HTTP {resp.status_code}: {text}", self._keys)
        try:
            wait = http.retry_after(resp.headers, message)
        except ValueError:
            wait = None
        return http.by_status(resp.status_code, message, self.model, wait)


def embedder_from_config(model_string: str, config: Config, *, batch: int = 64,
                         dimensions: int | None = None, client: httpx.AsyncClient | None = None) -> HttpEmbedder:
    """`PROVIDER/MODEL` (e.g. `ollama/nomic-embed-text`, `openai/text-embedding-3-small`, `myserver/bge-m3`),
    where PROVIDER is a provider or [endpoints.NAME] speaking the OpenAI protocol. The first candidate is used."""
    name, slash, model = model_string.strip().partition("/")
    if not slash or not model:
        raise InputError(f"embedding model {model_string!r}: write it as PROVIDER/MODEL, "
                         "for example ollama/nomic-embed-text or openai/text-embedding-3-small")
    src = config.sources.get(name)
    if src is None:
        raise InputError(f"embedding model {model_string!r}: unknown provider {name!r}; known are "
                         f"{', '.join(config.sources)}")
    if src.kind != "openai":
        raise InputError(f"embedding model {model_string!r}: {name} has no embeddings API; use an "
                         "OpenAI-compatible provider or endpoint")
    if not src.candidates:
        raise InputError(config.hint(name))
    cand = src.candidates[0]
    if dimensions is not None and dimensions <= 0:
        raise InputError(f"embedding dimensions must be a positive integer, not {dimensions}")
    return HttpEmbedder(base_url=cand.base_url, model=model, api_key=cand.api_key, name=f"{name}/{model}",
                        headers=src.headers, batch=batch, dimensions=dimensions, client=client)

"""The context window a server really runs each model with, learned once per endpoint and model: from its
model listing (llama.cpp, vLLM), llama.cpp's /props, Ollama's /api/show, or the numbers in a refusal.

A lookup is bounded in time, and one that fails or says nothing is remembered too, so no line waits for it
twice; callers fall back on the catalog's figure.
"""
from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from orchestrator.core.log import logger

log = logger(__name__)

LOOKUP_SECONDS = 2.0  # a server that does not answer this fast is not asked again


class Windows:
    """What servers said, by endpoint and model. One store per provider, or per source when the registry
    shares it among the source's candidates; it lives as long as they do (a registry's, for the process)."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, str], int] = {}
        self._asked: set[tuple[str, str]] = set()

    def known(self, endpoint: str, model: str) -> int | None:
        """The window learned for `model` at `endpoint`, if any."""
        return self._known.get(_key(endpoint, model))

    def listed(self, endpoint: str) -> dict[str, int]:
        """Every window learned at `endpoint`, by model."""
        base = endpoint.rstrip("/")
        return {model: tokens for (where, model), tokens in self._known.items() if where == base}

    def learn(self, endpoint: str, model: str, tokens: int | None) -> None:
        if (n := _count(tokens)) is None:
            return
        if self._known.get(_key(endpoint, model)) != n:
            log.info("context window learned from the server", endpoint=endpoint, model=model, window=n)
        self._known[_key(endpoint, model)] = n

    async def ask(self, endpoint: str, model: str, lookup: Callable[[], Awaitable[int | None]]) -> int | None:
        """The window, asking the server through `lookup` the first time only; None when it does not say."""
        key = _key(endpoint, model)
        if key in self._known or key in self._asked:
            return self._known.get(key)
        self._asked.add(key)  # before the await: concurrent callers go on with what they assume
        tokens = None
        with trio.move_on_after(LOOKUP_SECONDS):
            tokens = await lookup()
        self.learn(endpoint, model, tokens)
        return self._known.get(key)


def _key(endpoint: str, model: str) -> tuple[str, str]:
    return endpoint.rstrip("/"), model


# --- reading what servers say ------------------------------------------------------------------

# "maximum context length is 8192 tokens" (OpenAI, vLLM), "tokens > 200000 maximum" (Anthropic),
# "context length of only 4096 tokens" (LM Studio), "n_ctx: 2048" / "n_ctx = 2048" (llama.cpp)
_REFUSAL = [re.compile(p, re.I) for p in (
    r"maximum context length is (\d[\d,]*) tokens",
    r"\d[\d,]* tokens > (\d[\d,]*) maximum",
    r"context length of (?:only )?(\d[\d,]*) tokens",
    r"\bn_ctx\b[\"']?\s*[:=]\s*(\d+)",
)]
_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)", re.M)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def from_refusal(payload: Any, text: str) -> int | None:
    """The window named by an overflow refusal: llama.cpp's `n_ctx` field, else the numbers in its message."""
    err = payload.get("error", payload) if isinstance(payload, dict) else None
    if isinstance(err, dict) and (n := _count(err.get("n_ctx"))):
        return n
    for pattern in _REFUSAL:
        if m := pattern.search(text):
            return int(m.group(1).replace(",", ""))
    return None


def from_listing(payload: Any) -> dict[str, int]:
    """Windows in an OpenAI-style model listing: llama.cpp's `meta.n_ctx`, vLLM's `max_model_len`."""
    data = payload.get("data") if isinstance(payload, dict) else None
    out: dict[str, int] = {}
    for entry in data if isinstance(data, list) else ():
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            continue
        meta = entry.get("meta")
        n = _count(meta.get("n_ctx")) if isinstance(meta, dict) else None
        if n := n or _count(entry.get("max_model_len")):
            out[entry["id"]] = n
    return out


def listed_ids(payload: Any) -> list[str] | None:
    """The model ids of an OpenAI- or Anthropic-style listing (`data[].id`); None when it is not one."""
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        return None
    return [e["id"] for e in data if isinstance(e, dict) and isinstance(e.get("id"), str)]


def from_props(payload: Any) -> int | None:
    """llama.cpp's /props: the window of one slot (a server with parallel slots splits its context)."""
    if not isinstance(payload, dict):
        return None
    settings = payload.get("default_generation_settings")
    return (_count(settings.get("n_ctx")) if isinstance(settings, dict) else None) or _count(payload.get("n_ctx"))


def from_show(payload: Any) -> int | None:
    """Ollama's /api/show: a `num_ctx` parameter (what it runs the model with), else the trained length."""
    if not isinstance(payload, dict):
        return None
    params = payload.get("parameters")
    if isinstance(params, str) and (m := _NUM_CTX.search(params)):
        return int(m.group(1))
    info = payload.get("model_info")
    if not isinstance(info, dict):
        return None
    arch = info.get("general.architecture")
    if n := _count(info.get(f"{arch}.context_length")):
        return n
    return next((n for k, v in info.items() if k.endswith(".context_length") and (n := _count(v))), None)

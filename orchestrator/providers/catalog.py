"""What each model can take and costs: context window, output limit, images in tool results, thinking,
list prices. Built-in figures for common models, config overrides on top, conservative defaults for the rest.
"""
from __future__ import annotations

from typing import Annotated, TypedDict, TypeVar

import msgspec
from msgspec import Meta, Struct
from orchestrator.core.log import logger

log = logger(__name__)

_T = TypeVar("_T")
Tokens = Annotated[int, Meta(gt=0)]
Dollars = Annotated[float, Meta(ge=0)]


class ModelInfo(Struct, frozen=True, kw_only=True):
    context_window: int  # tokens the model reads at once (history is compacted at `compact_at` of it)
    max_output: int  # the vendor's cap on output tokens for one response
    images_in_tool_results: bool = False  # False: the engine moves images to a user message
    thinking: bool = False  # the model reasons before answering (thinking blocks, reasoning effort)
    compact_at: float = 0.8  # share of the window at which history is compacted
    thinking_budget: int | None = None  # tokens of extended thinking to ask for (Anthropic); None: off
    note: str = ""
    # List prices in US dollars per million tokens; None: unknown, so no cost is shown.
    input_price: float | None = None  # uncached input
    output_price: float | None = None
    cached_price: float | None = None  # input read from the provider's prompt cache


class Price(Struct, frozen=True):
    """US dollars per million tokens."""

    input: float
    output: float
    cached: float

    def cost(self, input_tokens: int, output_tokens: int, cached_tokens: int) -> float:
        """Providers count cached tokens inside the input (OpenAI's prompt_tokens, our Anthropic sum)."""
        fresh = max(0, input_tokens - cached_tokens)
        return (fresh * self.input + cached_tokens * self.cached + output_tokens * self.output) / 1e6


def _openai(window: int, output: int, price: tuple[float, float, float] | None = None, *,
            thinking: bool = False) -> ModelInfo:
    # Chat completions carry only text in `tool` messages.
    return ModelInfo(context_window=window, max_output=output, thinking=thinking, **_prices(price))


def _claude(window: int, output: int, price: tuple[float, float, float], *, thinking: bool = True,
            note: str = "") -> ModelInfo:
    # Anthropic tool_result blocks accept image content.
    return ModelInfo(context_window=window, max_output=output, images_in_tool_results=True, thinking=thinking,
                     note=note, **_prices(price))


def _local(window: int, *, output: int = 8_192, thinking: bool = False) -> ModelInfo:
    # The window is what the model was trained for; Ollama's own default num_ctx is often smaller
    # unless the server or a Modelfile raises it. Served locally, it costs nothing per token.
    return ModelInfo(context_window=window, max_output=output, thinking=thinking, **_prices((0, 0, 0)))


class _Prices(TypedDict, total=False):
    input_price: float
    output_price: float
    cached_price: float


def _prices(price: tuple[float, float, float] | None) -> _Prices:
    return _Prices(input_price=price[0], output_price=price[1], cached_price=price[2]) if price else {}


_1M_BETA = "1,000,000 tokens with the context-1m beta header; 200,000 without it"

# Keys are model names as the vendor spells them, lower case; a dated or tagged id (claude-sonnet-4-5-20250929,
# qwen3:8b) finds its family by the longest matching prefix. Prices (input, output, cached input) are the
# vendors' standard list prices in USD per million tokens, without batch or long-context surcharges; Anthropic's
# cache writes (1.25x input) are priced as plain input.
BUILTIN: dict[str, ModelInfo] = {
    # OpenAI
    "gpt-4.1": _openai(1_047_576, 32_768, (2.0, 8.0, 0.5)),
    "gpt-4o": _openai(128_000, 16_384, (2.5, 10.0, 1.25)),
    "chatgpt-4o": _openai(128_000, 16_384, (5.0, 15.0, 5.0)),
    "gpt-4-turbo": _openai(128_000, 4_096, (10.0, 30.0, 10.0)),
    "gpt-5": _openai(400_000, 128_000, (1.25, 10.0, 0.125), thinking=True),
    "gpt-5-chat": _openai(128_000, 16_384, (1.25, 10.0, 0.125)),
    "o1": _openai(200_000, 100_000, (15.0, 60.0, 7.5), thinking=True),
    "o1-mini": _openai(128_000, 65_536, (1.1, 4.4, 0.55), thinking=True),
    "o3": _openai(200_000, 100_000, (2.0, 8.0, 0.5), thinking=True),
    "o4-mini": _openai(200_000, 100_000, (1.1, 4.4, 0.275), thinking=True),
    # Anthropic
    "claude-sonnet-4-5": _claude(200_000, 64_000, (3.0, 15.0, 0.3), note=_1M_BETA),
    "claude-sonnet-4": _claude(200_000, 64_000, (3.0, 15.0, 0.3), note=_1M_BETA),
    "claude-opus-4-5": _claude(200_000, 64_000, (5.0, 25.0, 0.5)),
    "claude-opus-4-1": _claude(200_000, 32_000, (15.0, 75.0, 1.5)),
    "claude-opus-4": _claude(200_000, 32_000, (15.0, 75.0, 1.5)),
    "claude-haiku-4-5": _claude(200_000, 64_000, (1.0, 5.0, 0.1)),
    "claude-3-7-sonnet": _claude(200_000, 64_000, (3.0, 15.0, 0.3)),
    "claude-3-5-sonnet": _claude(200_000, 8_192, (3.0, 15.0, 0.3), thinking=False),
    "claude-3-5-haiku": _claude(200_000, 8_192, (0.8, 4.0, 0.08), thinking=False),
    # Local models, as Ollama names them
    "qwen3": _local(40_960, output=32_768, thinking=True),
    "qwen3-coder": _local(262_144, output=65_536),
    "qwen2.5": _local(32_768),
    "qwen2.5-coder": _local(32_768),
    "llama3": _local(8_192),
    "llama3.1": _local(131_072),
    "llama3.2": _local(131_072),
    "llama3.3": _local(131_072),
    "mistral": _local(32_768),
    "mistral-nemo": _local(131_072),
    "gemma2": _local(8_192),
    "gemma3": _local(131_072),
    "phi4": _local(16_384),
    "deepseek-r1": _local(131_072, output=32_768, thinking=True),
    "gpt-oss": _local(131_072, output=32_768, thinking=True),
}

_PRICES = ("input_price", "output_price", "cached_price")

UNKNOWN = ModelInfo(context_window=32_768, max_output=4_096,
                    note='not in the catalog: conservative defaults; set [models."PROVIDER/MODEL"] in the config file')


# Anthropic's floor for a thinking budget.
ThinkingTokens = Annotated[int, Meta(ge=1024)]


class Thinking(Struct, forbid_unknown_fields=True, kw_only=True):
    """`thinking = {budget_tokens = N}`: turn extended thinking on with this budget."""

    budget_tokens: ThinkingTokens


class Override(Struct, forbid_unknown_fields=True, kw_only=True):
    """A `[models."provider/model"]` table: only the fields it names replace the catalog's."""

    context_window: Tokens | None = None
    max_output: Tokens | None = None
    images_in_tool_results: bool | None = None
    thinking: bool | Thinking | None = None  # a table also says the model thinks
    compact_at: Annotated[float, Meta(gt=0, le=1)] | None = None
    note: str | None = None
    input_price: Dollars | None = None
    output_price: Dollars | None = None
    cached_price: Dollars | None = None


def _by_prefix(table: dict[str, _T], name: str) -> _T | None:
    """Exact name first, then the longest key that the name starts with."""
    if name in table:
        return table[name]
    best = max((k for k in table if name.startswith(k)), key=len, default=None)
    return table[best] if best is not None else None


class Catalog:
    """Looks models up by provider and model id; overrides are keyed "provider/model"."""

    def __init__(self, overrides: dict[str, Override] | None = None):
        self._overrides = {k.lower(): v for k, v in (overrides or {}).items()}
        self._warned: set[str] = set()

    def info(self, provider: str, model: str) -> ModelInfo:
        base = self._builtin(model)
        override = _by_prefix(self._overrides, f"{provider}/{model}".lower())
        if base is None and override is None and f"{provider}/{model}" not in self._warned:
            self._warned.add(f"{provider}/{model}")
            log.info("unknown model: using conservative limits", provider=provider, model=model,
                        context_window=UNKNOWN.context_window, max_output=UNKNOWN.max_output)
        info = base or UNKNOWN
        if override is None:
            return info
        changes = {k: v for k, v in msgspec.structs.asdict(override).items() if v is not None}
        if isinstance(override.thinking, Thinking):
            changes |= {"thinking": True, "thinking_budget": override.thinking.budget_tokens}
        if base is None and "note" not in changes:
            changes["note"] = ""  # the override is the user's answer to "not in the catalog"
        return msgspec.structs.replace(info, **changes)

    def assumed(self, provider: str, model: str) -> bool:
        """Whether the model's window is only assumed: neither the catalog nor the config file gives one."""
        return self._builtin(model) is None and not self.configured(provider, model)

    def configured(self, provider: str, model: str) -> bool:
        """Whether the config file gives the model's window (which then wins over anything a server says)."""
        override = _by_prefix(self._overrides, f"{provider}/{model}".lower())
        return override is not None and override.context_window is not None

    def price(self, provider: str, model: str) -> Price | None:
        """The model's prices, if the catalog or the config file knows all three (no warning otherwise)."""
        info = self._builtin(model)
        override = _by_prefix(self._overrides, f"{provider}/{model}".lower())
        known = {k: getattr(info, k) for k in _PRICES if info is not None and getattr(info, k) is not None}
        if override is not None:
            known |= {k: getattr(override, k) for k in _PRICES if getattr(override, k) is not None}
        if "cached_price" not in known and "input_price" in known:
            known["cached_price"] = known["input_price"]  # no cache discount given: cached input costs as input
        if len(known) < len(_PRICES):
            return None
        return Price(known["input_price"], known["output_price"], known["cached_price"])

    @staticmethod
    def _builtin(model: str) -> ModelInfo | None:
        name = model.lower()
        # Servers such as vLLM serve "Qwen/Qwen3-8B": the family is in the last path segment.
        return _by_prefix(BUILTIN, name) or _by_prefix(BUILTIN, name.rsplit("/", 1)[-1])

"""What each model can take: context window, output limit, images in tool results, thinking.
Built-in figures for common models, config overrides on top, conservative defaults for the rest.
"""
from __future__ import annotations

from typing import Annotated, TypeVar

import msgspec
import structlog
from msgspec import Meta, Struct

log = structlog.get_logger(__name__)

_T = TypeVar("_T")
Tokens = Annotated[int, Meta(gt=0)]


class ModelInfo(Struct, frozen=True, kw_only=True):
    context_window: int  # tokens the model reads at once (E5 compacts at 80% of it)
    max_output: int  # the vendor's cap on output tokens for one response
    images_in_tool_results: bool = False  # False: the engine moves images to a user message (E4)
    thinking: bool = False  # the model reasons before answering (thinking blocks, reasoning effort)
    compact_at: float = 0.8  # share of the window at which history is compacted (E5)
    thinking_budget: int | None = None  # tokens of extended thinking to ask for (Anthropic); None: off
    note: str = ""


def _openai(window: int, output: int, *, thinking: bool = False) -> ModelInfo:
    # Chat completions carry only text in `tool` messages.
    return ModelInfo(context_window=window, max_output=output, thinking=thinking)


def _claude(window: int, output: int, *, thinking: bool = True, note: str = "") -> ModelInfo:
    # Anthropic tool_result blocks accept image content.
    return ModelInfo(context_window=window, max_output=output, images_in_tool_results=True, thinking=thinking,
                     note=note)


def _local(window: int, *, output: int = 8_192, thinking: bool = False) -> ModelInfo:
    # The window is what the model was trained for; Ollama's own default num_ctx is often smaller
    # unless the server or a Modelfile raises it.
    return ModelInfo(context_window=window, max_output=output, thinking=thinking)


_1M_BETA = "1,000,000 tokens with the context-1m beta header; 200,000 without it"

# Keys are model names as the vendor spells them, lower case; a dated or tagged id (claude-sonnet-4-5-20250929,
# qwen3:8b) finds its family by the longest matching prefix.
BUILTIN: dict[str, ModelInfo] = {
    # OpenAI
    "gpt-4.1": _openai(1_047_576, 32_768),
    "gpt-4o": _openai(128_000, 16_384),
    "chatgpt-4o": _openai(128_000, 16_384),
    "gpt-4-turbo": _openai(128_000, 4_096),
    "gpt-5": _openai(400_000, 128_000, thinking=True),
    "gpt-5-chat": _openai(128_000, 16_384),
    "o1": _openai(200_000, 100_000, thinking=True),
    "o1-mini": _openai(128_000, 65_536, thinking=True),
    "o3": _openai(200_000, 100_000, thinking=True),
    "o4-mini": _openai(200_000, 100_000, thinking=True),
    # Anthropic
    "claude-sonnet-4-5": _claude(200_000, 64_000, note=_1M_BETA),
    "claude-sonnet-4": _claude(200_000, 64_000, note=_1M_BETA),
    "claude-opus-4-5": _claude(200_000, 64_000),
    "claude-opus-4-1": _claude(200_000, 32_000),
    "claude-opus-4": _claude(200_000, 32_000),
    "claude-haiku-4-5": _claude(200_000, 64_000),
    "claude-3-7-sonnet": _claude(200_000, 64_000),
    "claude-3-5-sonnet": _claude(200_000, 8_192, thinking=False),
    "claude-3-5-haiku": _claude(200_000, 8_192, thinking=False),
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
            log.warning("unknown model: using conservative limits", provider=provider, model=model,
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

    @staticmethod
    def _builtin(model: str) -> ModelInfo | None:
        name = model.lower()
        # Servers such as vLLM serve "Qwen/Qwen3-8B": the family is in the last path segment.
        return _by_prefix(BUILTIN, name) or _by_prefix(BUILTIN, name.rsplit("/", 1)[-1])

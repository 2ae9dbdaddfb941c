"""Routing: a model string becomes a provider and a model id, built from the configuration.
The registry owns every provider and httpx client it creates (closed on exit) and the credential checks.
"""
from __future__ import annotations

import difflib
import re
from typing import Callable, Mapping

import httpx
import msgspec
import trio
from msgspec import Struct

from orchestrator.core.errors import InputError, ProviderError
from orchestrator.providers import http
from orchestrator.providers.anthropic import Anthropic
from orchestrator.providers.base import Provider
from orchestrator.providers.catalog import BUILTIN, Catalog, ModelInfo
from orchestrator.providers.config import VENDORS, Candidate, Config, load_config, mask
from orchestrator.providers.openai import OpenAICompatible
from orchestrator.providers.rotation import Rotation
from orchestrator.providers.windows import Windows

# A bare model name goes to the vendor whose naming it follows.
PREFIXES = (("gpt-", "openai"), ("chatgpt-", "openai"), ("o1", "openai"), ("o3", "openai"), ("o4", "openai"),
            ("claude-", "anthropic"))

Resolver = Callable[[str], tuple[Provider, str]]


class CandidateCheck(Struct, kw_only=True):
    key: str  # masked
    base_url: str
    ok: bool
    error: str = ""
    error_class: str = ""
    # the context windows its model listing gives (llama.cpp, vLLM), by model; absent when it gives none
    windows: dict[str, int] | msgspec.UnsetType = msgspec.UNSET


class SourceCheck(Struct, kw_only=True):
    name: str
    kind: str  # the wire protocol: "openai" (chat completions) or "anthropic" (messages)
    configured: bool  # it has something to call
    explicit: bool  # the user set it up (Ollama's built-in default is not)
    candidates: list[CandidateCheck]
    hint: str = ""  # what to do, when it cannot be used as it is
    missing: list[str] = []  # key variables the config file names that are unset (an endpoint then goes without)


def _squeezed(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _guess(text: str) -> str:
    """What a bare name probably meant: a catalog model spelled without its dashes or dots
    (`gpt4.1`), or a near miss; else the name on Ollama."""
    names = {_squeezed(n): n for n in BUILTIN}
    model = names.get(_squeezed(text)) or next(iter(difflib.get_close_matches(text.lower(), BUILTIN, n=1,
                                                                                cutoff=0.8)), None)
    if model is None:
        return f"for example ollama/{text or 'qwen3'}"
    vendor = next((name for prefix, name in PREFIXES if model.startswith(prefix)), "ollama")
    return f"did you mean {vendor}/{model}?"


class Registry:
    """Open with `async with Registry.load() as registry:`; `registry(model_string)` is a room's resolver."""

    def __init__(self, config: Config):
        self.config = config
        overrides = {}
        for key, override in config.models.items():
            if key.startswith("scripted/"):  # the scenarios' model: priced only to try the cost figures
                overrides[key] = override
                continue
            try:
                name, model = self.split(key)
            except InputError as exc:
                raise InputError(f"{config.path}: [models.\"{key}\"]: {exc}") from None
            overrides[f"{name}/{model}"] = override
        self.catalog = Catalog(overrides)
        self._clients: list[httpx.AsyncClient] = []
        self._members: dict[str, list[tuple[Candidate, Provider]]] = {}
        self._providers: dict[str, Provider] = {}
        self._learned: dict[str, Windows] = {}  # by source: what its servers said of their windows

    @classmethod
    def load(cls, env: Mapping[str, str] | None = None) -> Registry:
        return cls(load_config(env))

    async def __aenter__(self) -> Registry:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        with trio.CancelScope(shield=True):  # a stop must not leave sockets open
            for client in self._clients:
                await client.aclose()
        self._clients.clear()
        self._members.clear()
        self._providers.clear()
        self._learned.clear()

    # --- routing ---------------------------------------------------------------------------

    def split(self, model_string: str) -> tuple[str, str]:
        """`provider/model` as written (the model id may hold more slashes), or a bare name by prefix."""
        text = model_string.strip()
        head, slash, rest = text.partition("/")
        if slash:
            if head not in self.config.sources:
                raise InputError(f"model {text!r}: unknown provider {head!r}; known are "
                                 f"{', '.join(self.config.sources)} (named endpoints come from "
                                 f"[endpoints.NAME] in {self.config.shown_path})")
            if not rest:
                raise InputError(f"model {text!r}: the model id after {head}/ is missing")
            return head, rest
        for prefix, name in PREFIXES:
            if text.startswith(prefix):
                return name, text
        raise InputError(f"model {text!r}: say which provider serves it, as PROVIDER/MODEL "
                         f"({_guess(text)}); bare names work for gpt-, o1, o3, o4, chatgpt- and claude- models")

    def resolve(self, model_string: str) -> tuple[Provider, str]:
        name, model = self.split(model_string)
        return self.provider(name), model

    __call__ = resolve

    def forcing(self, model_string: str) -> Resolver:
        """A resolver that puts every agent on one model, whatever its own model string says.
        It resolves now, so a missing key fails before anything runs."""
        chosen = self.resolve(model_string)
        return lambda _agent_model: chosen

    def info(self, model_string: str) -> ModelInfo:
        """The catalog's entry, with the window the server reported in place of one the catalog only assumes."""
        name, model = self.split(model_string)
        info = self.catalog.info(name, model)
        if self._asks(name, model) and (learned := self._window(name, model)):
            info = msgspec.structs.replace(info, context_window=learned,
                                           note="context window as the server reports it")
        return info

    def _asks(self, name: str, model: str) -> bool:
        """Whether the server's word on the window counts: never over a window the config file gives; else when
        the catalog only assumes one, or when the server is the user's own (Ollama, a named endpoint), which runs
        a model with the window it was started with, whatever the catalog says the model was trained for."""
        if self.catalog.configured(name, model):
            return False
        return self.catalog.assumed(name, model) or name not in ("openai", "anthropic")

    def _window(self, name: str, model: str) -> int | None:
        """The smallest window a candidate of `name` reported for `model` (they serve one model alike)."""
        learned = self._learned.get(name)
        if learned is None:  # no provider of it was built yet: nothing asked, nothing learned
            return None
        found = [w for c in self.config.sources[name].candidates if (w := learned.known(c.base_url, model))]
        return min(found, default=None)

    def windows(self, forced: str | None = None) -> Callable[[str], ModelInfo | None]:
        """For a room: each agent's model's catalog entry (or the forced model's); None for the scripted one."""
        def info(model_string: str) -> ModelInfo | None:
            if forced:
                return self.info(forced)
            return None if model_string in ("scripted", "") else self.info(model_string)

        return info

    def provider(self, name: str) -> Provider:
        """The provider the engine talks to: one candidate as it is, several behind a Rotation."""
        if name not in self._providers:
            members = self._candidates(name)
            if not members:
                raise InputError(self._unusable(name))
            self._providers[name] = members[0][1] if len(members) == 1 else \
                Rotation(name, [(c.label, p) for c, p in members])
        return self._providers[name]

    def _unusable(self, name: str) -> str:
        hint = self.config.hint(name)
        if not any(src.explicit for src in self.config.sources.values()):
            return f"{hint}\n{self.config.nothing_configured()}"
        return hint

    def _candidates(self, name: str) -> list[tuple[Candidate, Provider]]:
        """One vendor object per candidate; the candidates of a source share one connection pool
        (every call sends its own key)."""
        if name not in self._members:
            src = self.config.sources[name]
            members: list[tuple[Candidate, Provider]] = []
            if src.candidates:
                client = httpx.AsyncClient(timeout=http.TIMEOUT)
                self._clients.append(client)
                learned = self._learned.setdefault(name, Windows())
                for cand in src.candidates:
                    provider: Provider
                    if src.kind == "anthropic":
                        provider = Anthropic(id=name, base_url=cand.base_url, api_key=cand.api_key, client=client,
                                             max_tokens_for=lambda model: self.catalog.info(
                                                 name, model).max_output,
                                             thinking_for=lambda model: self.catalog.info(
                                                 name, model).thinking_budget, learned=learned)
                    else:
                        provider = OpenAICompatible(id=name, base_url=cand.base_url, api_key=cand.api_key,
                                                    headers=src.headers, client=client, ollama=name == "ollama",
                                                    max_tokens_for=lambda model: self.catalog.info(
                                                        name, model).max_output,
                                                    learn_window=lambda model: self._asks(name, model),
                                                    learned=learned)
                    members.append((cand, provider))
            self._members[name] = members
        return self._members[name]

    # --- credential checks (`orchestrator models`) -----------------------------------------

    async def check(self, timeout: float = 10.0) -> list[SourceCheck]:
        """Ask every candidate of every source whether its credentials work, all at once."""
        found: dict[str, list[CandidateCheck]] = {}
        async with trio.open_nursery() as nursery:
            for name in self.config.sources:
                members = self._candidates(name)
                found[name] = [CandidateCheck(key=mask(c.api_key), base_url=c.base_url, ok=False) for c, _ in members]
                for (cand, provider), slot in zip(members, found[name]):
                    nursery.start_soon(self._check_one, cand, provider, slot, timeout, self._learned.get(name))
        return [self._summary(name, checks) for name, checks in found.items()]

    @staticmethod
    async def _check_one(cand: Candidate, provider: Provider, slot: CandidateCheck, timeout: float,
                         learned: Windows | None) -> None:
        with trio.move_on_after(timeout):
            try:
                await provider.validate_auth()
                slot.ok = True
                if learned and (listed := learned.listed(cand.base_url)):  # the model listing named them
                    slot.windows = listed
            except ProviderError as exc:
                slot.error = http.redact(str(exc), [cand.api_key or ""])
                slot.error_class = exc.kind
            return
        slot.error, slot.error_class = f"no answer in {timeout:g} s", "timeout"

    def _summary(self, name: str, checks: list[CandidateCheck]) -> SourceCheck:
        src = self.config.sources[name]
        hint = ""
        if not checks:
            hint = self.config.hint(name)
        elif name == "ollama" and not any(c.ok for c in checks) and \
                all(c.error_class in ("connection", "unreachable", "timeout") for c in checks) and \
                not all(c.error_class == "unreachable" for c in checks):  # that error says what to do already
            hint = f"ollama: not reachable at {checks[0].base_url} — start `ollama serve` or set OLLAMA_HOST"
        elif any(c.error_class == "auth" and c.key == mask(None) for c in checks):  # it was called without one
            table = f"[providers.{name}]" if name in VENDORS else f"[endpoints.{name}]"
            hint = f"{name}: the server wants a key — " + (f"set {' or '.join(src.missing)}" if src.missing else
                                                           f"add api_key_env or keys to {table} in "
                                                           f"{self.config.shown_path}")
        return SourceCheck(name=name, kind=src.kind, configured=bool(checks), explicit=src.explicit,
                           candidates=checks, hint=hint, missing=src.missing)

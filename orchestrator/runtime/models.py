"""What a program's agents run on: model strings routed to a provider (each agent's own, one forced model, or a
script), their catalog entries and prices, and config.toml as the program read it, once, off the event loop.

The one place where rooms meet the provider registry: `Runtime.open` and the commands build through it.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass

import trio

from orchestrator.core.errors import InputError
from orchestrator.providers.base import Provider
from orchestrator.providers.catalog import Catalog, ModelInfo
from orchestrator.providers.config import Config, load_config
from orchestrator.providers.registry import Registry
from orchestrator.store.usage import PriceOf

__all__ = ["SCRIPTED", "Models", "models_for"]

SCRIPTED = frozenset({"", "scripted"})  # the model strings the script plays

Resolve = Callable[[str], tuple[Provider, str]]


@dataclass(frozen=True)
class Models:
    resolve: Resolve  # model string -> (provider, model id)
    catalog: Callable[[str], ModelInfo | None] | None  # real models' windows; None: only the script plays
    prices: PriceOf  # (provider id, model id) -> prices, the config's overrides first
    config: Config  # config.toml as read once: the rooms' sandbox and skills settings come from it
    registry: Registry | None = None  # None: only the script plays, and no provider was set up


async def models_for(stack: AsyncExitStack, *, model: str | None = None, scripted: Provider | None = None,
                     check: Iterable[str] = (), env: Mapping[str, str] | None = None,
                     no_script: str = "an agent's model is scripted (or unset) and no script was given") -> Models:
    """`model`: every agent on it; else each agent's own string, with "" and `scripted` to `scripted`.
    `check`: model strings resolved now, so a missing key is bad input before any room exists. When every
    string in `check` is the script's and no model is forced, no registry is set up (no key is needed).
    `no_script`: what an agent that needs the script hears when there is none. Providers close with `stack`."""
    strings = set(check)
    if scripted is not None and model is None and strings and strings <= SCRIPTED:
        config = await trio.to_thread.run_sync(load_config, env)
        play = scripted
        return Models(lambda _model: (play, "scripted"), None, Catalog().price, config)
    registry = await trio.to_thread.run_sync(Registry.load, env)  # config.toml: read off the loop
    stack.push_async_callback(registry.aclose)
    forced = registry.forcing(model) if model else None
    if forced is None:
        for s in strings - SCRIPTED:
            registry.resolve(s)

    def resolve(model_string: str) -> tuple[Provider, str]:
        if forced is not None:
            return forced(model_string)
        if model_string in SCRIPTED:
            if scripted is None:
                raise InputError(no_script)
            return scripted, "scripted"
        return registry.resolve(model_string)

    return Models(resolve, registry.windows(model), registry.catalog.price, registry.config, registry)

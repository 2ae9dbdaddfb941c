"""Looking the models a room will run on up before its first line: each server's model listing is asked once,
all at once, so a model name it does not serve, a dead address or a refused key is said at start.

Only what a server says counts: one that lists nothing, or does not answer in time, is taken at its word later.
"""
from __future__ import annotations

import difflib
from collections.abc import Iterable

import trio

from orchestrator.core.errors import InputError, ProviderError
from orchestrator.providers.base import Provider, served_models
from orchestrator.runtime.models import SCRIPTED, Resolve

SECONDS = 5.0  # for each server's listing


def listed(model: str, ids: Iterable[str]) -> bool:
    """A name the listing serves: itself, Ollama's untagged name (`:latest`), or a vendor's alias of dated
    snapshots (`claude-sonnet-4-5` for `claude-sonnet-4-5-20250929`)."""
    return any(i in (model, f"{model}:latest") or i.startswith(f"{model}-") for i in ids)


async def problems(resolve: Resolve, strings: Iterable[str], *, seconds: float = SECONDS) -> list[str]:
    """One line for each model string that cannot work, as its server tells: empty when all look fine."""
    found: list[str] = []
    wanted: dict[int, tuple[Provider, dict[str, str]]] = {}  # provider -> the model ids it is asked for
    for string in sorted(set(strings) - SCRIPTED):
        try:
            provider, model = resolve(string)
        except InputError as exc:
            found.append(str(exc))
            continue
        wanted.setdefault(id(provider), (provider, {}))[1].setdefault(model, string)

    async def ask(provider: Provider, models: dict[str, str]) -> None:
        with trio.move_on_after(seconds):
            try:
                ids = await served_models(provider)
            except ProviderError as exc:
                if exc.fatal or exc.account:  # unreachable, a refused key: every line would fail alike
                    found.append(f"{', '.join(models.values())}: {exc}")
                return
            for model, string in models.items():
                if ids and not listed(model, ids):
                    found.append(_unlisted(string, model, ids))

    async with trio.open_nursery() as nursery:
        for provider, models in wanted.values():
            nursery.start_soon(ask, provider, models)
    return found


def _unlisted(string: str, model: str, ids: list[str]) -> str:
    close = difflib.get_close_matches(model, ids, n=3, cutoff=0.5)
    some = close or sorted(ids)[:5]
    more = "" if close or len(ids) <= 5 else f", … ({len(ids)} in all)"
    return (f"{string}: the server does not list a model {model!r}; "
            f"{'did you mean' if close else 'it lists'} {', '.join(some)}{'?' if close else more}")

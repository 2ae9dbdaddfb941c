"""Rotation below the runner: one Provider over several candidates of one vendor (keys, endpoints).
It owns which candidate serves a call, the in-memory cooldowns, and when a failure moves on or goes up.
"""
from __future__ import annotations

import math
from contextlib import aclosing
from typing import AsyncGenerator, Sequence

import trio

from orchestrator.core.errors import ProviderError
from orchestrator.core.log import logger
from orchestrator.core.types import Request, StreamEvent, TextDelta, ThinkingDelta, ToolCallDone
from orchestrator.providers.base import Provider, server_window, served_models

log = logger(__name__)

COOLDOWN = 600.0  # seconds a candidate rests after an account error
IN_PLACE = 2  # retries on the same candidate after a dropped connection, before moving on
CONTENT = (TextDelta, ThinkingDelta, ToolCallDone)  # once one is out, the model may have done work


class Rotation:
    """Serves every call from the first candidate that is not cooling down, in configured order.

    Only failures before the first content event move on: an account error (bad key, no credit)
    cools the candidate and tries the next; a dropped connection is retried in place, then moves on.
    Everything else (bad request, overflow, 5xx, rate limits) goes up unchanged: another key would
    fail the same way, and the engine owns backoff. `candidates` are (label, provider) pairs; the
    label (masked key and address) is all that logs ever show.
    """

    def __init__(self, id: str, candidates: Sequence[tuple[str, Provider]], *,  # noqa: A002
                 cooldown: float = COOLDOWN, in_place: int = IN_PLACE):
        if not candidates:
            raise ValueError("a rotation needs at least one candidate")
        self.id = id
        self._candidates = list(candidates)
        self._cooldown, self._in_place = cooldown, in_place
        self._until = [-math.inf] * len(self._candidates)
        self._last_account: ProviderError | None = None

    async def stream(self, request: Request) -> AsyncGenerator[StreamEvent, None]:
        dropped: ProviderError | None = None  # the last connection failure, if a candidate ended on one
        for i in self._ready():
            label, provider = self._candidates[i]
            retries = 0
            while True:
                started = False
                try:
                    async with aclosing(provider.stream(request)) as events:
                        async for ev in events:
                            started = started or isinstance(ev, CONTENT)
                            yield ev
                    return
                except ProviderError as exc:
                    if started or not (exc.account or exc.kind == "connection"):
                        raise
                    if exc.account:
                        self._cool(i, exc)
                        break
                    if retries >= self._in_place:
                        dropped = exc
                        log.warning("connection keeps failing; trying the next candidate", provider=self.id,
                                    candidate=label, retries=retries)
                        break
                    retries += 1
                    log.info("connection failed; retrying on the same candidate", provider=self.id,
                             candidate=label, retry=retries)
        raise self._exhausted(dropped)

    async def window(self, model: str, *, ask: bool = True) -> int | None:
        """The window as the first candidate that is not cooling down knows it (the candidates serve one model)."""
        ready = self._ready() or [0]
        return await server_window(self._candidates[ready[0]][1], model, ask=ask)

    async def served(self) -> list[str] | None:
        """The listing as the first candidate that is not cooling down gives it (the candidates serve one model)."""
        ready = self._ready() or [0]
        return await served_models(self._candidates[ready[0]][1])

    async def validate_auth(self) -> None:
        """Passes when one candidate accepts its credentials; rejected ones cool down like in a call."""
        for i in self._ready():
            try:
                await self._candidates[i][1].validate_auth()
                return
            except ProviderError as exc:
                if not exc.account:
                    raise
                self._cool(i, exc)
        raise self._exhausted(None)

    def _ready(self) -> list[int]:
        now = trio.current_time()
        return [i for i, until in enumerate(self._until) if until <= now]

    def _cool(self, i: int, exc: ProviderError) -> None:
        self._until[i] = trio.current_time() + self._cooldown
        self._last_account = exc
        log.warning("candidate rejected; cooling it down", provider=self.id, candidate=self._candidates[i][0],
                    error=exc.kind, seconds=self._cooldown)

    def _exhausted(self, dropped: ProviderError | None) -> ProviderError:
        """What goes up when no candidate could serve: the connection error as it was (retryable, so the
        engine backs off), or, when every candidate rests, the last account error saying when one is back."""
        if dropped is not None:
            return dropped
        now = trio.current_time()
        account = self._last_account
        assert account is not None  # every candidate rests, so one of them was cooled by an account error
        wait = max(0.0, min(self._until) - now)
        minutes, seconds = divmod(math.ceil(wait), 60)
        message = (f"all {len(self._candidates)} keys are cooling down after account errors; the first "
                   f"comes back in {minutes}m{seconds:02d}s (last error: {account})")
        return type(account)(message, provider=self.id, retry_after=wait)

"""The self-improvement pass's settings and token caps: the team file's `evolve` over config.toml's [evolve] over
the defaults, which rooms may run it at all, and the per-day budget, counted from the store's usage rows.

The per-day total is what the pass's own usage rows (agent "evolve") add up to over the last 24 hours in the
store, so a restart does not reset it; passes running meanwhile in this process reserve their share first.
"""
from __future__ import annotations

import time
import weakref
from dataclasses import dataclass, field, fields, replace
from typing import Any

import msgspec

from orchestrator.core.errors import InputError
from orchestrator.room.signals import Weights
from orchestrator.skills.evolve import INPUT_CAP, OUTPUT_CAP, REVIEWER
from orchestrator.store.contract import Store
from orchestrator.store.usage import UsageLog
from orchestrator.team.schema import Evolve, Team

DAY = 86_400.0
HOUR = 3_600.0


@dataclass(frozen=True, kw_only=True)
class Settings:
    """A room's pass, resolved; the defaults are the documented ones (guide: Self-improvement)."""

    threshold: float = 5.0  # two corrections (3 + 3) start a pass; one ordinary line adds nothing
    weights: Weights = field(default_factory=Weights)
    long_task_calls: int = 8
    model: str = ""  # "": the commander's model
    max_tokens_per_run: int = INPUT_CAP + OUTPUT_CAP
    max_tokens_per_day: int = 100_000
    every_hours: float = 12.0
    cooldown_hours: float = 1.0
    fallback_days: float = 3.0


def bound(team: Team) -> bool:
    """Whether a room of `team` is bound to a specific agent, the only rooms that run the pass: the team names a
    member besides the commander, or its commander comes from an agent file (`from:`). A commander-only room
    on the built-in commander (the default session) has nothing of its own to improve, so it never runs it."""
    return bool(team.agents) or bool(team.commander.from_)


def _over(base: Settings, given: Evolve) -> Settings:
    changes: dict[str, Any] = {f.name: getattr(given, f.name) for f in fields(base)
                               if f.name != "weights" and getattr(given, f.name, None) is not None}
    if given.weights is not None:
        changes["weights"] = replace(base.weights, **{k: v for k, v in msgspec.structs.asdict(given.weights).items()
                                                      if v is not None})
    return replace(base, **changes)


def parse_config(table: dict[str, Any], where: str) -> Evolve:
    """config.toml's [evolve] table: the same keys as a team file's `evolve` mapping."""
    try:
        return msgspec.convert(table, Evolve)
    except msgspec.ValidationError as exc:
        raise InputError(f"{where}: [evolve]: {exc}; the keys are those of a team's `evolve` "
                         "(threshold, weights, model, max_tokens_per_run, max_tokens_per_day, every_hours, ...)") from None


def settings(team: Team, config: dict[str, Any], where: str, *, on: bool = False) -> Settings | None:
    """The pass's settings for a room of `team` (None: it does not run): on when the team's `evolve` (or `on`,
    the program's --evolve) says so and the room is bound to an agent; `config`: config.toml's [evolve]."""
    if not (team.evolve or on) or not bound(team):
        return None
    out = _over(Settings(), parse_config(config, where))
    return _over(out, team.evolve) if isinstance(team.evolve, Evolve) else out


# --- the per-day budget ---------------------------------------------------------------------

_SPENT = """SELECT coalesce(sum(input_tokens + output_tokens), 0) FROM usage
  WHERE agent = ? AND kind = 'model' AND ts >= ?"""

# Tokens that passes still running in this process may spend, by store (their rows are not written yet).
_reserved: weakref.WeakKeyDictionary[Store, int] = weakref.WeakKeyDictionary()


def _spent(db: Any, since: float) -> int:
    return int(db.execute(_SPENT, [REVIEWER, since]).fetchone()[0] or 0)


async def spent_today(store: Store) -> int:
    """What the pass's model calls spent over the store's rooms in the last 24 hours."""
    await UsageLog(store).ready()
    return await store.call(_spent, time.time() - DAY)


def _last(db: Any, room: str) -> float | None:
    row = db.execute("SELECT max(ts) FROM usage WHERE room = ? AND agent = ? AND kind = 'model'",
                     [room, REVIEWER]).fetchone()
    return None if row is None or row[0] is None else float(row[0])


async def last_pass_at(store: Store, room: str) -> float | None:
    """When the room's last pass called its model (wall time), if ever."""
    await UsageLog(store).ready()
    return await store.call(_last, room)


class Grant:
    """Tokens one pass may spend now (`tokens`), reserved until its row is written (`release`); `why` says which
    cap limited it when it is below the per-run cap."""

    def __init__(self, store: Store, tokens: int, why: str):
        self.store, self.tokens, self.why = store, tokens, why
        _reserved[store] = _reserved.get(store, 0) + tokens

    def release(self) -> None:
        _reserved[self.store] = max(0, _reserved.get(self.store, 0) - self.tokens)
        self.tokens = 0


async def grant(store: Store, s: Settings) -> Grant:
    """The share of the caps one pass may take: the per-run cap, or what is left of the day's."""
    left = s.max_tokens_per_day - await spent_today(store) - _reserved.get(store, 0)
    if left < s.max_tokens_per_run:
        return Grant(store, max(0, left), f"the per-day cap of {s.max_tokens_per_day:,} tokens "
                                          f"({max(0, left):,} left in the last 24 hours)")
    return Grant(store, s.max_tokens_per_run, f"the per-run cap of {s.max_tokens_per_run:,} tokens")

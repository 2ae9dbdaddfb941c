"""What a room spent: one row per model call and per tool run, summed per agent and model, and priced.

A turn's rows (stopped or failed turns included) wait about a second: the room's next message carries them, or
its writer once they are due, or its close (room/bus.py, room/room.py); a process killed meanwhile loses them.
The cost is computed when shown, from the catalog's prices (config overrides included).
"""
from __future__ import annotations

from typing import Callable, Literal, Protocol

import msgspec

from orchestrator.core.events import CallUsage, ToolEnd
from orchestrator.store.contract import Side, Store
from orchestrator.store.db import immediate
from orchestrator.store.sqlite import sqlite_utils


class Price(Protocol):
    """A model's prices (providers/catalog.py's Price)."""

    def cost(self, input_tokens: int, output_tokens: int, cached_tokens: int) -> float: ...


PriceOf = Callable[[str, str], "Price | None"]  # (provider id, model id) -> prices, if known


class UsageRow(msgspec.Struct, kw_only=True, frozen=True):
    room: str
    ts: float
    agent: str
    provider: str
    model: str
    kind: Literal["model", "tool"]
    name: str = ""  # the tool's name
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    estimated: bool = False  # our token estimate: the provider reported no counts
    seconds: float = 0.0


def spent(room: str, ev: CallUsage | ToolEnd, provider: str, model: str) -> UsageRow:
    """The row of a model call, or of a tool run by an agent on `provider`'s `model`."""
    if isinstance(ev, CallUsage):
        return UsageRow(room=room, ts=ev.ts, agent=ev.agent, provider=ev.provider, model=ev.model,
                        kind="model", input_tokens=ev.input_tokens, output_tokens=ev.output_tokens,
                        cached_tokens=ev.cached_tokens, estimated=ev.estimated, seconds=ev.seconds)
    return UsageRow(room=room, ts=ev.ts, agent=ev.agent, provider=provider, model=model, kind="tool",
                    name=ev.name, seconds=ev.seconds)


class UsageLine(msgspec.Struct, kw_only=True):
    """One agent on one model: the row of `show --usage` (and of its JSON)."""

    agent: str
    provider: str
    model: str
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    estimated_calls: int = 0  # calls whose counts are our estimate
    model_seconds: float = 0.0
    tool_calls: int = 0
    tool_seconds: float = 0.0
    cost: float | None = None  # US dollars; None when the model's prices are unknown


class UsageReport(msgspec.Struct, kw_only=True):
    rooms: list[str]
    lines: list[UsageLine]
    total: UsageLine


_COLUMNS = {"room": str, "ts": float, "agent": str, "provider": str, "model": str, "kind": str, "name": str,
            "input_tokens": int, "output_tokens": int, "cached_tokens": int, "estimated": bool, "seconds": float}
_INSERT = "INSERT INTO usage ({}) VALUES ({})".format(", ".join(_COLUMNS), ", ".join(":" + c for c in _COLUMNS))
_TOTALS = """SELECT agent, provider, model,
    sum(kind = 'model') AS calls, sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
    sum(cached_tokens) AS cached_tokens, sum(kind = 'model' AND estimated) AS estimated_calls,
    total(CASE WHEN kind = 'model' THEN seconds END) AS model_seconds,
    sum(kind = 'tool') AS tool_calls, total(CASE WHEN kind = 'tool' THEN seconds END) AS tool_seconds
  FROM usage WHERE room IN (SELECT value FROM json_each(?)) GROUP BY agent, provider, model ORDER BY min(rowid)"""
# The same totals in PostgreSQL's words (its table is made by the store's migrations, store/pg_schema.py).
_PG_TOTALS = """SELECT agent, provider, model,
    count(*) FILTER (WHERE kind = 'model') AS calls, sum(input_tokens) AS input_tokens,
    sum(output_tokens) AS output_tokens, sum(cached_tokens) AS cached_tokens,
    count(*) FILTER (WHERE kind = 'model' AND estimated) AS estimated_calls,
    coalesce(sum(seconds) FILTER (WHERE kind = 'model'), 0) AS model_seconds,
    count(*) FILTER (WHERE kind = 'tool') AS tool_calls,
    coalesce(sum(seconds) FILTER (WHERE kind = 'tool'), 0) AS tool_seconds
  FROM usage WHERE room = ANY(?::text[]) GROUP BY agent, provider, model ORDER BY min(id)"""


class UsageLog:
    """The `usage` table's owner; it shares the store's connection and writer."""

    def __init__(self, store: Store):
        self._store = store

    async def add(self, rows: list[UsageRow]) -> None:
        await self._call(_insert, [msgspec.structs.asdict(r) for r in rows])

    async def ready(self) -> None:
        """The table exists in the store's file: `writer` may be used from now on."""
        await self._store.prepare(_create)

    def writer(self, rows: list[UsageRow]) -> Rows:
        """The rows as a write to run inside another transaction (a message's: store.append's `side`), once `ready`.
        Not a coroutine: a turn that was stopped hands its rows over without a shielded wait."""
        return Rows([msgspec.structs.asdict(r) for r in rows])

    async def report(self, rooms: list[str], price_of: PriceOf) -> UsageReport:
        """Totals over these rooms, one line per agent and model, in the order they first spent."""
        lines = [msgspec.convert(r, UsageLine) for r in await self._call(_totals, rooms)]
        for line in lines:
            price = price_of(line.provider, line.model)
            if price is not None:
                line.cost = price.cost(line.input_tokens, line.output_tokens, line.cached_tokens)
        total = UsageLine(agent="all", provider="", model="")
        for line in lines:
            for f in ("calls", "input_tokens", "output_tokens", "cached_tokens", "estimated_calls",
                      "model_seconds", "tool_calls", "tool_seconds"):
                setattr(total, f, getattr(total, f) + getattr(line, f))
        if lines and all(line.cost is not None for line in lines):
            total.cost = sum(line.cost for line in lines if line.cost is not None)
        return UsageReport(rooms=rooms, lines=lines, total=total)

    async def _call(self, fn, *args):
        await self._store.prepare(_create)
        return await self._store.call(fn, *args)


class Rows:
    """Usage rows as one write (a `Side`): the rows of the turns that follow join it while it waits (Bus.carry),
    so a room's second of turns costs one statement."""

    __slots__ = ("rows",)

    def __init__(self, rows: list[dict]):
        self.rows = rows

    def join(self, other: Side) -> bool:
        if not isinstance(other, Rows):
            return False
        self.rows += other.rows
        return True

    def __call__(self, db: sqlite_utils.Database) -> None:
        _write(db, self.rows)


def _create(db: sqlite_utils.Database) -> None:
    if not isinstance(db, sqlite_utils.Database):
        return  # PostgreSQL: made by the store's migrations
    with immediate(db):
        db.table("usage").create(_COLUMNS, if_not_exists=True)
        db.table("usage").create_index(["room"], if_not_exists=True)


def _insert(db: sqlite_utils.Database, rows: list[dict]) -> None:
    with immediate(db):
        _write(db, rows)


def _write(db: sqlite_utils.Database, rows: list[dict]) -> None:
    (db.conn if isinstance(db, sqlite_utils.Database) else db).executemany(_INSERT, rows)


def _totals(db: sqlite_utils.Database, rooms: list[str]) -> list[dict]:
    if not isinstance(db, sqlite_utils.Database):
        cur = db.execute(_PG_TOTALS, [list(rooms)])
        return [dict(zip([d.name for d in cur.description], row)) for row in cur.fetchall()]
    return list(db.query(_TOTALS, [msgspec.json.encode(rooms).decode()]))


# --- what people read -------------------------------------------------------------------------

def table(report: UsageReport) -> str:
    """The `show --usage` / `/usage` table: one line per agent and model, then the total."""
    head = ("agent", "model", "calls", "input", "output", "cached", "cached %", "model s", "tools", "tool s",
            "cost $")
    rows = [_cells(line) for line in report.lines]
    if len(report.lines) > 1:
        rows.append(_cells(report.total))
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    out = ["  ".join(h.ljust(w) if i < 2 else h.rjust(w) for i, (h, w) in enumerate(zip(head, widths)))]
    for r in rows:
        out.append("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    if not report.lines:
        out.append("(no model calls recorded in this room)")
    if report.total.estimated_calls:
        out.append("~ token counts of some calls are estimates: their provider reported none")
    if any(line.cost is None for line in report.lines):
        out.append("? no price known for this model: set input_price/output_price in [models.\"PROVIDER/MODEL\"]")
    return "\n".join(out)


def summary(report: UsageReport) -> str:
    """The one line at the end of `orchestrator run`."""
    t = report.total
    mark = "~" if t.estimated_calls else ""
    cost = f"${t.cost:.4f}" if t.cost is not None else "cost unknown"
    return (f"usage: {t.calls} model call{'s' * (t.calls != 1)}, {mark}{t.input_tokens:,} in / "
            f"{mark}{t.output_tokens:,} out ({t.cached_tokens:,} cached, {_share(t.cached_tokens, t.input_tokens)}), "
            f"{t.model_seconds:.1f} s in models, "
            f"{t.tool_seconds:.1f} s in tools, {cost}")


def _cells(line: UsageLine) -> list[str]:
    mark = "~" if line.estimated_calls else ""
    model = f"{line.provider}/{line.model}" if line.provider else ""
    cost = "?" if line.cost is None else f"{line.cost:.4f}"
    return [line.agent, model, str(line.calls), f"{mark}{line.input_tokens:,}", f"{mark}{line.output_tokens:,}",
            f"{line.cached_tokens:,}", _share(line.cached_tokens, line.input_tokens), f"{line.model_seconds:.2f}",
            str(line.tool_calls), f"{line.tool_seconds:.2f}", cost]


def _share(part: int, whole: int) -> str:
    """The share of input read from the provider's prompt cache, which it bills at its cached price."""
    return f"{100 * part / whole:.0f}%" if whole else "-"

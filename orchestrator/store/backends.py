"""Which store a `--db` names: a PostgreSQL URL (postgresql://…) for hosts on many machines, else an SQLite
file for one machine. Both keep the one contract (store/contract.py); psycopg is imported only for a URL.
"""
from __future__ import annotations

from os import PathLike
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.store.contract import Store


def is_url(target: object) -> bool:
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


async def open_store(target: str | PathLike[str], *, readonly: bool = False) -> Store:
    """Open the store at `target`: a SQLite file path, or a postgresql:// URL (the `postgres` extra)."""
    if is_url(target):
        from orchestrator.store.postgres import PgStore
        return await PgStore.open(str(target), readonly=readonly)
    from orchestrator.store.db import SqliteStore
    return await SqliteStore.open(target, readonly=readonly)

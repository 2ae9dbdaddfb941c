"""`orchestrator rooms`, `show` and `export`: reading stored rooms for a person or a script.

They only read: the file is opened read-only (no write lock, so a writer never makes them wait, and a
read-only copy works), and a room that needs healing is healed in memory for display.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import msgspec

from orchestrator.cli.paths import default_db
from orchestrator.cli.transcript import Printer, json_out, reader_may_leave
from orchestrator.core.errors import InputError
from orchestrator.core.events import message_event
from orchestrator.store.db import Store
from orchestrator.store.export import to_markdown


async def _open_store(db: Path) -> Store:
    return await Store.open(db, readonly=True)


async def cmd_rooms(args) -> int:
    store = await _open_store(args.db)
    try:
        rooms = await store.rooms()
    finally:
        await store.close()
    for r in rooms:
        if args.json:
            print(msgspec.json.encode({"id": r.id, "name": r.name, "floor": r.floor, "messages": r.messages}).decode())
        else:
            print(f"{r.id}  {r.name:<24} floor={r.floor:<12} {r.messages} messages")
    return 0


async def _load(args):
    store = await _open_store(args.db)
    try:
        record = await store.room(args.room)
        if record is None:
            raise InputError(f"no room {args.room!r} in {args.db}; `orchestrator rooms --db {args.db}` lists them")
        return record, await store.load(record.id)
    finally:
        await store.close()


async def cmd_show(args) -> int:
    record, messages = await _load(args)
    sink = reader_may_leave(json_out if args.json else Printer())
    for m in messages:
        sink(message_event(m))
    if not args.json:
        print(f"* floor: {record.floor}")
    return 0


async def cmd_export(args) -> int:
    record, messages = await _load(args)
    if args.format == "jsonl":
        for m in messages:
            reader_may_leave(json_out)(message_event(m))
    else:
        sys.stdout.write(to_markdown(record, messages))
    return 0


def add_parsers(sub: Any) -> None:
    for name, fn, help_ in (("rooms", cmd_rooms, "list stored rooms"),
                            ("show", cmd_show, "print a stored room's transcript (healed for display)"),
                            ("export", cmd_export, "write a stored room's transcript")):
        s = sub.add_parser(name, help=help_)
        if name != "rooms":
            s.add_argument("room", help="room id (or a unique prefix, or its name)")
        s.add_argument("--db", type=Path, default=default_db(), help="the SQLite file (default: %(default)s)")
        if name == "export":
            s.add_argument("--format", choices=["jsonl", "md"], default="md")
        else:
            s.add_argument("--json", action="store_true")
        s.set_defaults(fn=fn)

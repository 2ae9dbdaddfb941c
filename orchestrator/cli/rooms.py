"""`orchestrator rooms`, `show` and `export`: reading stored rooms for a person or a script.

Without `--db` they read the chat database and every kept scenario run (cli/paths.py), so the room of
the last `orchestrator run` is found by its name or id with no flags. They only read: each file is opened read-only (no write lock, so a writer never makes them wait, and
a read-only copy works), and a room that needs healing is healed in memory for display.
"""
from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path
from typing import Any

import msgspec
import trio

from orchestrator.cli.paths import add_all_flag, database, default_db, open_db, room_dbs, runs_dir
from orchestrator.cli.transcript import Printer, json_out, reader_may_leave
from orchestrator.cli.words import count
from orchestrator.core.errors import AmbiguousRoom, InputError, RoomNotFound
from orchestrator.core.events import message_event
from orchestrator.store.backends import is_url
from orchestrator.store.records import RoomRecord
from orchestrator.store.export import to_markdown
from orchestrator.store.usage import UsageLog, table


def when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")


def _databases(args) -> list[Path | str]:
    """`--db` alone when given (it must exist), else the chat database and the kept runs that exist."""
    if args.db is not None:
        if not is_url(args.db) and not args.db.exists():
            raise InputError(f"{args.db}: no such database; pass --db PATH or set ORCHESTRATOR_DB")
        return [args.db]
    return room_dbs()


async def _listed(dbs: list[Path | str]) -> list[tuple[Path | str, RoomRecord]]:
    found: list[tuple[Path | str, RoomRecord]] = []
    for db in dbs:
        store = await open_db(db, create=False, readonly=True)
        try:
            found += [(db, r) for r in await store.rooms()]
        finally:
            await store.close()
    return found


async def cmd_rooms(args) -> int:
    dbs = _databases(args)
    listed = await _listed(dbs)
    if not listed and not args.json:
        print(f"no rooms yet: `orchestrator chat` keeps its rooms in {default_db()}, "
              f"`orchestrator run` its runs in {runs_dir()}")
        return 0
    heading = None
    for db, r in listed:
        if args.json:
            print(msgspec.json.encode({"id": r.id, "name": r.name, "created": r.created, "floor": r.floor,
                                       "messages": r.messages, "db": str(db)}).decode())
            continue
        group = "scenario runs" if not is_url(db) and Path(db).parent == runs_dir() and args.db is None else str(db)
        if group != heading and (args.db is None):
            print(f"{group}:" if group == "scenario runs" else f"chat rooms ({db}):")
            heading = group
        print(f"{r.id}  {r.name:<24} {when(r.created)}  floor={r.floor:<12} {count(r.messages, 'message')}")
    return 0


async def find_room(args) -> tuple[Path | str, RoomRecord]:
    """The room `args.room` names across the databases: an exact id, a unique id prefix, else a name
    (the newest of that name, saying so when there are others)."""
    listed = await _listed(_databases(args))
    ref = args.room
    exact = [(db, r) for db, r in listed if r.id == ref]
    prefixed = [(db, r) for db, r in listed if ref and r.id.startswith(ref)]
    named = sorted(((db, r) for db, r in listed if r.name == ref), key=lambda x: x[1].created)
    if exact or len(prefixed) == 1:
        return (exact or prefixed)[0]
    if named:
        db, newest = named[-1]
        if len(named) > 1:
            others = ", ".join(f"{r.id} ({when(r.created)})" for _, r in named[:-1][-5:])
            print(f"note: {len(named)} rooms are named {ref!r}; this is the newest, {newest.id} "
                  f"({when(newest.created)}); the others: {others} (name one by its id)", file=sys.stderr)
        return db, newest
    if len(prefixed) > 1:
        raise AmbiguousRoom(f"{len(prefixed)} rooms have ids starting with {ref!r}: "
                         f"{', '.join(r.id for _, r in prefixed[:5])}; give more of the id")
    where = f" in {args.db}" if args.db else ""
    raise RoomNotFound(f"no room {ref!r}{where}; `orchestrator rooms{' --db ' + str(args.db) if args.db else ''}` "
                     "lists them")


async def _load(args):
    db, record = await find_room(args)
    store = await open_db(db, create=False, readonly=True)
    try:
        return record, await store.load(record.id)
    finally:
        await store.close()


async def cmd_show(args) -> int:
    if args.usage:
        return await _usage(args)
    record, messages = await _load(args)
    sink = reader_may_leave(json_out if args.json else Printer(everything=args.all))
    for m in messages:
        sink(message_event(m))
    if not args.json:
        print(f"* floor: {record.floor}")
    return 0


async def _usage(args) -> int:
    """`show ROOM --usage`: per agent and model, priced by the catalog and the config file."""
    from orchestrator.providers.registry import Registry

    db, record = await find_room(args)
    # config.toml may name `${secret:...}` keys: a keyring lookup, so off the loop
    async with await trio.to_thread.run_sync(Registry.load) as registry:
        store = await open_db(db, create=False, readonly=True)
        try:
            report = await UsageLog(store).report([record.id], registry.catalog.price)
        finally:
            await store.close()
    print(msgspec.json.encode(report).decode() if args.json else table(report))
    return 0


async def cmd_export(args) -> int:
    record, messages = await _load(args)
    if args.format == "jsonl":
        for m in messages:
            reader_may_leave(json_out)(message_event(m))
    else:
        sys.stdout.write(to_markdown(record, messages))  # for a person: printed through the CLI's sanitizer
    return 0


def add_parsers(sub: Any) -> None:
    for name, fn, help_ in (("rooms", cmd_rooms, "list stored rooms: chat rooms and scenario runs"),
                            ("show", cmd_show, "print a stored room's transcript (healed for display)"),
                            ("export", cmd_export, "write a stored room's transcript")):
        s = sub.add_parser(name, help=help_, description=help_[0].upper() + help_[1:] + ".")
        if name != "rooms":
            s.add_argument("room", help="room id (or a unique prefix, or its name)")
        s.add_argument("--db", type=database, default=None,
                       help=f"read only this SQLite file or postgresql:// URL (default: {default_db()} and the "
                            "kept scenario runs)")
        if name == "export":
            s.add_argument("--format", choices=["jsonl", "md"], default="md")
        else:
            s.add_argument("--json", action="store_true")
        if name == "show":
            s.add_argument("--usage", action="store_true",
                           help="what the room spent per agent and model: calls, tokens, time, cost")
            add_all_flag(s)
        s.set_defaults(fn=fn, paints=name == "show")

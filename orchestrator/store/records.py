"""What both stores keep, as records, and how each becomes a row and back: rooms, tasks and messages, their ids,
and the seqs and timestamps an append hands out.

Rows are in the order of the statements here, which both stores run (SQLite's placeholders; the PostgreSQL
store's session translates them).
"""
from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Sequence
from time import time_ns
from typing import Any
from uuid import uuid4

import msgspec

from orchestrator.core.types import BLOCK_DECODER, ENCODER, Draft, Message


class RoomRecord(msgspec.Struct, kw_only=True):
    id: str
    name: str
    floor: str
    created: float
    meta: dict = msgspec.field(default_factory=dict)
    messages: int = 0  # message count, filled by rooms()/room()
    last_seq: int = 0  # the highest seq ever handed out (healing never reuses one)
    last_ts: float = 0.0  # when the last message was stored: the room's last activity


class TaskRecord(msgspec.Struct, kw_only=True):
    id: str
    room: str
    agent: str
    kind: str  # "dispatch" | "worker"
    status: str  # "running" | "done" | "failed" | "cancelled"
    task: str
    result: str = ""
    background: bool = False
    read: bool = False  # whether the commander has read the report
    created: float = 0.0
    updated: float = 0.0


_STRINGS = msgspec.json.Decoder(list[str])
_OBJECT = msgspec.json.Decoder(dict)
_MESSAGE = Message.__struct_fields__
_TASK = TaskRecord.__struct_fields__

INSERT_ROOM = "INSERT INTO rooms (id, name, floor, created, meta, last_seq, last_ts) VALUES (?, ?, ?, ?, ?, 0, 0)"
INSERT_MESSAGE = "INSERT INTO messages ({}, epoch, answers) VALUES ({})".format(
    ", ".join(_MESSAGE), ", ".join("?" * (len(_MESSAGE) + 2)))  # by position: no name is looked up per row
SELECT_MESSAGES = f"SELECT {', '.join(_MESSAGE)} FROM messages WHERE room = ? AND seq > ? ORDER BY seq"
TASK_COLUMNS = ", ".join(_TASK)
UPSERT_TASK = "INSERT INTO tasks ({}) VALUES ({}) ON CONFLICT (id) DO UPDATE SET {}".format(
    TASK_COLUMNS, ", ".join(":" + c for c in _TASK),
    ", ".join(f"{c} = excluded.{c}" for c in _TASK if c not in ("id", "created")))

assert _MESSAGE == ("id", "room", "seq", "ts", "author", "kind", "blocks", "visible_to", "provider", "model",
                    "replaces"), "message_row and message_from list Message's fields in order"


def missing(room_id: str) -> KeyError:
    """What a write to a room that does not exist raises, on both stores."""
    return KeyError(f"no room {room_id!r}")


def new_room(name: str, floor: str, meta: dict | None) -> RoomRecord:
    return RoomRecord(id=uuid4().hex[:12], name=name, floor=floor, created=time.time(), meta=meta or {})


def room_row(room: RoomRecord) -> list:
    """`INSERT_ROOM`'s parameters."""
    return [room.id, room.name, room.floor, room.created, json_text(room.meta)]


def room_from(row: Sequence) -> RoomRecord:
    """A row of each store's room query: id, name, floor, created, meta, last_seq, last_ts and the message count."""
    id_, name, floor, created, meta, last_seq, last_ts, count = row
    return RoomRecord(id=id_, name=name, floor=floor, created=created, meta=_OBJECT.decode(meta),
                      messages=count, last_seq=last_seq, last_ts=float(last_ts))


def task_row(task: TaskRecord) -> dict:
    """`UPSERT_TASK`'s parameters: the first `created` is kept, `updated` is now."""
    now = time.time()
    return msgspec.structs.asdict(task) | {"created": task.created or now, "updated": now}


def task_from(row: Sequence) -> TaskRecord:
    """A row of TASK_COLUMNS (SQLite keeps the flags as integers)."""
    return msgspec.convert(dict(zip(_TASK, row)), TaskRecord, strict=False)


def task_side(task: TaskRecord) -> Callable[[Any], None]:
    """The task's row as a write inside another transaction (a message's: `append`'s `side`)."""
    row = task_row(task)
    return lambda db: db.execute(UPSERT_TASK, row)


def stamp(room_id: str, last: Sequence | None, drafts: Sequence[Draft], epoch: int | None,
          answers: Sequence[int | None] = (), ids: Sequence[str] = ()) -> tuple[list[Message], list[tuple]]:
    """The drafts as messages after the room's `last` (seq, ts), and their rows for INSERT_MESSAGE.

    Seqs follow on by one; a timestamp is now, or just after the previous one when the clock stalled or stepped
    back, so both always increase. `last` None: the room does not exist. `answers[i]` is what `drafts[i]` answers
    (None, or missing at the end: nothing); `ids[i]` its id (missing at the end: a new one)."""
    if last is None:
        raise missing(room_id)
    seq, ts = last
    messages, rows = [], []
    for i, (draft, answer) in enumerate(zip(drafts, itertools.chain(answers, itertools.repeat(None)))):
        now = time.time()
        seq, ts = seq + 1, now if now > ts else ts + 1e-6
        m = Message(id=ids[i] if i < len(ids) else message_id(), room=room_id, seq=seq, ts=ts, **msgspec.structs.asdict(draft))
        messages.append(m)
        rows.append(message_row(m, epoch, answer))
    return messages, rows


def message_row(m: Message, epoch: int | None, answers: int | None = None) -> tuple:
    """The message's row in INSERT_MESSAGE's order: Message's fields (the lists as JSON), then epoch and answers."""
    id_, room, seq, ts, author, kind, blocks, visible_to, provider, model, replaces = msgspec.structs.astuple(m)
    return (id_, room, seq, ts, author, kind, json_text(blocks), json_text(visible_to), provider, model,
            json_text(replaces), epoch, answers)


def message_from(row: Sequence) -> Message:
    """A row of SELECT_MESSAGES."""
    id_, room, seq, ts, author, kind, blocks, visible_to, provider, model, replaces = row
    return Message(id=id_, room=room, seq=seq, ts=ts, author=author, kind=kind, blocks=BLOCK_DECODER.decode(blocks),
                   visible_to=_STRINGS.decode(visible_to), provider=provider, model=model,
                   replaces=_STRINGS.decode(replaces))


def json_text(value: Any) -> str:
    return ENCODER.encode(value).decode()


_PROCESS = os.urandom(5).hex()  # 40 random bits per process: with the counter, ids of two hosts never meet
_COUNT = itertools.count()


def _new_process() -> None:
    global _PROCESS, _COUNT
    _PROCESS, _COUNT = os.urandom(5).hex(), itertools.count()


os.register_at_fork(after_in_child=_new_process)  # a forked child must not repeat its parent's ids


def message_id() -> str:
    """32 hex digits that grow with time (milliseconds, then this process's mark and count): a new row goes at the
    end of the id index instead of a random page, and no id costs a call for random bytes."""
    return f"{time_ns() // 1_000_000:012x}{_PROCESS}{next(_COUNT) & 0xFFFFFFFFFF:010x}"

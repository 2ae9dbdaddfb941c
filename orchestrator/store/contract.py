"""The store's contract: every method the SQLite file (db.py) and the PostgreSQL database (postgres.py) offer, what
each returns and which errors it raises. Callers are typed to `Store`; store/base.py holds what both do alike.

Any call may raise UnusableDatabase (store/schema.py) when the file is damaged or cannot be written, or the server
cannot be reached. A write that needs its room (append, set_meta, set_floor, acquire) raises KeyError("no room ...")
for an id no room has; a lookup returns None.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from orchestrator.core.types import Draft, Message
from orchestrator.store.lease import InboxLine, Lease
from orchestrator.store.records import RoomRecord, TaskRecord

T = TypeVar("T")
# Writes of another owner of tables, run inside a message's transaction. The argument is the store's connection:
# its `execute(sql, params)` takes SQLite's placeholders (`?`, `:name`) on both stores.
Side = Callable[[Any], None]


class Store(Protocol):
    """What every store (SQLite or PostgreSQL) offers the rooms: rooms, their messages, tasks, usage and leases."""

    name: str  # the path, or the URL without its password: in every error about the database
    readonly: bool  # opened to be read only: no call writes, not even a migration or a healing

    @classmethod
    async def open(cls: type[T], target: str, /, *, readonly: bool = False) -> T:
        """Open the store at `target` (an SQLite path, or a postgresql:// URL), creating or migrating it unless
        `readonly`. Raises UnusableDatabase for a target that is not a usable store, one written by a newer
        release, or a server that cannot be reached."""
        ...

    async def close(self) -> None:
        """Close the connection; shielded, so that `finally: await store.close()` closes inside a cancelled scope."""
        ...

    # --- rooms and messages -------------------------------------------------------------------

    async def create_room(self, name: str, *, floor: str = "commander", meta: dict[str, Any] | None = None) -> RoomRecord:
        """A new room with a new id, stored before this returns."""
        ...

    async def room(self, ref: str) -> RoomRecord | None:
        """By exact id, else by an id prefix that only one room has, else the newest room named `ref`; None when
        none matches (an empty `ref`, or a prefix that several rooms share and no room is named, included)."""
        ...

    async def rooms(self) -> list[RoomRecord]:
        """Every room, oldest first, with its message count, last seq and last activity."""
        ...

    async def set_meta(self, room_id: str, meta: dict[str, Any]) -> None:
        """Replace the room's meta. KeyError for no such room; Fenced once another host took the room."""
        ...

    async def set_floor(self, room_id: str, owner: str) -> None:
        """Record who holds the floor. KeyError for no such room; Fenced once another host took the room."""
        ...

    async def append(self, room_id: str, draft: Draft, *, side: Side | None = None,
                     answers: int | None = None) -> Message:
        """Commit one message, with the next seq and a timestamp later than the room's last; with `side`, other
        rows in the same transaction (an assignment's ledger row, a turn's usage), so that they cost no commit of
        their own. `answers`: an agent's reply records the newest seq its author had read (see `answered`).
        A user message delivers the line `deliver` named (its inbox row goes in the same transaction).
        KeyError for no such room; Fenced once another host took the room (nothing of it is written)."""
        ...

    async def append_many(self, room_id: str, drafts: list[Draft], *, side: Side | None = None,
                          answers: Sequence[int | None] = ()) -> list[Message]:
        """`append` for several messages in one transaction; `answers[i]` is what `drafts[i]` answers (None, or
        missing at the end: nothing)."""
        ...

    async def read(self, room_id: str, after: int = 0) -> list[Message]:
        """The room's messages with seq > `after` in seq order, as stored (no healing): how a follower tails a
        room. A small read."""
        ...

    async def messages(self, room_id: str, after: int = 0) -> list[Message]:
        """`read` for a whole history: off the event loop where the store otherwise reads on it. For readers of a
        room that is running (healing a live room would answer tool calls that are still at work)."""
        ...

    async def answered(self, room_id: str) -> dict[str, int]:
        """By author, the newest seq that author's replies answer: a user line it was sent with a higher seq is
        still unanswered (a host died before the reply was stored)."""
        ...

    async def load(self, room_id: str, *, size: int | None = None) -> list[Message]:
        """Heal the room's history in one transaction, then return it in seq order; healing never hands a
        seq out again. A read-only store heals a copy and writes nothing. `size`: the message count the room's
        record gave, so that a small room may load as quickly as an append. Fenced once another host took it."""
        ...

    async def put_task(self, task: TaskRecord) -> None:
        """Insert or update by id; the first `created` is kept, `updated` is now. Fenced once another host took
        the task's room."""
        ...

    async def tasks(self, room_id: str) -> list[TaskRecord]:
        """The room's tasks in the order they were created."""
        ...

    # --- other owners of tables in the same database (memory, knowledge base, usage) ------------

    async def call(self, fn: Callable[..., T], *args: Any, small: bool = False) -> T:
        """Run `fn(db, *args)` on the store's connection, one call at a time, and return what it returns. `db`'s
        `execute(sql, params)` takes SQLite's placeholders on both stores, so one implementation of each query
        serves both; `immediate(db)` (db.py) makes a transaction of it. `small` (a read or write bounded by a
        cap) may run on the event loop, as an append does."""
        ...

    async def prepare(self, fn: Callable[[Any], None]) -> None:
        """Run another owner's set-up (`CREATE TABLE IF NOT EXISTS`) once per open store, not once per room."""
        ...

    # --- leases: one host runs a room at a time ------------------------------------------------

    async def acquire(self, room_id: str, host: str, seconds: float) -> Lease | None:
        """Take the room if nobody holds it or its lease ran out: the epoch goes up by one, and from now on every
        write of this store to the room carries it. None while another host's lease is live; KeyError for no
        such room."""
        ...

    async def renew(self, lease: Lease, seconds: float) -> Lease | None:
        """Extend a lease still held (its epoch unchanged) to `seconds` from now; None once another host has
        taken the room."""
        ...

    async def renew_all(self, leases: list[Lease], seconds: float) -> list[Lease | None]:
        """`renew` for every lease a host holds, in one transaction, in their order."""
        ...

    async def release(self, lease: Lease) -> None:
        """Let another host take the room at once. The epoch stays: writes by this store are refused only once
        another host has taken it."""
        ...

    async def leases(self, room: str | None = None) -> list[Lease]:
        """Every lease, live or lapsed, by room id; `room`: that room's alone (none or one)."""
        ...

    async def clock(self) -> float:
        """Now, on the clock that lease expiries are written in (the server's, for PostgreSQL)."""
        ...

    # --- the inbox: lines for a room another host runs ------------------------------------------

    async def send(self, room_id: str, text: str, *, author: str = "user") -> InboxLine:
        """Queue a line for the room's owner; once this returns the line is stored (acknowledged)."""
        ...

    async def inbox(self, rooms: list[str] | None = None) -> list[InboxLine]:
        """Waiting lines, oldest first: for `rooms`, or all."""
        ...

    async def drop(self, line_id: str) -> None:
        """Delete a line from the inbox that no user append delivers (a request to stop or to answer)."""
        ...

    def deliver(self, line: InboxLine) -> None:
        """The room's next user message is `line`: its append deletes the line from the inbox in the same
        transaction, so a line is in the inbox or in the room, never both and never neither."""
        ...

    def undeliver(self, room_id: str) -> None:
        """Forget a delivery whose append did not happen (refused or failed): the line stays in the inbox."""
        ...

    async def wait_inbox(self, seconds: float) -> None:
        """Until a line may have arrived, at most `seconds`."""
        ...

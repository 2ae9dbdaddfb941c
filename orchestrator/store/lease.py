"""Who runs a room: leases with epochs (one writer per room, fenced) and the inbox of lines for a room's owner.

Both stores keep these rows beside the rooms, so a takeover, a fenced write and a delivered line each commit
in the same transaction as the messages they guard.
"""
from __future__ import annotations

import msgspec

from orchestrator.core.errors import OrchestratorError

LEASE_SECONDS = 10.0  # how long a room stays with a host that stopped renewing (a dead host's rooms move then)


class Lease(msgspec.Struct, frozen=True, kw_only=True):
    room: str
    host: str
    epoch: int  # one more at every change of owner; every write to the room carries it
    expires: float  # on the database's clock (the server's, for PostgreSQL)


# An inbox line by this author asks the owner to act on the room rather than post: "stop" (the text is the
# reason) or "answer" (the text is the answer; the request id follows the second colon, empty for the oldest).
CONTROL = "control:"


class InboxLine(msgspec.Struct, frozen=True, kw_only=True):
    id: str  # chosen by the host that acknowledged the line; the owner's append deletes it
    room: str
    author: str  # "user", or CONTROL + what to do
    text: str
    posted: float


class Fenced(OrchestratorError):
    """A write to a room by a host whose lease was taken over: refused, nothing of it was written."""

    def __init__(self, room: str, epoch: int, current: int):
        super().__init__(f"room {room}: another host runs it now (epoch {current}, this host held {epoch}); "
                         "the write was refused")
        self.room, self.epoch, self.current = room, epoch, current


class HeldElsewhere(OrchestratorError):
    """The room is run by another host now: a line for it goes to the room's inbox, its owner answers it."""

    def __init__(self, room: str, host: str):
        super().__init__(f"room {room}: run by another host ({host}) now")
        self.room, self.host = room, host

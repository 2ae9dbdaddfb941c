"""One room's event stream for browsers and scripts: each event numbered by the room's `seq`, kept in a
bounded journal so a reconnect resumes exactly, and fanned out to subscribers through bounded channels.

A message's id is its seq; an event between two messages is `seq.k` (the k-th since message `seq`).
A subscriber that falls behind is dropped, never waited for: it reconnects with Last-Event-ID and
catches up from the journal (or from the store when the journal has moved past it).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import trio

from orchestrator.core.events import EVENT_ENCODER, Event, MessageEvent

Key = tuple[int, int]  # (seq of the last message, events since it)

JOURNAL = 5_000  # events kept per room for resuming and replaying (text deltas are most of them)
BUFFER = 2_000  # events a subscriber may lag behind before it is dropped


def parse_id(text: str | None) -> Key | None:
    """An SSE id (`12` or `12.3`) as a key; None for no id or one we never gave out."""
    if not text:
        return None
    seq, _, k = text.strip().partition(".")
    try:
        key = (int(seq), int(k or 0))
    except ValueError:
        return None
    return key if key >= (0, 0) else None


def frame(key: Key, ev: Event) -> bytes:
    """The SSE frame of one event: its id and its JSON (the `run --json` format) on one data line."""
    ident = str(key[0]) if key[1] == 0 else f"{key[0]}.{key[1]}"
    return b"id: " + ident.encode() + b"\ndata: " + EVENT_ENCODER.encode(ev) + b"\n\n"


@dataclass
class Subscription:
    """What a new subscriber replays before it reads the live channel."""

    receive: trio.MemoryReceiveChannel
    backlog: list[tuple[Key, bytes]]  # journal entries after its point
    from_store: int | None  # first the stored messages after this seq (the journal does not reach back)...
    upto: int  # ...up to this one: the journal holds every later message, with the events between them
    _send: trio.MemorySendChannel = field(repr=False)

    def close(self) -> None:
        self._send.close()


class Feed:
    def __init__(self, base_seq: int, journal: int = JOURNAL, buffer: int = BUFFER):
        self._base = base_seq
        self._seq, self._k = base_seq, 0
        self._journal: deque[tuple[Key, bytes | Event]] = deque(maxlen=journal)  # an Event until encoded
        self._reaches: Key = (base_seq, 0)  # every event after this key is in the journal
        self._buffer = buffer
        self._subscribers: set[trio.MemorySendChannel] = set()
        self.dropped = 0  # subscribers dropped for lagging, since the room opened

    def publish(self, ev: Event) -> None:
        """Called by the room's bus, synchronously: it never waits for a subscriber."""
        if isinstance(ev, MessageEvent):
            self._seq, self._k = ev.seq, 0
        else:
            self._k += 1
        key = (self._seq, self._k)
        if len(self._journal) == self._journal.maxlen:
            self._reaches = self._journal[0][0]
        if not self._subscribers:  # nobody watches: encoded only if someone resumes from here
            self._journal.append((key, ev))
            return
        entry = (key, frame(key, ev))
        self._journal.append(entry)
        for send in list(self._subscribers):
            try:
                send.send_nowait(entry)
            except (trio.WouldBlock, trio.ClosedResourceError):
                self._subscribers.discard(send)
                send.close()  # it reads what it has, then its stream ends and the client resumes
                self.dropped += 1

    def subscribe(self, after: Key | None) -> Subscription:
        """Everything after `after` (None: the whole room), then live events, with no gap and no repeat.

        An id `base.k` may come from an earlier process (its k counted other events), so it resumes
        from the store, like any point the journal no longer reaches.
        """
        send, receive = trio.open_memory_channel(self._buffer)
        self._subscribers.add(send)
        if after is not None and after >= self._reaches and (after[0] > self._base or after[1] == 0):
            return Subscription(receive, self._frames(after), None, self._reaches[0], send)
        return Subscription(receive, self._frames((-1, 0)), after[0] if after else 0, self._reaches[0], send)

    def _frames(self, after: Key) -> list[tuple[Key, bytes]]:
        """The journal after `after`, encoded (and kept encoded for the next reader)."""
        encoded = [(key, item if isinstance(item, bytes) else frame(key, item)) for key, item in self._journal]
        self._journal = deque(encoded, maxlen=self._journal.maxlen)
        return [e for e in encoded if e[0] > after]

    def close(self) -> None:
        """The room closed in this process: each subscriber reads what it has, then its stream ends and the
        client resumes from its last id (served from the store, or by the room's next owner)."""
        for send in self._subscribers:
            send.close()
        self._subscribers.clear()

    def unsubscribe(self, sub: Subscription) -> None:
        self._subscribers.discard(sub._send)
        sub.close()

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

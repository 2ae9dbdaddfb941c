"""The web feed of a room: ids by seq, resuming from the journal or the store, and slow subscribers
dropped instead of waited for."""
from __future__ import annotations

import time

import pytest
import trio

pytest.importorskip("starlette", reason="the serve extra is not installed: pip install -e '.[serve]'")

from orchestrator.core.events import MessageEvent, TextDeltaEvent  # noqa: E402
from orchestrator.web.feed import Feed, parse_id  # noqa: E402


def msg(seq: int) -> MessageEvent:
    return MessageEvent(room="r", ts=time.time(), id=f"m{seq}", seq=seq, author="user", kind="user",
                        text=f"line {seq}", visible_to=["user"])


def delta(text: str) -> TextDeltaEvent:
    return TextDeltaEvent(room="r", ts=time.time(), agent="commander", text=text)


def ids(entries) -> list[str]:
    return [e[1].split(b"\n", 1)[0].decode()[4:] for e in entries]


def test_ids_are_seq_for_messages_and_seq_dot_k_between():
    feed = Feed(base_seq=4)
    sub = feed.subscribe(None)
    for ev in (delta("a"), msg(5), delta("b"), delta("c"), msg(6)):
        feed.publish(ev)
    got = []
    while True:
        try:
            got.append(sub.receive.receive_nowait())
        except trio.WouldBlock:
            break
    assert ids(got) == ["4.1", "5", "5.1", "5.2", "6"]
    assert parse_id("5.2") == (5, 2) and parse_id("7") == (7, 0)
    assert parse_id("") is None and parse_id("x.1") is None and parse_id("-3") is None


def test_a_resume_inside_the_journal_replays_exactly_what_follows():
    feed = Feed(base_seq=0)
    for ev in (msg(1), delta("a"), delta("b"), msg(2), delta("c")):
        feed.publish(ev)
    sub = feed.subscribe(parse_id("1.1"))
    assert sub.from_store is None and ids(sub.backlog) == ["1.2", "2", "2.1"]
    assert feed.subscribe(parse_id("2.1")).backlog == []


def test_points_the_journal_does_not_reach_resume_from_the_store():
    feed = Feed(base_seq=10, journal=3)
    new_page = feed.subscribe(None)  # a new page reads the stored room first
    assert (new_page.from_store, new_page.upto, new_page.backlog) == (0, 10, [])
    # An id `10.k` may be another process's: its k counted other events.
    assert feed.subscribe(parse_id("10.2")).from_store == 10
    assert feed.subscribe(parse_id("10")).from_store is None
    for ev in (msg(11), delta("a"), msg(12), delta("b"), delta("c")):
        feed.publish(ev)
    # The journal keeps the last 3: 12, 12.1, 12.2; message 11 and 11.1 have left it.
    old = feed.subscribe(parse_id("11"))
    assert (old.from_store, old.upto) == (11, 11) and ids(old.backlog) == ["12", "12.1", "12.2"]
    fresh = feed.subscribe(None)  # a new page: messages 1-11 from the store, then the journal
    assert (fresh.from_store, fresh.upto) == (0, 11) and ids(fresh.backlog) == ["12", "12.1", "12.2"]
    resumed = feed.subscribe(parse_id("12"))
    assert resumed.from_store is None and ids(resumed.backlog) == ["12.1", "12.2"]


def test_a_subscriber_that_lags_is_dropped_and_never_slows_the_room():
    feed = Feed(base_seq=0, buffer=5)
    slow, fast = feed.subscribe(None), feed.subscribe(None)
    started = time.perf_counter()
    for i in range(1, 200):
        feed.publish(msg(i))
        fast.receive.receive_nowait()  # the fast one keeps up
    assert time.perf_counter() - started < 1.0
    assert feed.subscribers == 1 and feed.dropped == 1
    kept = []
    while True:  # the slow one reads what it had, then its stream ends...
        try:
            kept.append(slow.receive.receive_nowait())
        except trio.EndOfChannel:
            break
    assert ids(kept) == ["1", "2", "3", "4", "5"]
    # ...and its reconnect resumes right after the last event it got.
    again = feed.subscribe(parse_id("5"))
    assert ids(again.backlog)[:2] == ["6", "7"] and len(again.backlog) == 194

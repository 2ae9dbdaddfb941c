"""Three host processes on one database (SQLite, then PostgreSQL), 300 rooms, lines posted through random
hosts, one host SIGKILLed mid-work (tests/hostproc.py is the host).

It shows: every room the dead host held is taken over soon after its lease runs out; pairing holds; every
acknowledged line is stored exactly once and answered exactly once; a line whose post was cut by the kill is
stored at most once; and no room has a message by an older epoch after one by a newer (fencing).
"""
from __future__ import annotations

import random
import re
import signal
import sqlite3
import time
from collections import Counter

import trio

from orchestrator.store.heal import pairing_problems
from tests.hostproc import Host, ask

ROOMS, HOSTS, LINES, CLIENTS = 300, 3, 900, 24
LEASE = 3.0
TOKEN = re.compile(r"L:[\w-]+")


async def _client(ports: dict[str, int], work: list[tuple[str, str]], acked: dict, cut: set,
                  rng: random.Random, alive: set[str]) -> None:
    streams: dict[str, trio.SocketStream] = {}
    try:
        while work:
            room, token = work.pop()
            host = rng.choice(sorted(alive))
            try:
                if host not in streams:
                    streams[host] = await trio.open_tcp_stream("127.0.0.1", ports[host])
                reply = await ask(streams[host], room, f"please look at {token}")
            except (OSError, ConnectionError, trio.BrokenResourceError):
                cut.add(token)  # the host died with the line in flight: stored at most once
                if (dead := streams.pop(host, None)) is not None:
                    await dead.aclose()
                continue
            assert "error" not in reply, reply
            acked[token] = (room, reply)
    finally:
        for s in streams.values():
            await s.aclose()


async def _moves(store, held: dict[str, int], victim: str, moved_at: list[float]) -> None:
    """Until every room `victim` held is held by a living host with a newer epoch; then the time."""
    with trio.fail_after(60):
        while True:
            now = {x.room: x for x in await store.leases()}
            if all(now[r].epoch > e and now[r].host != victim for r, e in held.items()):
                moved_at.append(time.monotonic())
                return
            await trio.sleep(0.05)


def _epochs(kind: str, db: str) -> dict[str, list[tuple[int, int | None]]]:
    if kind == "postgres":
        import psycopg
        with psycopg.connect(db) as conn:
            rows = conn.execute("SELECT room, seq, epoch FROM messages ORDER BY room, seq").fetchall()
    else:
        conn = sqlite3.connect(db)
        rows = conn.execute("SELECT room, seq, epoch FROM messages ORDER BY room, seq").fetchall()
        conn.close()
    out: dict[str, list[tuple[int, int | None]]] = {}
    for room, seq, epoch in rows:
        out.setdefault(room, []).append((seq, epoch))
    return out


async def test_three_hosts_300_rooms_one_killed(tmp_path, backend):
    rng = random.Random(20261201)
    store = await backend.open()
    try:
        room_ids = [(await store.create_room(f"room{i}", meta={"workspace": str(tmp_path)})).id
                    for i in range(ROOMS)]
        db = backend.target if backend.kind == "postgres" else str(backend.target)
        hosts = {f"h{i}": Host(f"h{i}", db, tmp_path, lease=LEASE) for i in range(HOSTS)}
        try:
            ports = {name: await h.port() for name, h in hosts.items()}
            tokens = [(room_ids[i % ROOMS], f"L:{i % ROOMS}-{i // ROOMS}") for i in range(LINES)]
            rng.shuffle(tokens)
            first, second = tokens[:LINES // 2], tokens[LINES // 2:]
            acked: dict[str, tuple[str, dict]] = {}
            cut: set[str] = set()
            alive = set(hosts)
            victim = "h0"

            started = time.monotonic()
            async with trio.open_nursery() as nursery:
                for c in range(CLIENTS):
                    nursery.start_soon(_client, ports, first, acked, cut, random.Random(c), alive)
                # mid-work: the victim dies while the first half is still being posted
                with trio.fail_after(120):
                    while len(acked) < LINES // 4:
                        await trio.sleep(0.01)
                held_before = {x.room: x.epoch for x in await store.leases() if x.host == victim}
                hosts[victim].proc.send_signal(signal.SIGKILL)
                killed_at = time.monotonic()
                alive.discard(victim)
                moved_at: list[float] = []
                # watched while the clients go on posting, so the time is the move's, not the posting's
                nursery.start_soon(_moves, store, held_before, victim, moved_at)
            hosts[victim].stop()
            async with trio.open_nursery() as nursery:
                for c in range(CLIENTS):
                    nursery.start_soon(_client, ports, second, acked, cut, random.Random(100 + c), alive)
            posting = time.monotonic() - started

            # every room the victim held went to a living host with a newer epoch
            takeover = moved_at[0] - killed_at
            assert held_before, "the victim held no room when it was killed"
            assert takeover < 3 * LEASE, f"rooms moved {takeover:.1f}s after the kill (lease {LEASE}s)"

            # every acknowledged line reaches its room and is answered
            wanted = set(acked)
            with trio.move_on_after(120):
                while True:
                    answered = Counter()
                    stored = Counter()
                    for room in room_ids:
                        for m in await store.read(room):
                            found = TOKEN.findall(m.text)
                            (stored if m.kind == "user" else answered if m.author == "commander" else Counter()
                             ).update(found)
                    if wanted <= set(answered) and not await store.inbox():
                        break
                    await trio.sleep(0.2)
            unanswered = sorted(wanted - set(answered))
            waiting = await store.inbox()
            assert not unanswered and not waiting, (
                f"{len(unanswered)} acknowledged lines unanswered ({len(wanted - set(stored))} not stored), "
                f"{len(waiting)} in the inbox; e.g. {[(t, acked[t]) for t in unanswered[:3]]}, "
                f"leases {[(x.room, x.host, x.epoch) for x in await store.leases() if x.room in {acked[t][0] for t in unanswered[:3]}]}")
        finally:
            for h in hosts.values():
                h.stop()

        for token in acked:
            assert stored[token] == 1, f"{token}: stored {stored[token]} times"
            assert answered[token] == 1, f"{token}: answered {answered[token]} times"
        for token in cut:
            assert stored[token] <= 1 and answered[token] <= stored[token], token
        assert set(stored) <= set(acked) | cut
        for room in room_ids:
            assert pairing_problems(await store.load(room)) == [], room
        for room, rows in _epochs(backend.kind, db).items():
            epochs = [e for _, e in rows]
            assert None not in epochs, f"{room}: a message written without a lease"
            assert epochs == sorted(epochs), f"{room}: an older epoch wrote after a newer one: {rows}"
        moved_rooms = [r for r in held_before]
        print(f"\nhosts ({backend.kind}): {len(acked)} lines acknowledged, {len(cut)} cut by the kill, "
              f"{len(moved_rooms)} rooms moved {takeover:.2f}s after the kill (lease {LEASE}s), "
              f"posting took {posting:.1f}s")
    finally:
        await store.close()


async def test_a_paused_host_cannot_write_to_the_rooms_it_lost(tmp_path, backend):
    """SIGSTOP the owner mid-turn for longer than its lease: another host takes its rooms and answers their
    lines; the owner wakes with its turns still running, learns it lost the rooms (a failed renewal or a
    refused write, whichever comes first) and writes nothing more to them."""
    store = await backend.open()
    try:
        rooms = [(await store.create_room(f"p{i}", meta={"workspace": str(tmp_path)})).id for i in range(20)]
        db = backend.target if backend.kind == "postgres" else str(backend.target)
        # A slow model: the owner is paused while its turns wait for their answers.
        hosts = {n: Host(n, db, tmp_path, lease=LEASE, delay=1.5) for n in ("a", "b")}
        try:
            ports = {n: await h.port() for n, h in hosts.items()}
            async with trio.open_nursery() as nursery:
                work = [(r, f"L:p{i}") for i, r in enumerate(rooms)]
                for c in range(4):
                    nursery.start_soon(_client, {"a": ports["a"]}, work, {}, set(), random.Random(c), {"a"})
            assert {x.host for x in await store.leases()} == {"a"}
            hosts["a"].proc.send_signal(signal.SIGSTOP)
            try:
                with trio.fail_after(60):  # b takes every room (its takeover scan) and answers the lines
                    while {x.host for x in await store.leases()} != {"b"}:
                        await trio.sleep(0.05)
            finally:
                hosts["a"].proc.send_signal(signal.SIGCONT)
            await trio.sleep(2.5)  # a's turns finish their "thinking" and try to write
            answered: Counter[str] = Counter()
            for room in rooms:
                for m in await store.read(room):
                    if m.author == "commander":
                        answered.update(TOKEN.findall(m.text))
            assert sorted(answered) == sorted(f"L:p{i}" for i in range(20))
            assert set(answered.values()) == {1}
        finally:
            for h in hosts.values():
                h.stop()
        for room, rows in _epochs(backend.kind, db).items():
            epochs = [e for _, e in rows]
            assert epochs == sorted(epochs), f"{room}: an older epoch wrote after a newer one: {rows}"
        log = (tmp_path / "a.log").read_text()  # a learnt it lost the rooms: a refused write or a failed renewal
        assert "Fenced" in log or "lease lost" in log, log[-2000:]
    finally:
        await store.close()

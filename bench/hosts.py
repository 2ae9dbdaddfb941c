"""Rooms spread over host processes (issue 20): lines per second and the p95 time to acknowledge a line for 1,
2 and 4 host processes on one SQLite file and on one PostgreSQL database, and how long a room takes to move
once its host dies (SIGKILL), beyond the lease itself.

Each host is tests/hostproc.py (LeasedRooms, a commander on an echo model that answers after `--delay`).
Clients post lines through random hosts over loopback; a line is acknowledged once it is stored (appended by
the owner, or in the inbox for the owner). Every room first gets one untimed line (it opens on whichever host
takes it); then the timed lines run, and the run ends when every line is answered.

    .venv/bin/python bench/hosts.py                      # sqlite and postgres (a throwaway cluster), 1 2 4
    .venv/bin/python bench/hosts.py --stores sqlite --hosts 1,2 --lines 1000
    .venv/bin/python bench/hosts.py --hosts "" --serve 1,2  # `orchestrator serve --workers 1` and `2` only

`--serve` runs the real `orchestrator serve --workers N` on a scripted team (scenarios/flagship.yaml, each
room playing the script's first exchange: the commander hands off, the tutor answers): rooms are created
through its port, then each gets the first line, posted over a new connection (so any worker may take it).
"""
from __future__ import annotations

import argparse
import random
import re
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from orchestrator.store.backends import open_store  # noqa: E402
from tests import pgcluster  # noqa: E402
from tests.hostproc import Host, ask  # noqa: E402
from tests.serving import ROOT, start_server  # noqa: E402

TOKEN = re.compile(r"L:[\w-]+")


async def _clients(ports: list[int], work: list[tuple[str, str]], clients: int) -> list[float]:
    took: list[float] = []

    async def one(seed: int) -> None:
        rng = random.Random(seed)
        streams = [await trio.open_tcp_stream("127.0.0.1", p) for p in ports]
        try:
            while work:
                room, token = work.pop()
                start = time.perf_counter()
                reply = await ask(rng.choice(streams), room, f"please look at {token}")
                assert "error" not in reply, reply
                took.append(time.perf_counter() - start)
        finally:
            for s in streams:
                await s.aclose()

    async with trio.open_nursery() as nursery:
        for c in range(clients):
            nursery.start_soon(one, c)
    return took


async def _answered(store, rooms: list[str], wanted: int) -> None:
    while True:
        seen = 0
        for room in rooms:
            seen += sum(len(TOKEN.findall(m.text)) for m in await store.read(room) if m.author == "commander")
        if seen >= wanted:
            return
        await trio.sleep(0.2)


async def throughput(db, folder: Path, hosts: int, rooms: int, lines: int, clients: int, lease: float) -> dict:
    store = await open_store(db)
    procs: list[Host] = []
    try:
        ids = [(await store.create_room(f"b{i}", meta={"workspace": str(folder)})).id for i in range(rooms)]
        procs = [Host(f"h{i}", str(db), folder, lease=lease) for i in range(hosts)]
        ports = [await h.port() for h in procs]
        # Warm-up (not timed): one line per room, so every room is open on some host (spread by who got it
        # first) and the timed lines measure a running system, not room opening.
        await _clients(ports, [(r, f"L:w{i}") for i, r in enumerate(ids)], clients)
        work = [(ids[i % rooms], f"L:{i}") for i in range(lines)]
        random.Random(1).shuffle(work)
        started = time.perf_counter()
        took = await _clients(ports, work, clients)
        acked = time.perf_counter() - started
        with trio.fail_after(600):
            await _answered(store, ids, lines + rooms)
        answered = time.perf_counter() - started
        took.sort()
        return {"hosts": hosts, "lines/s acked": lines / acked, "lines/s answered": lines / answered,
                "p50 ms": 1000 * statistics.median(took), "p95 ms": 1000 * took[int(0.95 * len(took)) - 1]}
    finally:
        for h in procs:
            h.stop()
        await store.close()


async def move(db, folder: Path, rooms: int, lease: float) -> dict:
    """Two hosts; every room gets a line through the first (so it holds them all); kill it; time the moves."""
    store = await open_store(db)
    procs: list[Host] = []
    try:
        ids = [(await store.create_room(f"m{i}", meta={"workspace": str(folder)})).id for i in range(rooms)]
        procs = [Host(f"v{i}", str(db), folder, lease=lease) for i in range(2)]
        ports = [await h.port() for h in procs]
        await _clients(ports[:1], [(r, f"L:m{i}") for i, r in enumerate(ids)], 8)
        held = {x.room: x.epoch for x in await store.leases() if x.host == "v0" and x.room in set(ids)}
        procs[0].proc.send_signal(signal.SIGKILL)
        killed = time.perf_counter()
        moved: dict[str, float] = {}
        with trio.fail_after(120):
            while len(moved) < len(held):
                for x in await store.leases():
                    if x.room in held and x.room not in moved and x.epoch > held[x.room] and x.host == "v1":
                        moved[x.room] = time.perf_counter() - killed
                await trio.sleep(0.01)
        times = sorted(moved.values())
        return {"rooms": len(held), "lease s": lease, "first s": times[0], "median s": statistics.median(times),
                "last s": times[-1]}
    finally:
        for h in procs:
            h.stop()
        await store.close()


async def served(db, folder: Path, workers: int, rooms: int, clients: int) -> dict:
    import httpx

    first, answer = "Can you check app/config.py? The port test fails.", "both names point at one dict"
    server = start_server(folder, "--workers", str(workers), "--scripted", str(ROOT / "scenarios" / "flagship.yaml"),
                          db=db)
    store = await open_store(db)
    limits = httpx.Limits(max_keepalive_connections=0)  # every request a new connection: any worker takes it
    try:
        async with httpx.AsyncClient(limits=limits, timeout=60) as client:
            ids = [(await client.post(f"{server.base}/rooms", json={"name": f"s{i}"}, headers=server.auth)).json()["id"]
                   for i in range(rooms)]
            work, took = list(ids), []

            async def one() -> None:
                while work:
                    room = work.pop()
                    start = time.perf_counter()
                    r = await client.post(f"{server.base}/rooms/{room}/lines", json={"text": first},
                                          headers=server.auth)
                    assert r.status_code == 202, r.text
                    took.append(time.perf_counter() - start)

            started = time.perf_counter()
            async with trio.open_nursery() as nursery:
                for _ in range(clients):
                    nursery.start_soon(one)
            acked = time.perf_counter() - started
            with trio.fail_after(600):
                waiting = set(ids)
                while waiting:
                    waiting = {r for r in waiting if not any(answer in m.text for m in await store.read(r))}
                    await trio.sleep(0.1)
            answered = time.perf_counter() - started
        took.sort()
        return {"workers": workers, "lines/s acked": rooms / acked, "lines/s answered": rooms / answered,
                "p50 ms": 1000 * statistics.median(took), "p95 ms": 1000 * took[int(0.95 * len(took)) - 1]}
    finally:
        await store.close()
        server.stop()


async def main(args: argparse.Namespace) -> None:
    print(f"# bench/hosts.py: {args.rooms} rooms, {args.lines} lines, {args.clients} clients, "
          f"lease {args.lease}s, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    for kind in args.stores.split(","):
        server = pgcluster.start() if kind == "postgres" else None
        try:
            for n in (int(n) for n in args.hosts.split(",") if n):
                with tempfile.TemporaryDirectory(prefix="orch-bench-") as tmp:
                    db = server.fresh(f"bench_{n}") if server else Path(tmp) / "rooms.db"
                    row = await throughput(db, Path(tmp), n, args.rooms, args.lines, args.clients, args.lease)
                    print(f"| {kind} | {row['hosts']} | {row['lines/s acked']:.0f} | {row['lines/s answered']:.0f} "
                          f"| {row['p50 ms']:.1f} | {row['p95 ms']:.1f} |", flush=True)
            if args.hosts:
                with tempfile.TemporaryDirectory(prefix="orch-bench-") as tmp:
                    db = server.fresh("bench_move") if server else Path(tmp) / "rooms.db"
                    row = await move(db, Path(tmp), args.rooms, args.lease)
                    print(f"| {kind} | move after SIGKILL | {row['rooms']} rooms | lease {row['lease s']}s | first "
                          f"{row['first s']:.2f}s | median {row['median s']:.2f}s | last {row['last s']:.2f}s |",
                          flush=True)
            for n in (int(n) for n in args.serve.split(",") if n):
                with tempfile.TemporaryDirectory(prefix="orch-bench-") as tmp:
                    db = server.fresh(f"bench_serve_{n}") if server else Path(tmp) / "rooms.db"
                    row = await served(db, Path(tmp), n, args.rooms, args.clients)
                    print(f"| {kind} | serve --workers {row['workers']} | {row['lines/s acked']:.0f} | "
                          f"{row['lines/s answered']:.0f} | {row['p50 ms']:.1f} | {row['p95 ms']:.1f} |", flush=True)
        finally:
            if server:
                server.stop()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--stores", default="sqlite,postgres")
    p.add_argument("--hosts", default="1,2,4")
    p.add_argument("--rooms", type=int, default=200)
    p.add_argument("--lines", type=int, default=2000)
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--lease", type=float, default=3.0)
    p.add_argument("--serve", default="", help="also `orchestrator serve --workers N` for these N, e.g. 1,2")
    trio.run(main, p.parse_args())

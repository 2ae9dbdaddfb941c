"""Many rooms in one process: N rooms on one `RoomHost` over one SQLite file, each a commander and workers
`a`, `b`; a user line is one dispatch: commander -> dispatch_to(a) -> a answers -> commander answers
(three model calls, six messages). The model answers after a fixed latency, so the ideal line is
3 x latency; everything above it is ours (or the machine's).

Modes: `busy` (each room's user posts the next line as soon as the room is idle) and `pause` (the user
waits `--pause` s between lines, starting at a random offset). Each (rooms, latency, mode) runs in a fresh
subprocess, so CPU and RSS are its own. Reported: lines/s, line latency p50/p95/p99 against the ideal,
CPU ms per line (all threads), RSS per open room (one line of history each), RSS left per parked room
(closed after idle, reopened from the store on the next line), and the time to create and to reopen a room.

    .venv/bin/python bench/rooms.py                                  # the issue's grid (~10 min)
    .venv/bin/python bench/rooms.py --rooms 100 --latency 0 --seconds 5   # CPU-bound throughput
    .venv/bin/python bench/rooms.py --rooms 200 --latency 0.05 --profile  # cProfile of one run
    .venv/bin/python bench/rooms.py --rooms 1000 --latency 0.05 --mode busy --heap  # Python heap per room
    (with BENCH_HEAP_TOP=1, --heap also prints what is still allocated once the rooms are closed)
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import itertools
import json
import os
import pstats
import random
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from orchestrator.core import startup  # noqa: E402

startup.tune()  # as the command line does: lean imports, the collector policy of a host

from orchestrator.core.types import (  # noqa: E402
    Request, StreamEnd, TextDelta, ToolCallDone, ToolResultBlock, Usage,
)
from orchestrator.room.host import RoomHost  # noqa: E402
from orchestrator.room.room import COMMANDER  # noqa: E402
from orchestrator.store.db import Store  # noqa: E402
from orchestrator.team.schema import AgentDef, Team  # noqa: E402

GRID = [(100, 0.0, "busy")] + [(n, lat, mode) for lat in (0.05, 1.0) for mode in ("busy", "pause")
                               for n in (10, 100, 1_000, 2_000)]  # first: CPU-bound throughput
CALLS = itertools.count()


class RelayModel:
    """The commander dispatches each user line to `a` and answers once the report is back; workers
    answer at once. Every call waits `latency` seconds first, as a remote model would."""

    id = "relay"

    def __init__(self, latency: float):
        self.latency = latency

    async def validate_auth(self) -> None:
        return None

    async def stream(self, request: Request):
        await trio.sleep(self.latency)
        last = request.messages[-1].blocks if request.messages else []
        if request.agent == COMMANDER and not any(isinstance(b, ToolResultBlock) for b in last):
            yield ToolCallDone(f"call_{next(CALLS)}", "dispatch_to",
                               {"agent": "a", "task": "Draft the next part in three short paragraphs."})
            yield StreamEnd("tool_use", Usage(input=0, output=20))
            return
        yield TextDelta("Done: the part is drafted, " if request.agent != COMMANDER else "The part is ready, ")
        yield TextDelta("three short paragraphs, checked once.")
        yield StreamEnd("end_turn", Usage(input=0, output=12))


def team() -> Team:
    return Team(commander=AgentDef(name=COMMANDER, model="relay"),
                agents=[AgentDef(name=w, description=f"worker {w}", model="relay") for w in ("a", "b")])


def rss_kb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1024


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class _collector_pauses:  # noqa: N801 - used as a function
    """How long each pass of the cyclic garbage collector stopped the process, from now on."""

    def __init__(self):
        self.seconds: list[float] = []
        self._start = 0.0
        gc.callbacks.append(self.note)

    def note(self, phase: str, _info: dict) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.seconds.append(time.perf_counter() - self._start)


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))] if s else float("nan")


async def run(n: int, latency: float, mode: str, seconds: float, pause: float,
              prof: cProfile.Profile | None = None, heap: bool = False) -> dict:
    model = RelayModel(latency)
    out: dict = {"rooms": n, "latency": latency, "mode": mode}
    with tempfile.TemporaryDirectory(prefix="bench-rooms-") as tmp:
        store = await Store.open(Path(tmp) / "rooms.db")
        try:
            closed: list[str] = []
            async with RoomHost.open(store, lambda _m: (model, "relay"), team=team(), idle_close=3600,
                                     on_close=lambda room: closed.append(room.id)) as host:
                await host.ask(None, "warm up", workspace=Path(tmp))  # templates, schemas, first imports
                gc.collect()
                rss0 = rss_kb()
                if heap:
                    tracemalloc.start()
                ids: list[str] = []
                t0 = time.perf_counter()
                for i in range(n):
                    async with host.room(None, name=f"r{i}", workspace=Path(tmp)) as room:
                        ids.append(room.id)
                out["create_ms"] = (time.perf_counter() - t0) / n * 1e3
                async with trio.open_nursery() as nursery:  # one line each, so every room has history
                    for rid in ids:
                        nursery.start_soon(host.ask, rid, "The first line.")
                gc.collect()
                out["rss_open_kb"] = (rss_kb() - rss0) / n
                if heap:
                    out["heap_open_kb"] = tracemalloc.get_traced_memory()[0] / 1024 / n

                latencies: list[float] = []
                stop_at = trio.current_time() + seconds
                pauses = _collector_pauses()
                c0, w0 = cpu_s(), time.perf_counter()
                if prof:
                    prof.enable()

                async def user(rid: str) -> None:
                    rng = random.Random(rid)
                    if mode == "pause":
                        await trio.sleep(rng.uniform(0, pause))
                    while trio.current_time() < stop_at:
                        t = time.perf_counter()
                        await host.ask(rid, "Next part, please.")
                        latencies.append(time.perf_counter() - t)
                        if mode == "pause":
                            await trio.sleep(pause)

                async with trio.open_nursery() as nursery:
                    for rid in ids:
                        nursery.start_soon(user, rid)
                if prof:
                    prof.disable()
                wall, cpu = time.perf_counter() - w0, cpu_s() - c0
                gc.callbacks.remove(pauses.note)
                out |= {"lines": len(latencies), "wall": wall, "lines_s": len(latencies) / wall,
                        "cpu_ms_line": cpu / max(1, len(latencies)) * 1e3, "cpu_share": cpu / wall,
                        "p50": pct(latencies, 50), "p95": pct(latencies, 95), "p99": pct(latencies, 99),
                        "ideal": 3 * latency, "gc_max_ms": max(pauses.seconds, default=0.0) * 1e3}

                host.idle_close = 0  # park every room: closed, history only in the store
                for room in list(host.rooms.values()):
                    async with host.room(room.id):
                        pass
                while len(closed) < n + 1:  # every room (and the warm-up one) closed, not just closing
                    await trio.sleep(0.01)
                gc.collect()
                out["rss_parked_kb"] = (rss_kb() - rss0) / n
                if heap:
                    out["heap_parked_kb"] = tracemalloc.get_traced_memory()[0] / 1024 / n
                    if os.environ.get("BENCH_HEAP_TOP"):
                        for stat in tracemalloc.take_snapshot().statistics("traceback")[:8]:
                            print(stat, *stat.traceback.format()[-6:], sep="\n  ", file=sys.stderr)
                    tracemalloc.stop()
                host.idle_close = 3600
                sample = ids[:min(n, 200)]
                t0 = time.perf_counter()
                for rid in sample:
                    async with host.room(rid):
                        pass
                out["reopen_ms"] = (time.perf_counter() - t0) / len(sample) * 1e3
        finally:
            await store.close()
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def child(args) -> dict:
    n, latency, mode = int(args.child[0]), float(args.child[1]), args.child[2]
    return trio.run(run, n, latency, mode, args.seconds, args.pause)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rooms", help="comma-separated room counts (default: the issue's grid)")
    ap.add_argument("--latency", help="comma-separated model latencies in s")
    ap.add_argument("--mode", help="busy, pause or both (comma-separated)")
    ap.add_argument("--seconds", type=float, default=20.0, help="measured time per run (after set-up)")
    ap.add_argument("--pause", type=float, default=10.0, help="seconds a user waits between lines (pause mode)")
    ap.add_argument("--profile", action="store_true", help="cProfile the first run, in this process")
    ap.add_argument("--sort", default="tottime", help="the profile's order: tottime or cumulative")
    ap.add_argument("--heap", action="store_true",
                    help="one run in this process under tracemalloc: Python heap per open and per parked room")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args)))
        return
    grid = GRID
    if args.rooms or args.latency or args.mode:
        grid = [(n, lat, mode) for lat in map(float, (args.latency or "0.05,1").split(","))
                for mode in (args.mode or "busy,pause").split(",")
                for n in map(int, (args.rooms or "10,100,1000,2000").split(","))]
    if args.heap:
        n, lat, mode = grid[0]
        print(json.dumps(trio.run(run, n, lat, mode, args.seconds, args.pause, None, True)))
        return
    if args.profile:
        prof = cProfile.Profile(time.thread_time)  # CPU of the loop thread: the machine may be shared
        n, lat, mode = grid[0]
        print(json.dumps(trio.run(run, n, lat, mode, args.seconds, args.pause, prof)))
        pstats.Stats(prof).sort_stats(args.sort).print_stats(45)
        return
    print(f"load average before: {os.getloadavg()[0]:.1f}; {args.seconds:g} s measured per run")
    print()
    print("| rooms | latency s | mode | lines | lines/s | p50 ms | p95 ms | p99 ms | ideal ms | p95/ideal "
          "| CPU ms/line | CPU share | longest GC pass ms | KB per open room | KB per parked room | create ms | reopen ms "
          "| peak RSS MB |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, lat, mode in grid:
        cmd = [sys.executable, __file__, "--child", str(n), str(lat), mode,
               "--seconds", str(args.seconds), "--pause", str(args.pause)]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode:
            print(f"| {n} | {lat:g} | {mode} | failed: {p.stderr.strip().splitlines()[-1][:200]} |", flush=True)
            continue
        r = json.loads(p.stdout.strip().splitlines()[-1])
        ratio = r["p95"] / r["ideal"] if r["ideal"] else float("nan")
        print(f"| {n:,} | {lat:g} | {mode} | {r['lines']:,} | {r['lines_s']:.0f} | {r['p50'] * 1e3:.0f} | "
              f"{r['p95'] * 1e3:.0f} | {r['p99'] * 1e3:.0f} | {r['ideal'] * 1e3:.0f} | {ratio:.2f} | "
              f"{r['cpu_ms_line']:.2f} | {r['cpu_share']:.2f} | {r['gc_max_ms']:.0f} | {r['rss_open_kb']:.1f} | {r['rss_parked_kb']:.1f} | "
              f"{r['create_ms']:.2f} | {r['reopen_ms']:.2f} | {r['peak_rss_mb']:.0f} |", flush=True)
    print(f"\nload average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

"""Room costs: parallel fan-out, messages per second through bus and store, and a long 3-agent room.

Everything runs through a real `Room` (store, partitions, bus, commander tools, ledger) on a
file-backed SQLite database in a temporary directory; only the model is scripted
(`ScriptedProvider(record=False)`, one instance per room, as the scenario runner does).

1. fan-out: one commander response with N `dispatch_to` calls (N = 2 .. 32). Every worker's reply
   waits `--delay` s (0.2) except the last one declared, which waits `--slow` s (0.25) and so is
   the slowest (trio does not start tasks in declared order, so where it queues varies). Wall time
   runs from `room.post` to `room.idle()`; the ideal is the slowest worker's delay.
2. throughput: committed `message` events per second on the room's real path (user line + the
   commander's short scripted reply), line by line and in a burst, against `room.notice` (bus and
   store, no agent), raw `Store.append` and `Store.append_many`.
3. long room: commander + 2 workers; per 3 user lines the commander dispatches to one worker,
   then to the other, then answers directly. Each size runs in a fresh subprocess (so max RSS is
   its own): once for time (ms per turn, post -> idle, over the last window of turns) and max RSS,
   once under tracemalloc for the Python heap peak.

    .venv/bin/python bench/room.py                  # full run (~45 s)
    .venv/bin/python bench/room.py --quick          # smoke run (~5 s)
    .venv/bin/python bench/room.py --only long      # one section: fanout | throughput | long
    .venv/bin/python bench/room.py --profile 1000   # cProfile of a 1,000-turn 3-agent room
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import pstats
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from contextlib import asynccontextmanager, redirect_stdout
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine import machine, pct, text_of  # noqa: E402  (bench/engine.py: prose, percentiles, machine line)

from orchestrator.core import startup  # noqa: E402

startup.tune()  # as the command line does: lean imports, the collector policy of a host

from orchestrator.core.events import ErrorEvent, Event, MessageEvent, TaskEvent, TurnStart  # noqa: E402
from orchestrator.core.types import Draft, TextBlock  # noqa: E402
from orchestrator.providers.scripted import Reply, ScriptedProvider  # noqa: E402
from orchestrator.room.room import COMMANDER, USER, Room  # noqa: E402
from orchestrator.team.schema import AgentDef, Team  # noqa: E402
from orchestrator.store.db import Store  # noqa: E402

FANOUT = (2, 4, 8, 16, 32)
LONG = (50, 200, 1_000)
WORKERS = ("coder", "reviewer")
TARGET_MB = 60  # at 1,000 turns (the target), with a flat per-turn cost


# --- a room on a scripted model ---------------------------------------------------------------

def team(workers: list[str]) -> Team:
    return Team(commander=AgentDef(name=COMMANDER, model="scripted"),
                agents=[AgentDef(name=w, description=f"does part of the work ({w})", model="scripted")
                        for w in workers])


class Tally:
    """The room's subscriber: counts committed messages, keeps task timestamps, fails on errors."""

    def __init__(self) -> None:
        self.messages = 0
        self.last: MessageEvent | None = None
        self.started: dict[str, float] = {}  # agent -> wall clock of its task's `running` event
        self.calling: dict[str, float] = {}  # agent -> wall clock of its first `turn` event (its model is called)
        self.reports: list[float] = []  # wall clock of each worker's text message
        self.errors: list[str] = []

    def __call__(self, ev: Event) -> None:
        if isinstance(ev, MessageEvent):
            self.messages += 1
            self.last = ev
            if ev.author not in (COMMANDER, USER, "room") and ev.kind == "text":
                self.reports.append(time.time())
        elif isinstance(ev, TaskEvent) and ev.status == "running":
            self.started[ev.agent] = time.time()
        elif isinstance(ev, TurnStart) and ev.agent not in (COMMANDER, USER):
            self.calling.setdefault(ev.agent, time.time())
        elif isinstance(ev, ErrorEvent):
            self.errors.append(ev.message)


@asynccontextmanager
async def scripted_room(tmp: Path, name: str, workers: list[str], script: dict[str, list[Reply]]):
    """A fresh store file and room; yields (room, provider, tally) and checks the script was played."""
    provider = ScriptedProvider(script, record=False)
    tally = Tally()
    store = await Store.open(tmp / f"{name}.db")
    try:
        async with Room.create(store, team(workers), lambda _model: (provider, "scripted"), name=name,
                               workspace=tmp, on_event=tally) as room:
            yield room, provider, tally
        assert not tally.errors, tally.errors
    finally:
        await store.close()


# --- 1. fan-out ---------------------------------------------------------------------------------

def fanout_script(n: int, delay: float, slow: float) -> tuple[list[str], dict[str, list[Reply]]]:
    workers = [f"w{i}" for i in range(1, n + 1)]
    calls = [("dispatch_to", {"agent": w, "task": f"Do part {i} of the job."}) for i, w in enumerate(workers, 1)]
    script = {COMMANDER: [Reply(say=f"Splitting the job in {n}.", calls=calls), Reply(say="All parts are done.")]}
    for i, w in enumerate(workers, 1):
        script[w] = [Reply(say=f"Part {i} is done.", delay=slow if i == n else delay)]
    return workers, script


async def fanout_once(tmp: Path, n: int, delay: float, slow: float) -> dict:
    workers, script = fanout_script(n, delay, slow)
    async with scripted_room(tmp, f"fanout{n}", workers, script) as (room, provider, tally):
        gc.collect()
        t0 = time.time()
        p0 = time.perf_counter()
        await room.post("Split the job and run every part at once.")
        await room.idle()
        wall = time.perf_counter() - p0
        assert not provider.remaining(), provider.remaining()
        assert tally.last is not None and tally.last.author == COMMANDER and tally.last.kind == "text"
        assert len(tally.started) == n and len(tally.reports) == n
        done = [t for t in room.ledger.tasks.values() if t.status == "done"]
        assert len(done) == n, room.ledger.tasks
    starts = tally.started.values()
    return {"wall": wall, "first_start": min(starts) - t0, "last_start": max(starts) - t0,
            "slow_start": tally.started[workers[-1]] - t0, "last_call": max(tally.calling.values()) - t0,
            "last_report": max(tally.reports) - t0, "messages": tally.messages}


async def fanout(args, tmp: Path) -> None:
    await fanout_once(tmp, 2, 0.01, 0.01)  # warm up: templates, schemas, the thread pool
    rows = []
    for n in args.fanout:
        runs = sorted([await fanout_once(tmp, n, args.delay, args.slow) for _ in range(args.fanout_repeat)],
                      key=lambda r: r["wall"])
        rows.append((n, runs[(len(runs) - 1) // 2], runs[0]["wall"], runs[-1]["wall"]))
    ideal = args.slow * 1e3
    print(f"### Fan-out: one response with N dispatch_to calls; workers {args.delay * 1e3:g} ms, "
          f"the last declared {args.slow * 1e3:g} ms")
    print()
    print("| workers | messages | wall ms (median) | wall ms (min–max) | ideal ms | overhead ms | overhead % "
          "| first / last worker started at ms | slowest started at ms | last worker's model called at ms "
          "| last report → idle ms |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, r, lo, hi in rows:
        wall = r["wall"] * 1e3
        print(f"| {n} | {r['messages']} | {wall:.1f} | {lo * 1e3:.1f}–{hi * 1e3:.1f} | {ideal:.0f} | "
              f"{wall - ideal:.1f} | {(wall - ideal) / ideal * 100:.1f} % | "
              f"{r['first_start'] * 1e3:.1f} / {r['last_start'] * 1e3:.1f} | {r['slow_start'] * 1e3:.1f} | "
              f"{r['last_call'] * 1e3:.1f} | "
              f"{(r['wall'] - r['last_report']) * 1e3:.1f} |")
    print()
    print(f"{args.fanout_repeat} round(s) per size; the columns after min–max are from the median round. "
          f"\"started at\" is a task's `running` ledger event, \"model called\" its worker's `turn` event (the "
          f"request is sent right after), both from "
          f"`room.post`; the slowest worker is the last declared, but trio picks the start order, so its "
          f"start (and the wall time) varies between rounds.")
    print()


# --- 2. throughput ---------------------------------------------------------------------------

def line(i: int) -> str:
    return f"Line {i}: please note this down."


async def through_store(tmp: Path, n: int, batch: int = 1) -> tuple[int, float]:
    store = await Store.open(tmp / f"raw{batch}.db")
    try:
        rec = await store.create_room("raw")
        drafts = [Draft(author=USER, kind="user", blocks=[TextBlock(line(i))], visible_to=[USER, COMMANDER])
                  for i in range(n)]
        gc.collect()
        t0 = time.perf_counter()
        if batch == 1:
            for d in drafts:
                await store.append(rec.id, d)
        else:
            for i in range(0, n, batch):
                await store.append_many(rec.id, drafts[i:i + batch])
        return n, time.perf_counter() - t0
    finally:
        await store.close()


async def through_notice(tmp: Path, n: int) -> tuple[int, float]:
    async with scripted_room(tmp, "notice", [], {}) as (room, _provider, tally):
        gc.collect()
        before = tally.messages
        t0 = time.perf_counter()
        for i in range(n):
            await room.notice(line(i), [USER, COMMANDER])
        elapsed = time.perf_counter() - t0
        return tally.messages - before, elapsed


async def through_room(tmp: Path, n: int, burst: bool) -> tuple[int, float]:
    script = {COMMANDER: [Reply(say=f"Noted ({i}).") for i in range(n)]}
    async with scripted_room(tmp, "burst" if burst else "lines", [], script) as (room, provider, tally):
        gc.collect()
        before = tally.messages
        t0 = time.perf_counter()
        for i in range(n):
            await room.post(line(i))
            if not burst:
                await room.idle()
        await room.idle()
        elapsed = time.perf_counter() - t0
        if not burst:  # in a burst the commander answers several lines in one reply (G10)
            assert not provider.remaining()
        return tally.messages - before, elapsed


async def throughput(args, tmp: Path) -> None:
    n = args.lines
    await through_room(tmp, 20, False)  # warm up
    cases = [
        ("room: post + idle per line (user line, commander reply)", lambda: through_room(tmp, n, False)),
        ("room: burst of posts, then idle (commander answers what it has read)", lambda: through_room(tmp, n, True)),
        ("bus + store: `room.notice` (no agent)", lambda: through_notice(tmp, n)),
        ("store: `Store.append`, one per transaction", lambda: through_store(tmp, n)),
        ("store: `Store.append_many`, 100 per transaction", lambda: through_store(tmp, n, 100)),
    ]
    print(f"### Throughput: committed messages per second ({n:,} lines per case, file-backed SQLite, WAL)")
    print()
    print("| path | messages | seconds | messages/s | µs/message |")
    print("|---|---:|---:|---:|---:|")
    for label, fn in cases:
        best: tuple[int, float] | None = None
        for _ in range(args.repeat):
            got = await fn()
            if best is None or got[0] / got[1] > best[0] / best[1]:
                best = got
        msgs, secs = best
        print(f"| {label} | {msgs:,} | {secs:.2f} | {msgs / secs:,.0f} | {secs / msgs * 1e6:.0f} |")
    print()
    print(f"Best of {args.repeat} round(s). Messages are `message` events seen by a subscriber "
          f"(the store rows for the store cases).")
    print()


# --- 3. the long 3-agent room ------------------------------------------------------------------

def long_script(turns: int, seed: int = 5) -> tuple[list[str], dict[str, list[Reply]]]:
    """User lines and replies: per 3 lines a dispatch to each worker, then a direct answer."""
    rng = random.Random(seed)
    lines: list[str] = []
    script: dict[str, list[Reply]] = {COMMANDER: [], **{w: [] for w in WORKERS}}
    for t in range(turns):
        lines.append(text_of(rng, 60, 160))
        kind = t % 3
        if kind == 2:
            script[COMMANDER].append(Reply(say=text_of(rng, 100, 250)))
            continue
        w = WORKERS[kind]
        script[COMMANDER].append(Reply(say=text_of(rng, 30, 80),
                                       calls=[("dispatch_to", {"agent": w, "task": text_of(rng, 60, 140)})]))
        script[w].append(Reply(say=text_of(rng, 200, 400)))
        script[COMMANDER].append(Reply(say=text_of(rng, 100, 250)))
    return lines, script


def max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def hwm_mb() -> float:
    """VmHWM, the peak RSS of this process image alone. Linux carries the parent's RSS at spawn time
    into a child's ru_maxrss, so the two only agree if the parent was smaller; that is checked."""
    try:
        for row in open("/proc/self/status"):
            if row.startswith("VmHWM:"):
                return int(row.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


async def long_room(tmp: Path, turns: int, prof: cProfile.Profile | None = None) -> dict:
    lines, script = long_script(turns)
    samples: list[int] = []
    clock = time.perf_counter_ns
    async with scripted_room(tmp, f"long{turns}", list(WORKERS), script) as (room, provider, tally):
        for text in lines:
            if prof:
                prof.enable()
            t0 = clock()
            await room.post(text)
            await room.idle()
            samples.append(clock() - t0)
            if prof:
                prof.disable()
        assert not provider.remaining(), provider.remaining()
        view = len(room.members[COMMANDER].partition.view)
        tasks = len(room.ledger.tasks)
    return {"samples": samples, "messages": tally.messages, "view": view, "tasks": tasks}


async def long_child(turns: int, mode: str, window: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-room-") as tmp:
        await long_room(Path(tmp), 9)  # warm up: templates, schemas, thread pool (in the baseline)
        gc.collect()
        base = max_rss_mb()
        if mode == "trace":
            tracemalloc.start()
            tracemalloc.reset_peak()
        out = await long_room(Path(tmp), turns)
        if mode == "trace":
            current, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            return {"trace_peak": peak / 2**20, "trace_end": current / 2**20}
        first = turns - window  # turn t dispatches unless t % 3 == 2 (see long_script)
        last = out["samples"][first:]
        dispatch = [s for t, s in enumerate(last, first) if t % 3 != 2]
        direct = [s for t, s in enumerate(last, first) if t % 3 == 2] or [0]
        return {"base_rss": base, "max_rss": max_rss_mb(), "hwm": hwm_mb(), "mean": statistics.fmean(last) / 1e6,
                "dispatch": statistics.median(dispatch) / 1e6, "direct": statistics.median(direct) / 1e6,
                "p95": pct(last, 95), "max": max(last) / 1e6,
                "window": len(last), "messages": out["messages"], "view": out["view"], "tasks": out["tasks"],
                "total": sum(out["samples"]) / 1e9}


def run_child(turns: int, mode: str, window: int) -> dict:
    cmd = [sys.executable, __file__, "--child", str(turns), "--child-mode", mode, "--window", str(window)]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def long(args) -> None:
    rows = []
    for turns in args.sizes:
        window = min(args.window, turns)
        timed = [run_child(turns, "time", window) for _ in range(args.long_repeat)]
        best = min(timed, key=lambda r: r["mean"])
        best["trace"] = run_child(turns, "trace", window)
        best["max_rss_all"] = max(r["max_rss"] for r in timed)
        best["skew"] = max(abs(r["max_rss"] - r["hwm"]) for r in timed)
        rows.append((turns, best))
    print("### Long room: commander + 2 workers; per 3 user lines 2 dispatches (alternating) and 1 direct answer")
    print()
    print("| turns | timed window | mean ms/turn | median ms, dispatch turn | median ms, direct turn | p95 ms | max ms "
          "| mean vs first size | messages | commander view | tracemalloc peak MB | max RSS MB (baseline) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    first = rows[0][1]["mean"]
    for turns, r in rows:
        growth = "—" if r["mean"] is first else f"×{r['mean'] / first:.2f}"
        print(f"| {turns:,} | {turns - r['window'] + 1:,}-{turns:,} | {r['mean']:.2f} | {r['dispatch']:.2f} | "
              f"{r['direct']:.2f} | {r['p95']:.2f} | {r['max']:.1f} | {growth} | {r['messages']:,} | {r['view']:,} | "
              f"{r['trace']['trace_peak']:.1f} | {r['max_rss_all']:.1f} ({r['base_rss']:.1f}) |")
    print()
    print(f"Each size in fresh subprocesses: {args.long_repeat} timed run(s), the lowest window mean kept, then one "
          f"run under tracemalloc (peak since the room opened; imports and a 9-turn warm-up room excluded). "
          f"Max RSS is the whole process (`ru_maxrss`, highest of the timed runs); the baseline in brackets is "
          f"after imports and the warm-up. It agrees with VmHWM (/proc/self/status) within "
          f"{max(r['skew'] for _, r in rows):.1f} MB.")
    print()
    turns, last = rows[-1]
    flat = last["mean"] / first
    verdict_t = "flat" if flat < 1.25 else "NOT flat"
    verdict_m = "meets" if last["max_rss_all"] < TARGET_MB else "MISSES"
    print(f"Target at {turns:,} turns: flat per-turn cost: mean ×{flat:.2f} vs {rows[0][0]} turns ({verdict_t}); "
          f"< {TARGET_MB} MB: max RSS {last['max_rss_all']:.1f} MB, tracemalloc peak "
          f"{last['trace']['trace_peak']:.1f} MB ({verdict_m}).")
    print()


def profile(args) -> None:
    turns = args.profile

    async def go() -> None:
        with tempfile.TemporaryDirectory(prefix="bench-room-") as tmp:
            await long_room(Path(tmp), 9)
            await long_room(Path(tmp), turns, prof)

    prof = cProfile.Profile()
    trio.run(go)
    buf = io.StringIO()
    st = pstats.Stats(prof, stream=buf)
    st.sort_stats("tottime").print_stats(args.top)
    st.sort_stats("cumulative").print_stats(args.top)
    print(f"# cProfile: {turns}-turn 3-agent room, post -> idle (main thread only: store work runs in a "
          f"worker thread and shows as waiting)")
    print(buf.getvalue())


# --- entry ------------------------------------------------------------------------------------

async def main_async(args) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-room-") as tmp:
        if args.only in ("all", "fanout"):
            await fanout(args, Path(tmp))
        if args.only in ("all", "throughput"):
            await throughput(args, Path(tmp))


def main() -> None:
    ints = lambda s: [int(x) for x in s.split(",")]  # noqa: E731
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 1 round each, 300 lines, long room at 50 and 200 turns")
    ap.add_argument("--only", choices=("all", "fanout", "throughput", "long"), default="all")
    ap.add_argument("--fanout", type=ints, default=list(FANOUT), help="worker counts (default 2,4,8,16,32)")
    ap.add_argument("--delay", type=float, default=0.2, help="every worker's reply delay, s (default 0.2)")
    ap.add_argument("--slow", type=float, default=0.25, help="the slowest (last) worker's delay, s (default 0.25)")
    ap.add_argument("--lines", type=int, default=0, help="lines per throughput case (default 2,000; 300 quick)")
    ap.add_argument("--sizes", type=ints, default=None, help="long-room turn counts (default 50,200,1000)")
    ap.add_argument("--window", type=int, default=50, help="last turns the long-room times cover (default 50)")
    ap.add_argument("--repeat", type=int, default=0, help="rounds per case, best kept (default 3; 1 quick)")
    ap.add_argument("--fanout-repeat", type=int, default=0,
                    help="rounds per fan-out size, the median reported (default 7; 1 quick)")
    ap.add_argument("--long-repeat", type=int, default=0,
                    help="timed runs per long-room size, best kept (default 5; 1 quick)")
    ap.add_argument("--profile", type=int, metavar="TURNS", help="cProfile a long room of TURNS turns")
    ap.add_argument("--top", type=int, default=30, help="rows of profile output")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--child-mode", choices=("time", "trace"), default="time", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(trio.run(long_child, args.child, args.child_mode, args.window)))
        return
    if args.profile:
        profile(args)
        return
    args.repeat = args.repeat or (1 if args.quick else 3)
    args.long_repeat = args.long_repeat or (1 if args.quick else 5)
    args.fanout_repeat = args.fanout_repeat or (1 if args.quick else 7)
    args.lines = args.lines or (300 if args.quick else 2_000)
    args.sizes = args.sizes or ([50, 200] if args.quick else list(LONG))
    long_out = io.StringIO()
    if args.only in ("all", "long"):
        # First, while this process is small: a child's ru_maxrss starts at its parent's RSS (see hwm_mb).
        with redirect_stdout(long_out):
            long(args)
    print(f"<!-- {machine()}; {time.strftime('%Y-%m-%d')} -->")
    print()
    if args.only != "long":
        trio.run(main_async, args)
    print(long_out.getvalue(), end="")


if __name__ == "__main__":
    main()

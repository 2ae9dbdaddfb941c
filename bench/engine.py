"""Engine cost per turn: `run()` over a partition of 10 .. 10,000 messages, scripted model at zero latency.

Each measured turn commits one user line (in memory: the commit builds a Message and appends it to
the partition, no store) and then awaits `run(agent, partition, commit)`; the scripted model answers
with ~100 characters. The "tool" variant makes one call to a trivial in-memory read-only tool first,
so a turn is two model calls, a tool_call, a tool_result and the final text.

History grows by 2 messages per measured turn (4 in the tool variant); the table reports the size at
the start and at the end of the measured turns. `--window K` instead restarts from the starting
history every K turns (the rebuild is not timed), so every sample sees roughly the starting size.
Times are wall-clock per turn (time.perf_counter_ns), GC left on, as the engine runs for real; each
size runs `--repeat` rounds and the round with the lowest median is reported (noisy neighbours).

    .venv/bin/python bench/engine.py                  # full run (~10 s)
    .venv/bin/python bench/engine.py --window 100     # same, history held near the starting size
    .venv/bin/python bench/engine.py --quick          # smoke run (~1 s)
    .venv/bin/python bench/engine.py --profile 1000   # cProfile of 2,000 turns from 1,000 messages
    .venv/bin/python bench/engine.py --profile 1000 --variant tool
    .venv/bin/python bench/engine.py --tracing on     # spans on: each ended span written to a JSONL file

Tracing is off unless `--tracing on|both`; "on" adds a JSONL sink (a temporary file), as `--trace` does.
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import io
import itertools
import platform
import pstats
import random
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import msgspec
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from orchestrator.core import startup  # noqa: E402

startup.tune()  # as the command line does: lean imports, the collector policy of a host

from orchestrator.core.types import (  # noqa: E402
    Draft, Message, TextBlock, ToolCallBlock, ToolResultBlock,
)
from orchestrator.engine.partition import Partition  # noqa: E402
from orchestrator.engine.runner import Agent, run  # noqa: E402
from orchestrator.providers.scripted import Reply, ScriptedProvider  # noqa: E402
from orchestrator.tools.base import Registry, Tool, ToolContext  # noqa: E402
from orchestrator.trace.jsonl import JsonlSink  # noqa: E402
from orchestrator.trace.spans import TRACER  # noqa: E402

AGENT = "dev"
ROOM = "bench"
SIZES = (10, 100, 1_000, 10_000)
TARGET_MS = 0.2  # at 1,000 messages (the target)

_WORDS = (
    "the a of to and in that is for it with as on be this by are from at or an not we can will "
    "file function test module request response partition message history agent tool model turn "
    "store commit room worker commander error result value config path cache token stream event "
    "should would could please check update review build run fix change add remove rename return "
    "because however then also first next finally before after while when where which there here"
).split()


def text_of(rng: random.Random, lo: int, hi: int) -> str:
    """Plausible English-ish prose of lo..hi characters."""
    target = rng.randint(lo, hi)
    out: list[str] = []
    n = 0
    while n < target:
        w = rng.choice(_WORDS)
        out.append(w)
        n += len(w) + 1
    s = " ".join(out)[:target].rstrip()
    return s[0].upper() + s[1:] + "."


# --- the in-memory side: messages, commit, tool ------------------------------------------------

class Ledger:
    """Hands out ids and seqs like the store would, without one."""

    def __init__(self) -> None:
        self.seq = itertools.count(1)

    def message(self, author: str, kind: str, blocks: list, *, provider: str = "", model: str = "") -> Message:
        seq = next(self.seq)
        return Message(id=f"m{seq}", room=ROOM, seq=seq, ts=time.time(), author=author, kind=kind,
                       blocks=blocks, visible_to=[AGENT, "user"], provider=provider, model=model)

    def from_draft(self, d: Draft) -> Message:
        seq = next(self.seq)
        return Message(id=f"m{seq}", room=ROOM, seq=seq, ts=time.time(), author=d.author, kind=d.kind,
                       blocks=d.blocks, visible_to=d.visible_to, provider=d.provider, model=d.model,
                       replaces=d.replaces)


def history(n: int, ledger: Ledger, seed: int = 7) -> list[Message]:
    """n messages: user lines and assistant replies of 200-400 chars, every ~6th exchange a tool pair."""
    rng = random.Random(seed)
    out: list[Message] = []
    i = 0
    while len(out) < n:
        out.append(ledger.message("user", "user", [TextBlock(text_of(rng, 200, 400))]))
        if len(out) < n - 2 and i % 6 == 5:  # assistant calls a tool, reads the result, then answers
            cid = f"hist_{i}"
            out.append(ledger.message(AGENT, "tool_call", [
                TextBlock(text_of(rng, 40, 120)),
                ToolCallBlock(cid, "lookup", {"key": f"k{rng.randrange(64)}"})], provider="scripted", model="m"))
            out.append(ledger.message(AGENT, "tool_result", [
                ToolResultBlock(cid, "lookup", text_of(rng, 200, 400))]))
        if len(out) < n:
            out.append(ledger.message(AGENT, "text", [TextBlock(text_of(rng, 200, 400))],
                                      provider="scripted", model="m"))
        i += 1
    return out[:n]


class LookupArgs(msgspec.Struct, forbid_unknown_fields=True):
    key: str


_TABLE = {f"k{i}": f"value {i}: " + "x" * 120 for i in range(64)}


async def _lookup(args: LookupArgs, ctx: ToolContext) -> str:
    return _TABLE.get(args.key, "no such key")


LOOKUP = Tool("lookup", "Look a key up in an in-memory table.", LookupArgs, _lookup, read_only=True)


def script(turns: int, tool: bool, seed: int = 11) -> list[Reply]:
    rng = random.Random(seed)
    replies: list[Reply] = []
    for t in range(turns):
        if tool:
            replies.append(Reply(calls=[("lookup", {"key": f"k{t % 64}"})]))
        replies.append(Reply(say=text_of(rng, 95, 105)))
    return replies


def make_commit(partition: Partition, ledger: Ledger):
    async def commit(draft: Draft) -> Message:
        msg = ledger.from_draft(draft)
        partition.append(msg)
        return msg
    return commit


# --- measuring ------------------------------------------------------------------------------------

def setup(size: int, turns: int, tool: bool):
    ledger = Ledger()
    partition = Partition(AGENT)
    for m in history(size, ledger):
        partition.append(m)
    assert len(partition.messages) == size and not partition.open_calls()
    partition.mark_read()
    provider = ScriptedProvider({AGENT: script(turns, tool)}, record=False)
    agent = Agent(name=AGENT, provider=provider, model="scripted-bench", system=text_of(random.Random(3), 800, 800),
                  tools=Registry([LOOKUP]), workspace=Path("."))
    lines = [text_of(random.Random(100 + t), 80, 200) for t in range(turns)]
    return ledger, partition, agent, lines


async def measure(size: int, turns: int, tool: bool, window: int = 0,
                  prof: cProfile.Profile | None = None) -> tuple[list[int], int]:
    """Per-turn ns. window > 0: restart from a fresh `size`-message partition every `window` turns
    (rebuild not timed), so every sample sees size .. size + 2*window messages."""
    ledger, partition, agent, lines = setup(size, turns, tool)
    base = list(partition.messages)
    samples: list[int] = []
    clock = time.perf_counter_ns
    end = 0
    for t, line in enumerate(lines):
        if window and t and t % window == 0:
            end = max(end, len(partition.messages))
            partition = Partition(AGENT)
            for m in base:
                partition.append(m)
            partition.mark_read()
        if t == 0 or (window and t % window == 0):
            commit = make_commit(partition, ledger)
        if prof:
            prof.enable()
        t0 = clock()
        await commit(Draft(author="user", kind="user", blocks=[TextBlock(line)], visible_to=[AGENT, "user"]))
        done = await run(agent, partition, commit)
        samples.append(clock() - t0)
        if prof:
            prof.disable()
        assert done.stop_reason == "end_turn", done
    assert not agent.provider.remaining(), "script not consumed"
    return samples, max(end, len(partition.messages))


def pct(xs: list[int], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))] / 1e6


def machine() -> str:
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"Python {platform.python_version()}, {cpu}, trio {trio.__version__}, msgspec {msgspec.__version__}"


def table(variant: str, rows: list[tuple[int, int, int, list[int]]]) -> str:
    out = [f"### {variant}", "",
           "| history (start → end) | turns | median ms/turn | p95 ms/turn | max ms | median growth vs previous size |",
           "|---:|---:|---:|---:|---:|---:|"]
    prev: tuple[int, float] | None = None
    for size, end, turns, samples in rows:
        med = statistics.median(samples) / 1e6
        growth = "—"
        if prev:
            growth = f"×{med / prev[1]:.2f} (history ×{size / prev[0]:g})"
        out.append(f"| {size:,} → {end:,} | {turns:,} | {med:.3f} | {pct(samples, 95):.3f} | "
                   f"{max(samples) / 1e6:.2f} | {growth} |")
        prev = (size, med)
    return "\n".join(out)


@contextmanager
def tracing(on: bool):
    """Spans on: every span ends in a JSONL file, as with `orchestrator run --trace`."""
    if not on:
        yield
        return
    with tempfile.TemporaryDirectory() as tmp:
        sink = JsonlSink(Path(tmp) / "trace.jsonl")
        TRACER.add(sink)
        try:
            yield
        finally:
            TRACER.remove(sink)
            sink.close()


def turns_for(size: int, quick: bool) -> int:
    return 100 if quick else 2_000


async def main_async(args) -> None:
    await measure(10, 50, True)  # warm up imports and caches (schema_of, trio internals) outside the runs
    print(f"<!-- {machine()}; {args.repeat} round(s) per size, lowest median kept -->")
    print()
    mode = (f"history reset every {args.window} turns" if args.window
            else "history grows 2 messages per turn (4 with the tool call)")
    for (variant, tool), traced in itertools.product((("plain (text reply)", False), ("one tool call per turn", True)),
                                                     (False, True)):
        if args.variant not in ("both", "tool" if tool else "plain") or \
                args.tracing not in ("both", "on" if traced else "off"):
            continue
        rows = []
        for size in args.sizes:
            turns = args.turns or turns_for(size, args.quick)
            best: tuple[int, list[int]] | None = None
            for _ in range(args.repeat):  # keep the least disturbed round (lowest median)
                gc.collect()
                with tracing(traced):
                    samples, end = await measure(size, turns, tool, args.window)
                if best is None or statistics.median(samples) < statistics.median(best[1]):
                    best = (end, samples)
            rows.append((size, best[0], turns, best[1]))
        print(table(f"{variant}; {mode}; tracing {'on (JSONL)' if traced else 'off'}", rows))
        print()
        at = [r for r in rows if r[0] == 1_000]
        if at and not traced:
            med = statistics.median(at[0][3]) / 1e6
            verdict = "meets" if med < TARGET_MS else "MISSES"
            print(f"Target: < {TARGET_MS} ms/turn at 1,000 messages: median {med:.3f} ms ({verdict}).")
            print()


def profile(args) -> None:
    size, tool = args.profile, args.variant == "tool"
    turns = args.turns or 2_000
    trio.run(measure, 10, 50, tool)
    prof = cProfile.Profile()
    with tracing(args.tracing == "on"):
        trio.run(measure, size, turns, tool, args.window, prof)  # profiler on only inside the timed region
    buf = io.StringIO()
    st = pstats.Stats(prof, stream=buf)
    st.sort_stats("tottime").print_stats(args.top)
    st.sort_stats("cumulative").print_stats(args.top)
    print(f"# cProfile: {turns} turns from {size} messages, variant={'tool' if tool else 'plain'}")
    print(buf.getvalue())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: 100 turns per size")
    ap.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=list(SIZES),
                    help="comma-separated starting history sizes (default 10,100,1000,10000)")
    ap.add_argument("--turns", type=int, default=0, help="turns per size (default 2,000; 100 with --quick)")
    ap.add_argument("--repeat", type=int, default=0,
                    help="rounds per size, the one with the lowest median is reported (default 3; 1 with --quick)")
    ap.add_argument("--variant", choices=("both", "plain", "tool"), default="both")
    ap.add_argument("--window", type=int, default=0, metavar="K",
                    help="restart from the starting history every K turns (default 0: let it grow)")
    ap.add_argument("--tracing", choices=("off", "on", "both"), default="off",
                    help="spans off (default), on (to a JSONL file), or both, one table each")
    ap.add_argument("--profile", type=int, metavar="SIZE", help="cProfile the turns at this starting size")
    ap.add_argument("--top", type=int, default=30, help="rows of profile output")
    args = ap.parse_args()
    args.repeat = args.repeat or (1 if args.quick else 3)
    if args.profile:
        if args.variant == "both":
            args.variant = "plain"
        profile(args)
    else:
        trio.run(main_async, args)


if __name__ == "__main__":
    main()

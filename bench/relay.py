"""The relay: three agents relaying through the commander at zero model latency, and AutoGen beside it.

Ours: a real `Room` on a file-backed SQLite store (every message committed), commander + workers `a` and `b`.
Per user line the commander dispatches to `a`, then to `b`, then answers: 5 model calls (turns). Theirs (when
`autogen-agentchat` and `autogen-ext` are installed, the `bench` extra): `RoundRobinGroupChat` of three
`AssistantAgent`s on the stock `ReplayChatCompletionClient`, in memory, `max_turns` = turns. Install
the extra in a venv of its own: autogen-core pins protobuf 5, which the `otel` extra's exporter cannot use. A turn is one
model call on both sides; ms/turn is the wall time of the whole run over the turns, after one untimed
warm-up line (5 turns) on each side. Every (side, size) runs in a fresh subprocess, so the peak RSS
(`ru_maxrss`) is its own, imports included.

Also: start-up (`orchestrator --help`, `import orchestrator.room.room`, best of 5 fresh processes).

    .venv/bin/python bench/relay.py                 # sizes 50, 200, 1000; 3 rounds each, best kept
    .venv/bin/python bench/relay.py --sizes 1000 --repeat 1
    .venv/bin/python bench/relay.py --profile 1000  # cProfile of our side
"""
from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIZES = (50, 200, 1_000)
PER_LINE = 5  # commander, a, commander, b, commander


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def ours(turns: int, prof: cProfile.Profile | None = None) -> dict:
    from orchestrator.core import startup

    startup.tune()  # as the command line does: lean imports, the collector policy (a library process: without)
    from orchestrator.providers.scripted import Reply, ScriptedProvider
    from orchestrator.room.room import COMMANDER, Room
    from orchestrator.store.db import Store
    from orchestrator.team.schema import AgentDef, Team

    lines = max(1, turns // PER_LINE)
    script = {COMMANDER: [], "a": [], "b": []}
    for i in range(lines + 1):  # the first line warms up, untimed
        script[COMMANDER] += [Reply(calls=[("dispatch_to", {"agent": "a", "task": f"Draft part {i}."})]),
                              Reply(calls=[("dispatch_to", {"agent": "b", "task": f"Check part {i}."})]),
                              Reply(say=f"Part {i} is drafted and checked.")]
        script["a"].append(Reply(say=f"Part {i}: drafted, three short paragraphs."))
        script["b"].append(Reply(say=f"Part {i}: checked, no problems found."))
    provider = ScriptedProvider(script, record=False)
    team = Team(commander=AgentDef(name=COMMANDER, model="scripted"),
                agents=[AgentDef(name=w, description=f"worker {w}", model="scripted") for w in ("a", "b")])
    with tempfile.TemporaryDirectory(prefix="bench-relay-") as tmp:
        store = await Store.open(Path(tmp) / "relay.db")
        try:
            async with Room.create(store, team, lambda _m: (provider, "scripted"), name="relay",
                                   workspace=Path(tmp)) as room:
                await room.post("Line -1: warm up (templates, first imports), untimed.")
                await room.idle()
                t0 = time.perf_counter()
                if prof:
                    prof.enable()
                for i in range(lines):
                    await room.post(f"Line {i}: draft it with a, then have b check it.")
                    await room.idle()
                if prof:
                    prof.disable()
                wall = time.perf_counter() - t0
            assert not provider.remaining(), provider.remaining()
        finally:
            await store.close()
    return {"turns": lines * PER_LINE, "wall": wall, "numpy": "numpy" in sys.modules}


async def autogen(turns: int) -> dict:
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.conditions import MaxMessageTermination
    from autogen_agentchat.teams import RoundRobinGroupChat
    from autogen_ext.models.replay import ReplayChatCompletionClient

    def relay(turns: int) -> RoundRobinGroupChat:
        agents = [AssistantAgent(name, model_client=ReplayChatCompletionClient(
            [f"{name}: reply {i}, a short line of relayed work." for i in range(turns)]))
            for name in ("commander", "a", "b")]
        return RoundRobinGroupChat(agents, max_turns=turns, termination_condition=MaxMessageTermination(turns + 1))

    await relay(PER_LINE).run(task="Warm up, untimed.")  # as on our side: first-use costs out of the timing
    team = relay(turns)
    t0 = time.perf_counter()
    result = await team.run(task="Relay the work.")
    wall = time.perf_counter() - t0
    done = sum(1 for m in result.messages if getattr(m, "source", "") != "user")
    assert done == turns, (done, turns)
    return {"turns": turns, "wall": wall, "numpy": "numpy" in sys.modules}


def child(side: str, turns: int) -> dict:
    if side == "ours":
        import trio
        out = trio.run(ours, turns)
    else:
        import asyncio
        out = asyncio.run(autogen(turns))
    return out | {"rss": rss_mb()}


def run_child(side: str, turns: int) -> dict | None:
    p = subprocess.run([sys.executable, __file__, "--child", side, str(turns)], capture_output=True, text=True)
    if p.returncode:
        print(p.stderr[-2000:], file=sys.stderr)
        return None
    return json.loads(p.stdout.strip().splitlines()[-1])


def startup(repeat: int = 5) -> dict[str, float]:
    cmds = {"orchestrator --help": [str(ROOT / ".venv/bin/orchestrator"), "--help"],
            "import orchestrator.room.room": [sys.executable, "-c", "import orchestrator.room.room"],
            "python -c pass (floor)": [sys.executable, "-c", "pass"]}
    out = {}
    for name, cmd in cmds.items():
        best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
            best = min(best, time.perf_counter() - t0)
        out[name] = best
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", type=int, metavar="TURNS")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]))))
        return
    if args.profile:
        import trio
        prof = cProfile.Profile()
        trio.run(ours, args.profile, prof)
        pstats.Stats(prof).sort_stats("cumulative").print_stats(35)
        return
    try:
        import autogen_agentchat  # noqa: F401
        sides = ["ours", "autogen"]
    except ImportError:
        sides = ["ours"]
        print("autogen-agentchat is not installed (pip install -e '.[bench]'): our side only")
    print("| side | turns | ms/turn (best of {}) | peak RSS MB | numpy loaded |".format(args.repeat))
    print("|---|---:|---:|---:|---|")
    for turns in map(int, args.sizes.split(",")):
        for side in sides:
            runs = [r for r in (run_child(side, turns) for _ in range(args.repeat)) if r]
            if not runs:
                print(f"| {side} | {turns} | failed | | |")
                continue
            best = min(runs, key=lambda r: r["wall"])
            print(f"| {side} | {best['turns']:,} | {best['wall'] / best['turns'] * 1e3:.3f} | "
                  f"{max(r['rss'] for r in runs):.1f} | {'yes' if best['numpy'] else 'no'} |", flush=True)
    print()
    print("| start-up (best of 5 fresh processes) | s |")
    print("|---|---:|")
    for name, s in startup().items():
        print(f"| {name} | {s:.3f} |")


if __name__ == "__main__":
    main()

"""What a dispatch to an external agent (ACP) costs next to one to a model member, and how fast a stop is.

Both go through the room's real path (the commander's scripted dispatch_to, the task's commit, the member's turn,
the report as the tool result): the *model* member answers on the scripted provider; the *ACP* member is the SDK
test agent (tests/acpdata/agent.py) in the sandbox, its session opened by the first dispatch (timed apart, as the
start) and kept for the rest. Then `--stops` dispatches of a long sleep are stopped: the time from `room.stop()`
to the room's `cancelled` event, and to the agent's own answer ("cancelled") to its session/cancel.

    .venv/bin/python bench/acp.py              # 50 dispatches each, 10 stops (~20 s)
    .venv/bin/python bench/acp.py --quick      # 10 dispatches, 3 stops
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine import machine  # noqa: E402  (bench/engine.py: the machine line)

from orchestrator.core.events import Cancelled, Event, TextDeltaEvent  # noqa: E402
from orchestrator.providers.scripted import Reply, ScriptedProvider  # noqa: E402
from orchestrator.room.room import Room  # noqa: E402
from orchestrator.store.db import Store  # noqa: E402
from orchestrator.team.schema import AcpSpec, AgentDef, Team  # noqa: E402

AGENT = Path(__file__).resolve().parent.parent / "tests" / "acpdata" / "agent.py"


def row(label: str, ms: list[float]) -> str:
    q = statistics.quantiles(ms, n=20, method="inclusive") if len(ms) > 1 else [ms[0]] * 19
    return f"| {label} | {len(ms)} | {statistics.median(ms):.1f} | {q[18]:.1f} | {max(ms):.1f} |"


async def dispatches(folder: Path, member: AgentDef, n: int, provider: ScriptedProvider) -> tuple[float, list[float]]:
    """The first dispatch (the agent's start, for an ACP member) and the next n, each from post to idle, in ms."""
    team = Team(commander=AgentDef(name="commander", model="scripted"), agents=[member])
    store = await Store.open(folder / f"{member.name}.db")
    times = []
    try:
        async with Room.create(store, team, lambda m: (provider, "scripted"), workspace=folder) as room:
            for _ in range(n + 1):
                t0 = time.perf_counter()
                await room.post("go")
                await room.idle()
                times.append((time.perf_counter() - t0) * 1000)
    finally:
        await store.close()
    return times[0], times[1:]


def script(member: str, n: int, task: str, say: str | None) -> ScriptedProvider:
    queues: dict[str, list[Reply]] = {"commander": []}
    for _ in range(n):
        queues["commander"] += [Reply(calls=[("dispatch_to", {"agent": member, "task": task})]), Reply(say="ok")]
        if say is not None:
            queues.setdefault(member, []).append(Reply(say=say))
    return ScriptedProvider(queues)


async def stops(folder: Path, n: int) -> tuple[list[float], list[float]]:
    member = AgentDef(name="coder", description="x", acp=AcpSpec(command=[sys.executable, str(AGENT)]))
    team = Team(commander=AgentDef(name="commander", model="scripted"), agents=[member])
    # each stop cancels the commander's turn too: its queue is the dispatches alone
    provider = ScriptedProvider({"commander": [Reply(calls=[("dispatch_to", {"agent": "coder", "task": "Wait.\nsleep: 60"})])
                                               for _ in range(n)]})
    events: list[tuple[float, Event]] = []
    store = await Store.open(folder / "stops.db")
    to_cancelled, to_answer = [], []
    try:
        async with Room.create(store, team, lambda m: (provider, "scripted"), workspace=folder,
                               on_event=lambda e: events.append((time.perf_counter(), e))) as room:
            for _ in range(n):
                events.clear()
                await room.post("go")
                with trio.fail_after(60):
                    while not any(isinstance(e, TextDeltaEvent) and "sleeping" in e.text for _, e in events):
                        await trio.sleep(0.005)
                seat = room._acp._seats["coder"]
                t0 = time.perf_counter()
                await room.stop()
                to_cancelled.append((next(t for t, e in events if isinstance(e, Cancelled)) - t0) * 1000)
                await seat.idle.wait()  # the agent answered its session/cancel
                to_answer.append((time.perf_counter() - t0) * 1000)
    finally:
        await store.close()
    return to_cancelled, to_answer


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        os.environ["XDG_STATE_HOME"] = str(folder / "state")
        n = args.dispatches
        model = AgentDef(name="writer", description="x", model="scripted")
        _, model_ms = await dispatches(folder, model, n, script("writer", n + 1, "Say ok.", "report"))
        acp = AgentDef(name="coder", description="x", acp=AcpSpec(command=[sys.executable, str(AGENT)]))
        start, acp_ms = await dispatches(folder, acp, n, script("coder", n + 1, "Say it.\nsay: report", None))
        cancelled, answered = await stops(folder, args.stops)
    print(machine())
    print("| what | n | median ms | p95 ms | max ms |\n|---|---|---|---|---|")
    print(row("dispatch to a model member (scripted)", model_ms))
    print(row("dispatch to an ACP member (session kept)", acp_ms))
    print(row("first dispatch to an ACP member (agent start, initialize, session/new)", [start]))
    print(row("stop during an ACP prompt -> room `cancelled`", cancelled))
    print(row("stop -> the agent's own `cancelled` answer", answered))
    extra = statistics.median(acp_ms) - statistics.median(model_ms)
    print(f"\nan ACP member adds {extra:.1f} ms per dispatch (median), its session kept")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dispatches", type=int, default=50)
    parser.add_argument("--stops", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="10 dispatches and 3 stops")
    args = parser.parse_args()
    if args.quick:
        args.dispatches, args.stops = 10, 3
    trio.run(main, args)

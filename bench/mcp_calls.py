"""What an MCP tool call over stdio adds to a direct call of the same tool.

Both go through the engine's real path (`execute_group` over a Registry): the *direct* tool is an
ordinary in-process Tool that does the lookup itself; the *MCP* tool is the adapter of `lookup` on the
official-SDK test server (tests/mcpdata/server.py) over stdio, so each call is a JSON-RPC round trip
through the owner's Client, the pipes and the server's dispatcher; then `--cancels` slow calls are
cancelled mid-flight (the part of a group stop an MCP call adds). Calls run one after another
(`--calls` per round, `--rounds` rounds alternating which goes first; the round with the lowest median
is kept, the machine being shared). Also timed once per round: starting the server (spawn, import,
handshake, tools/list) and stopping it (the hub's exit).

    .venv/bin/python bench/mcp_calls.py              # 500 calls x 3 rounds (~15 s)
    .venv/bin/python bench/mcp_calls.py --quick      # 50 calls x 1 round
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import msgspec
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine import machine  # noqa: E402  (bench/engine.py: the machine line)

from orchestrator.core.types import ToolCallBlock  # noqa: E402
from orchestrator.engine.toolcalls import execute_group  # noqa: E402
from orchestrator.mcplink.config import ServerConfig  # noqa: E402
from orchestrator.mcplink.servers import open_hub  # noqa: E402
from orchestrator.mcplink.tools import toolset  # noqa: E402
from orchestrator.tools.base import Registry, Tool  # noqa: E402
from orchestrator.tools.session import ToolSession  # noqa: E402

SERVER = Path(__file__).resolve().parent.parent / "tests" / "mcpdata" / "server.py"


class LookupArgs(msgspec.Struct):
    word: str


async def _lookup(args: LookupArgs, ctx) -> str:
    return {"trio": "a structured concurrency library"}.get(args.word, f"no entry for {args.word!r}")


DIRECT = Tool("lookup", "Look a word up in a tiny dictionary.", LookupArgs, _lookup, read_only=True)


async def timed_calls(registry: Registry, name: str, calls: int, session: ToolSession) -> list[float]:
    out = []
    for i in range(calls):
        call = ToolCallBlock(f"c{i}", name, {"word": "trio"})
        t0 = time.perf_counter_ns()
        [(result, _)] = await execute_group([call], registry, "bench", session, (call,))
        out.append((time.perf_counter_ns() - t0) / 1e6)
        assert not result.is_error and result.content == "a structured concurrency library", result.content
    return out


def row(label: str, ms: list[float]) -> str:
    q = statistics.quantiles(ms, n=100)
    return f"| {label} | {statistics.median(ms):.3f} | {q[94]:.3f} | {q[98]:.3f} | {statistics.mean(ms):.3f} |"


async def main(args) -> None:
    session = ToolSession(Path.cwd())
    direct = Registry([DIRECT])
    best: dict[str, list[float]] = {}
    starts, stops, cancels = [], [], []
    with tempfile.TemporaryDirectory() as logs:
        for r in range(args.rounds):
            t0 = time.perf_counter()
            async with open_hub(Path(logs)) as hub:
                cfg = ServerConfig(command=[sys.executable, str(SERVER)], approval="allow")
                ts = await toolset(hub, {"b": cfg}, ["mcp:b/lookup"], 200_000, set())
                starts.append(time.perf_counter() - t0)
                assert ts.tools, ts.problems
                mcp = Registry(ts.tools)
                await timed_calls(mcp, "mcp__b__lookup", 20, session)  # warm both paths
                await timed_calls(direct, "lookup", 20, session)
                order = [("direct", direct, "lookup"), ("mcp", mcp, "mcp__b__lookup")]
                for label, reg, name in (order if r % 2 == 0 else order[::-1]):
                    ms = await timed_calls(reg, name, args.calls, session)
                    if label not in best or statistics.median(ms) < statistics.median(best[label]):
                        best[label] = ms
                conn = hub.connection("b", cfg)
                for _ in range(args.cancels):
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(conn.call, "slow", {"seconds": 30})
                        await trio.sleep(0.05)  # the request is with the server
                        t_cancel = time.perf_counter_ns()
                        nursery.cancel_scope.cancel()
                    cancels.append((time.perf_counter_ns() - t_cancel) / 1e6)
                t1 = time.perf_counter()
            stops.append(time.perf_counter() - t1)
    print(machine())
    print(f"\n{args.calls} sequential calls per round, {args.rounds} round(s), best round (ms):\n")
    print("| call | median | p95 | p99 | mean |")
    print("|---|---:|---:|---:|---:|")
    print(row("direct (in-process tool)", best["direct"]))
    print(row("MCP over stdio (SDK test server)", best["mcp"]))
    added = statistics.median(best["mcp"]) - statistics.median(best["direct"])
    print(f"\nadded by MCP stdio: {added:.3f} ms per call (median)")
    print(f"cancelling an in-flight slow call (what a group stop waits for), {len(cancels)} times: "
          f"median {statistics.median(cancels):.2f} ms, max {max(cancels):.2f} ms")
    print(f"server start (spawn + import + handshake + tools/list): median {statistics.median(starts):.2f} s; "
          f"stop at hub exit: median {statistics.median(stops) * 1000:.0f} ms")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=500)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--cancels", type=int, default=20, help="slow calls cancelled per round")
    p.add_argument("--quick", action="store_true")
    a = p.parse_args()
    if a.quick:
        a.calls, a.rounds = 50, 1
    trio.run(main, a)

"""`orchestrator serve` under load: 50 rooms working at once, with and without 5 tabs watching.

The bench process is the server, started as `orchestrator serve --workers 1` starts its one worker (cli/serve.py
`_work`): `serve`'s own arguments, `load_setup`, `room_models`, `Host.open` (leased rooms and their feeds),
`build_app` behind its guard (`Hosts.bound`) and the hypercorn trio worker, on 127.0.0.1. Each
round creates 50 fresh rooms (a commander dispatching to two workers in parallel, each reading a
file; scripted models that wait `--delay` s per reply) and posts `--lines` lines in every room at
once, one after the other within a room. A line's latency runs from `room.post` to `room.idle()`.

Rounds alternate without tabs and with 5 tabs, each tab on one of the rooms from before the first
line: `--tabs sse` (default) is a separate process holding 5 SSE subscriptions that read every
event; `--tabs browser` is 5 real chromium pages (Playwright, Debian's /usr/bin/chromium). Both send the
token as the server takes it: the SSE tabs as `Authorization: Bearer`, the pages in their address's
`#token=` fragment (the page's script sends the header).

    .venv/bin/python bench/serve.py                  # 50 rooms x 5 lines, 3 rounds each way
    .venv/bin/python bench/serve.py --tabs browser   # the tabs are chromium pages
    .venv/bin/python bench/serve.py --quick          # 10 rooms x 2 lines, 1 round each way
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from orchestrator.core import startup  # noqa: E402

startup.tune()  # as `orchestrator serve` does: lean imports, the collector policy of a host

from engine import machine  # noqa: E402

SCENARIO = """\
name: serve-bench
team:
  agents:
    - {{name: researcher, description: Reads., tools: [read_file]}}
    - {{name: reviewer, description: Reviews., tools: [read_file]}}
files:
  notes.txt: "{text}"
models:
  commander:
{commander}
  researcher:
{researcher}
  reviewer:
{reviewer}
"""


def scenario(lines: int, delay: float) -> str:
    """A script for `lines` user lines: dispatch to both workers in parallel, then answer."""
    def each(items: list[str]) -> str:
        return "\n".join(items * lines)

    commander = [f"""    - say: Asking both of them at once.
      delay: {delay}
      calls:
        - dispatch_to: {{agent: researcher, task: Summarize notes.txt.}}
        - dispatch_to: {{agent: reviewer, task: Review notes.txt.}}""",
                 f"""    - say: Both are done; here is the summary of what they found in the notes.
      delay: {delay}"""]
    worker = [f"""    - call: {{read_file: {{path: notes.txt}}}}
      delay: {delay}""", f"""    - say: The notes list twelve findings, three of them urgent, all about the cache layer.
      delay: {delay}"""]
    return SCENARIO.format(text="a line of notes. " * 40, commander=each(commander), researcher=each(worker),
                           reviewer=each(worker))


async def server_main(args: argparse.Namespace) -> None:
    # A B B A A B ...: a drift of the shared machine over the run weighs on both kinds alike.
    kinds = ["none", args.tabs]
    rounds = [kinds[k] for k in kinds_of(2 * args.rounds)]
    results = []
    for n, tabs in enumerate(rounds):
        results.append(await one_server(args, tabs, n))
        r = results[-1]
        print(f"round {n + 1}/{len(rounds)} tabs={tabs:<7} median {r['median']:.3f}s p90 {r['p90']:.3f}s  "
              f"server CPU {r['cpu']:.2f}s  events seen by tabs: {r['seen']}", flush=True)
    report(results, args)


def kinds_of(n: int) -> list[int]:
    """0 = without tabs, 1 = with, in the order A B B A A B B A ..."""
    return [(i + i // 2) % 2 for i in range(n)]


async def one_server(args: argparse.Namespace, tabs: str, n: int) -> dict:
    """One round on a server of its own (fresh store, host and rooms), so rounds do not inherit
    the rooms, the heap or the database of the rounds before them. Assembled as cli/serve.py `_work`
    assembles a worker (without its signal handling)."""
    from hypercorn.config import Config
    from hypercorn.trio import serve

    from orchestrator.cli.chat.command import load_setup
    from orchestrator.cli.main import parser
    from orchestrator.cli.paths import open_db
    from orchestrator.cli.serve import listen, room_models
    from orchestrator.web.app import build_app
    from orchestrator.web.guard import Hosts
    from orchestrator.web.host import Host

    with tempfile.TemporaryDirectory(prefix="serve-bench-") as tmp:
        script = Path(tmp) / "bench.yaml"
        script.write_text(scenario(args.lines, args.delay))
        argv = ["serve", "--workers", "1", "--host", "127.0.0.1", "--port", "0", "--scripted", str(script),
                "--workspace", str(Path(tmp) / "ws"), "--db", str(Path(tmp) / "bench.db")]
        serve_args = parser(argv).parse_args(argv)  # `serve`'s own defaults (lease, own_workspace, ...)
        token = secrets.token_urlsafe(24)
        sock = listen(serve_args.host, serve_args.port)
        bound, port = sock.getsockname()[:2]
        base = f"http://127.0.0.1:{port}"
        async with AsyncExitStack() as stack:
            stack.callback(sock.close)
            hosts = Hosts.bound(serve_args.host, port, bound)
            store = await open_db(serve_args.db)
            stack.push_async_callback(store.close)
            setup = await load_setup(serve_args, store, stack)
            config = Config()
            config.bind = [f"fd://{sock.detach()}"]
            config.loglevel = "WARNING"
            config.graceful_timeout = 1.0
            async with trio.open_nursery() as nursery:
                async with Host.open(store, room_models(serve_args, setup), name=f"serve-bench:{os.getpid()}",
                                     seconds=serve_args.lease) as host:
                    nursery.start_soon(serve, build_app(host, token, hosts), config)
                    result = await one_round(host, base, token, tabs, args, n)
                    nursery.cancel_scope.cancel()
    return result


async def one_round(host, base: str, token: str, tabs: str, args: argparse.Namespace, n: int) -> dict:
    async with AsyncExitStack() as held:  # each room held open here for the round, as a page's request holds it
        rooms = [(await held.enter_async_context(host.room(None, name=f"bench-{n}-{i}"))).room
                 for i in range(args.rooms)]
        return await lines_in(rooms, base, token, tabs, args)


async def lines_in(rooms: list, base: str, token: str, tabs: str, args: argparse.Namespace) -> dict:
    watcher = None
    if tabs != "none":
        watched = [r.id for r in rooms[:: max(1, args.rooms // args.watch)][: args.watch]]
        watcher = subprocess.Popen([sys.executable, __file__, "--watch-mode", tabs, base, token, *watched],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready = await trio.to_thread.run_sync(watcher.stdout.readline)
        assert ready.startswith("ready"), ready
    latencies: dict[int, list[float]] = {i: [] for i in range(len(rooms))}

    async def work(i: int, room) -> None:
        for k in range(args.lines):
            start = time.perf_counter()
            await room.post(f"Line {k}: what do the notes say?")
            await room.idle()
            latencies[i].append(time.perf_counter() - start)

    started, cpu = time.perf_counter(), time.process_time()
    async with trio.open_nursery() as nursery:
        for i, room in enumerate(rooms):
            nursery.start_soon(work, i, room)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    seen, watcher_cpu = 0, 0.0
    if watcher is not None:
        watcher.stdin.close()
        out = await trio.to_thread.run_sync(watcher.stdout.read)
        watcher.wait()
        watcher.stdout.close()
        last = json.loads(out.strip().splitlines()[-1])
        seen, watcher_cpu = last["events"], last["cpu"]
        assert not last.get("refused"), f"the server refused calls of the tabs: {last['refused'][:5]}"
    for room in rooms:  # every line got its full answer
        assert not room.busy and len(room.ledger.tasks) == 2 * args.lines, room.ledger.tasks
    flat = sorted(x for xs in latencies.values() for x in xs)
    return {"tabs": tabs, "per_room": [statistics.median(latencies[i]) for i in range(len(rooms))],
            "median": statistics.median(flat), "p90": flat[int(0.9 * (len(flat) - 1))], "wall": wall, "cpu": cpu, "watcher_cpu": watcher_cpu,
            "seen": seen}


def report(results: list[dict], args: argparse.Namespace) -> None:
    base = [r for r, k in zip(results, kinds_of(len(results))) if k == 0]
    tabs = [r for r, k in zip(results, kinds_of(len(results))) if k == 1]  # --tabs none: an A/A run
    rooms = len(base[0]["per_room"])
    # Per room: its median over the rounds of each kind, then the ratio with tabs / without.
    per_a = [statistics.median(r["per_room"][i] for r in base) for i in range(rooms)]
    per_b = [statistics.median(r["per_room"][i] for r in tabs) for i in range(rooms)]
    ratios = sorted(b / a for a, b in zip(per_a, per_b))
    med_a = statistics.median(r["median"] for r in base)
    med_b = statistics.median(r["median"] for r in tabs)
    print()
    print(f"- Machine: {machine()}")
    print(f"- Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; the machine is shared with other work")
    print(f"- {rooms} rooms x {args.lines} lines per round, model delay {args.delay}s per reply, "
          f"{args.rounds} rounds each way (alternating), tabs: {args.watch} x {args.tabs}")
    print()
    print("| | line latency median | p90 | wall per round | server CPU per round |")
    print("|---|---|---|---|---|")
    for name, rs in (("no tabs", base), (f"{args.watch} tabs ({args.tabs})" if args.tabs != "none" else "no tabs either", tabs)):
        print(f"| {name} | {statistics.median(r['median'] for r in rs):.3f} s | "
              f"{statistics.median(r['p90'] for r in rs):.3f} s | {statistics.median(r['wall'] for r in rs):.2f} s | "
              f"{statistics.median(r['cpu'] for r in rs):.2f} s |")
    print()
    print(f"- overall: with tabs / without = {med_b / med_a:.3f}")
    print(f"- per room (median over rounds), with tabs / without: min {ratios[0]:.3f}, "
          f"median {statistics.median(ratios):.3f}, max {ratios[-1]:.3f}; "
          f"rooms over 1.10: {sum(r > 1.10 for r in ratios)} of {rooms}")
    seen = ", ".join(str(r["seen"]) for r in tabs)
    cpu = ", ".join(f"{r['watcher_cpu']:.2f}" for r in tabs)
    print(f"- events the tabs read per round: {seen}; the tabs' own process used {cpu} s of CPU (same 2 cores)")


# --- the tabs, in their own process ---------------------------------------------------------------

def watch_sse(base: str, token: str, rooms: list[str]) -> None:
    import httpx

    counts = {r: 0 for r in rooms}

    async def follow(client, room: str, ready: trio.Event) -> None:
        async with client.stream("GET", f"{base}/rooms/{room}/events", timeout=None,
                                 headers={"Authorization": f"Bearer {token}"}) as r:
            r.raise_for_status()  # a refused stream (401, 421, 429) is a broken bench, not a quiet tab
            ready.set()
            async for line in r.aiter_lines():
                if line.startswith("data: "):
                    json.loads(line[6:])  # a browser parses every event too
                    counts[room] += 1

    async def main() -> None:
        async with httpx.AsyncClient() as client, trio.open_nursery() as nursery:
            readies = []
            for room in rooms:
                readies.append(trio.Event())
                nursery.start_soon(follow, client, room, readies[-1])
            for e in readies:
                await e.wait()
            print("ready", flush=True)
            await trio.to_thread.run_sync(sys.stdin.read)  # until the bench closes our stdin
            nursery.cancel_scope.cancel()

    trio.run(main)
    print(json.dumps({"events": sum(counts.values()), "cpu": time.process_time()}), flush=True)


def watch_browser(base: str, token: str, rooms: list[str]) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        refused: list[str] = []  # any call of the pages the server refused (token, guard): a broken bench
        context.on("response", lambda r: r.status >= 400 and refused.append(f"{r.status} {r.request.method} {r.url}"))
        pages = []
        for room in rooms:
            page = context.new_page()
            page.goto(f"{base}/rooms/{room}#token={token}")  # the fragment: never sent to the server
            page.wait_for_selector("#link:text('live')")
            pages.append(page)
        print("ready", flush=True)
        sys.stdin.read()
        seen = sum(page.locator("#transcript .msg").count() for page in pages)
        browser.close()
    # messages on screen; the CPU is Playwright's driver only (chromium's processes are not counted)
    print(json.dumps({"events": seen, "cpu": time.process_time(), "refused": refused}), flush=True)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--watch-mode":
        mode, base, token, *rooms = sys.argv[2:]
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        (watch_browser if mode == "browser" else watch_sse)(base, token, rooms)
        return
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rooms", type=int, default=50)
    p.add_argument("--lines", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3, help="rounds of each kind (without, with tabs)")
    p.add_argument("--watch", type=int, default=5, help="tabs")
    p.add_argument("--tabs", choices=["sse", "browser", "none"], default="sse",
                   help="what watches; none: no tabs in either kind of round (the noise floor)")
    p.add_argument("--delay", type=float, default=0.05, help="seconds each scripted reply waits")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    if args.quick:
        args.rooms, args.lines, args.rounds = 10, 2, 1
    os.environ.setdefault("ORCHESTRATOR_MODEL", "")
    from orchestrator.core.log import configure

    configure()  # as the command line does: warnings and errors only (no line per room taken)
    trio.run(server_main, args)


if __name__ == "__main__":
    main()

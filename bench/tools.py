"""Tool costs: a parallel read-only group against the same reads one by one, and grep_files over 10,000 files.

1. reads: 8 `read_file` calls of one response (8 text files of 2-8 MB, 40 MB in all, in a temporary
   workspace) go through `execute_group`, the engine's real path, once as one group of 8 (what
   `groups()` makes of 8 adjacent read-only calls) and once as 8 single-call groups in sequence.
   Media: warm page cache; cold guest page cache (each file evicted with posix_fadvise(DONTNEED)
   before every run, so the reads go to the virtio disk); and two *simulated* slow media, where a
   wrapper tool named read_file waits 50 ms before the real read, either in `trio.sleep` (holds no
   thread) or in a worker thread inside read_file's own `_FILE_IO` limiter (like a blocking network
   file system call). A calibration row runs the same group machinery over a tool that only hashes
   in-memory buffers (GIL released): what parallelism the machine gives at that moment. Each medium
   runs `--rounds` rounds, group and sequence alternating first; the median is reported. The ideal
   is the slowest single call of the sequential run; the CPU bound splits the non-waiting work over
   the CPUs. A last table splits one thread's pass over the files into read_file's steps.
2. grep: `grep_files` (the tool's `run`, so one thread hop, as the engine calls it) over a generated
   tree of 10,000 files (nested folders, 1-20 KB, a .gitignore excluding build/, node_modules/ and
   *.log, a nested one excluding generated/) for a literal, a regex, a pattern with no match, the
   no-match pattern with `include_ignored`, and a `glob`. max_matches is 1,000 so no search stops
   early. The reference is `grep -rn` (LC_ALL=C, -F/-P, the same folders excluded), and a plain
   Python loop (os.walk, read, decode, split, re.search per line: no sandbox, no pathspec).
   A stage table then times the parts of grep_files through its private helpers.

    .venv/bin/python bench/tools.py                 # full run (~2.5 min)
    .venv/bin/python bench/tools.py --quick         # smoke run: 3 rounds, 2,000 files (~20 s)
    .venv/bin/python bench/tools.py --only grep     # one section: reads | grep
    .venv/bin/python bench/tools.py --profile       # cProfile of grep_files' body on the 10,000-file tree
3. sandbox: what the OS sandbox (bubblewrap) adds to each shell command: `run_command` of `bash -c true`
   with and without the sandbox's command line (built by `confinement()` and the backend each time, as
   the bash tool does), alternating, `--sandbox-rounds` each; then in layers: bubblewrap alone (no
   limits, no filter), with the limits (the bash prefix's rlimits, sized /tmp and /dev/shm), with the
   seccomp filter too (a pipe per command), and with a cgroup too where one can be made (as the bash
   tool runs a command); and the stop latency: a sandboxed
   `sleep` (and one whose shell ignores SIGTERM) is cancelled once running, timed from the cancel to
   `run_command` returning with its whole process group gone.

    .venv/bin/python bench/tools.py --only sandbox  # the sandbox's start cost by layer and stop latency (~20 s)
"""
from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import os
import pstats
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine import machine  # noqa: E402  (bench/engine.py: the machine line)

from orchestrator.core.types import ToolCallBlock  # noqa: E402
from orchestrator.engine.toolcalls import execute_group, groups  # noqa: E402
from orchestrator.tools import files, search  # noqa: E402
from orchestrator.tools.base import Registry, Tool, ToolContext  # noqa: E402
from orchestrator.tools.files import FILE_TOOLS, ReadArgs, read_file  # noqa: E402
from orchestrator.tools import cgroup  # noqa: E402
from orchestrator.tools.jail import backend  # noqa: E402
from orchestrator.tools.limits import Limits  # noqa: E402
from orchestrator.tools.process import SHELL, run_command  # noqa: E402
from orchestrator.tools.sandbox import open_checked, walk  # noqa: E402
from orchestrator.tools.seccomp import open_filter  # noqa: E402
from orchestrator.tools.search import GrepArgs, grep_files  # noqa: E402
from orchestrator.tools.session import ToolSession  # noqa: E402
from orchestrator.tools.shell import confinement  # noqa: E402

AGENT = "dev"
READ_MB = (2, 3, 4, 5, 6, 7, 8, 5)  # 40 MB over 8 files
LATENCY = 0.05  # s, the simulated slow medium
TREE_FILES = 10_000

_WORDS = (
    "self value result config path item index count name data node event request response buffer "
    "token stream cache store agent model message tool error state parent child key items total "
    "return import from class for in if else while with as not and or None True False yield await"
).split()


def code_line(rng: random.Random) -> str:
    """A plausible line of code or prose, 0-110 characters; never contains the bench's markers."""
    kind = rng.random()
    ws = rng.choices(_WORDS, k=rng.randint(2, 12))
    indent = " " * (4 * rng.randint(0, 3))
    if kind < 0.1:
        return ""
    if kind < 0.45:
        return f"{indent}{ws[0]}_{ws[1]} = {'.'.join(ws[2:4])}({', '.join(ws[4:])})"
    if kind < 0.6:
        return f"{indent}# {' '.join(ws)}"
    if kind < 0.7:
        return f"{indent}def {ws[0]}_{ws[1]}({', '.join(ws[2:5])}):"
    return f"{indent}{' '.join(ws)}"


def line_pool(seed: int, n: int = 4096) -> list[str]:
    rng = random.Random(seed)
    return [code_line(rng) for _ in range(n)]


def text_bytes(rng: random.Random, pool: list[str], size: int) -> bytes:
    """About `size` bytes of lines drawn from `pool`, ending in a newline."""
    out, n = [], 0
    while n < size:
        line = pool[rng.randrange(len(pool))]
        out.append(line)
        n += len(line) + 1
    return ("\n".join(out) + "\n").encode()


def median(xs: list[float]) -> float:
    return statistics.median(xs)


# --- 1. a parallel read-only group against the same reads in sequence ----------------------------

def make_read_files(root: Path) -> list[tuple[str, int]]:
    rng = random.Random(5)
    pool = line_pool(6)
    out = []
    for i, mb in enumerate(READ_MB):
        name = f"data/part{i}.txt"
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        data = text_bytes(rng, pool, mb << 20)
        with open(path, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())  # clean pages, so DONTNEED can drop them for the cold runs
        out.append((name, len(data)))
    return out


def evict(root: Path, names: list[str]) -> None:
    """Drop the files from the guest page cache (no root needed; the host may still cache the disk)."""
    for name in names:
        fd = os.open(root / name, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def slow_read_file(delay: float, blocking: bool) -> Tool:
    """read_file behind a simulated slow medium: `delay` s before the real read.
    blocking=False: `await trio.sleep(delay)`, which holds no thread (an ideal async client).
    blocking=True: a worker thread sleeps inside read_file's own `_FILE_IO` limiter (a blocking
    network-file-system call holds a thread and a limiter slot), then the real read."""
    async def run(args: ReadArgs, ctx: ToolContext) -> str:
        if blocking:
            await trio.to_thread.run_sync(time.sleep, delay, limiter=files._FILE_IO)
        else:
            await trio.sleep(delay)
        return await read_file(args, ctx)
    return Tool("read_file", files.READ_FILE.description, ReadArgs, run, read_only=True)


def hash_tool(buffers: dict[str, bytes]) -> Tool:
    """Calibration, not a file tool: sha256 of an in-memory buffer of the same size as the file, in a
    worker thread with the GIL released. Its group speedup is what parallelism the machine gives now."""
    async def run(args: ReadArgs, ctx: ToolContext) -> str:
        return await trio.to_thread.run_sync(lambda: hashlib.sha256(buffers[args.path]).hexdigest())
    return Tool("read_file", "calibration", ReadArgs, run, read_only=True)


async def one_run(calls: list[ToolCallBlock], registry: Registry, session: ToolSession,
                  parallel: bool) -> tuple[float, float, list[float]]:
    """Wall ms of the 8 reads, the process's CPU ms (all threads), and (sequential only) each call's ms."""
    siblings = tuple(calls)
    clock = time.perf_counter_ns
    per: list[float] = []
    c0 = time.process_time_ns()
    t0 = clock()
    if parallel:
        results = await execute_group(calls, registry, AGENT, session, siblings)
    else:
        results = []
        for call in calls:
            t1 = clock()
            results += await execute_group([call], registry, AGENT, session, siblings)
            per.append((clock() - t1) / 1e6)
    wall = (clock() - t0) / 1e6
    cpu = (time.process_time_ns() - c0) / 1e6
    for (res, _), call in zip(results, calls):
        assert not res.is_error and res.call_id == call.id, res.content[:200]
        assert len(res.content) == 64 or len(res.content) > files.READ_CAP, "no read-on note: not a whole read"
    return wall, cpu, per


def read_breakdown(root: Path, names: list[str], rounds: int) -> list[tuple[str, bool, float]]:
    """read_file's main costs for the 8 files, one thread, warm cache (lowest of the rounds):
    the steps of files._read_fd / _state / _read redone here, to see which of them hold the GIL."""
    steps = {"os.read, 1 MiB chunks (GIL released)": [],
             "b\"\".join of the chunks (GIL released above 1 MiB)": [],
             "hashlib.sha256 (GIL released)": [], "bytes.decode (GIL held)": []}
    clock = time.perf_counter_ns
    for _ in range(rounds):
        tot = [0, 0, 0, 0]
        for name in names:
            fd = os.open(root / name, os.O_RDONLY)
            try:
                t0 = clock()
                chunks = []
                while chunk := os.read(fd, 1 << 20):
                    chunks.append(chunk)
                t1 = clock()
                data = b"".join(chunks)
                t2 = clock()
                hashlib.sha256(data).hexdigest()
                t3 = clock()
                data.decode("utf-8", errors="replace")
                t4 = clock()
            finally:
                os.close(fd)
            for i, (a, b) in enumerate(((t0, t1), (t1, t2), (t2, t3), (t3, t4))):
                tot[i] += b - a
        for key, ns in zip(steps, tot):
            steps[key].append(ns / 1e6)
    return [(k, "released" in k, min(v)) for k, v in steps.items()]


async def bench_reads(rounds: int) -> tuple[list[dict], list[tuple[str, bool, float]]]:
    with tempfile.TemporaryDirectory(prefix="bench-tools-") as tmp:
        root = Path(tmp)
        made = make_read_files(root)
        names = [n for n, _ in made]
        total = sum(s for _, s in made)
        session = ToolSession(root)
        calls = [ToolCallBlock(f"call_{i}", "read_file", {"path": n}) for i, n in enumerate(names)]
        media = [
            ("warm page cache", Registry(FILE_TOOLS), False, 0.0),
            ("cold guest page cache (posix_fadvise DONTNEED before each run; virtio disk)", Registry(FILE_TOOLS),
             True, 0.0),
            (f"simulated: +{LATENCY * 1e3:.0f} ms `trio.sleep` before each read (holds no thread), warm cache",
             Registry([slow_read_file(LATENCY, False)]), False, LATENCY),
            (f"simulated: +{LATENCY * 1e3:.0f} ms blocking sleep in a worker thread (in read_file's limiter), "
             f"warm cache", Registry([slow_read_file(LATENCY, True)]), False, LATENCY),
            ("calibration, not read_file: sha256 of an in-memory buffer of each file's size in a worker thread "
             "(GIL released)", Registry([hash_tool({n: bytes(s) for n, s in made})]), False, 0.0),
        ]
        rows = []
        for label, registry, cold, latency in media:
            assert groups(calls, registry) == [list(range(len(calls)))], "8 reads should make one group"
            await one_run(calls, registry, session, True)  # warm-up: threads, caches
            seq, par, ideal, cpu = [], [], [], []
            for r in range(rounds):
                for parallel in ((True, False) if r % 2 == 0 else (False, True)):
                    if cold:
                        evict(root, names)
                    wall, used, per = await one_run(calls, registry, session, parallel)
                    if parallel:
                        par.append(wall)
                        cpu.append(used / wall)
                    else:
                        seq.append(wall)
                        ideal.append(max(per))
            rows.append(dict(label=label, calls=len(calls), mb=total / 2**20, seq=seq, par=par, ideal=ideal, cpu=cpu,
                             latency=latency * 1e3))
        return rows, read_breakdown(root, names, rounds)


def reads_table(rows: list[dict], rounds: int) -> str:
    cpus = min(8, os.cpu_count() or 1)
    out = [f"#### 8 read_file calls in one response: one group of 8 vs 8 single-call groups "
           f"({rows[0]['mb']:.0f} MiB, 2-8 MiB per file; median of {rounds} rounds)", "",
           f"| medium | sequential ms | group ms | group ms (min–max) | speedup | ideal ms (slowest single read) "
           f"| ideal speedup | {cpus}-CPU bound ms | group MiB/s | CPUs busy in the group |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        seq, par, ideal = median(r["seq"]), median(r["par"]), median(r["ideal"])
        # the waits overlap fully; everything else (cold: disk time too) split evenly over the CPUs
        bound = max(ideal, r["latency"] + (seq - r["calls"] * r["latency"]) / cpus)
        out.append(f"| {r['label']} | {seq:.1f} | {par:.1f} | {min(r['par']):.1f}–{max(r['par']):.1f} | "
                   f"×{seq / par:.2f} | {ideal:.1f} | ×{seq / ideal:.2f} | {bound:.1f} (×{seq / bound:.2f}) | "
                   f"{r['mb'] / par * 1e3:,.0f} | "
                   f"{median(r['cpu']):.2f} |")
    return "\n".join(out)


def breakdown_table(steps: list[tuple[str, bool, float]], rounds: int) -> str:
    total = sum(ms for _, _, ms in steps)
    held = sum(ms for _, free, ms in steps if not free)
    out = [f"#### What one pass over the 8 files costs in one thread (warm cache; lowest of {rounds} rounds)", "",
           "| step | ms for all 8 files | share |", "|---|---:|---:|"]
    out += [f"| {label} | {ms:.1f} | {ms / total * 100:.0f} % |" for label, _, ms in steps]
    out += ["", f"GIL held for {held:.1f} of {total:.1f} ms ({held / total * 100:.0f} %): with unlimited CPUs "
                f"the 8 reads cannot beat {held:.1f} ms (×{total / held:.1f} over one thread)."]
    return "\n".join(out)


# --- 2. grep_files over a 10,000-file tree ---------------------------------------------------------

LITERAL = "FIXME(bench)"
REGEX = r"def \w+_handler\("
NEVER = "ZQXJ_NEVER_HERE"
GITIGNORE = "build/\nnode_modules/\n*.log\n"
NESTED = "pkg03"  # holds a .gitignore of its own: generated/


def make_tree(root: Path, n_files: int) -> dict:
    """n_files files (10,000 by default) in nested folders; returns what a search should see."""
    rng = random.Random(42)
    pool = line_pool(43)
    pkgs = [f"pkg{i:02d}" for i in range(24)]
    subs = ("core", "util", "api", "io", "model", "view", "tests", "net", "db", "cli")
    folders: list[tuple[str, bool]] = []  # (relative folder, ignored)
    for pkg in pkgs:
        folders.append((f"src/{pkg}", False))
        for _ in range(rng.randint(3, 8)):
            depth = rng.randint(1, 3)
            folders.append(("/".join([f"src/{pkg}", *rng.sample(subs, depth)]), False))
    folders = list(dict.fromkeys(folders))
    folders += [(f"src/{NESTED}/generated", True), (f"src/{NESTED}/generated/proto", True)]
    folders += [(f"build/lib/{p}", True) for p in pkgs[:6]]
    folders += [(f"node_modules/{m}/dist", True) for m in ("left-pad", "lodash", "react", "zod")]
    folders += [("docs", False), ("docs/guide", False), ("tests", False), ("tests/unit", False)]
    root.mkdir(parents=True, exist_ok=True)
    (root / ".gitignore").write_text(GITIGNORE)
    (root / f"src/{NESTED}").mkdir(parents=True, exist_ok=True)
    (root / f"src/{NESTED}/.gitignore").write_text("generated/\n")
    want = {"files": 2, "bytes": len(GITIGNORE) + len("generated/\n"), "all_files": 2,
            "all_bytes": len(GITIGNORE) + len("generated/\n"), "literal": 0, "regex": 0,
            "literal_all": 0, "py": 0, "py_literal": 0}
    exts = (".py", ".py", ".py", ".ts", ".md", ".txt", ".json", ".log")
    made = 2
    for i in range(n_files - made):
        folder, ignored = folders[rng.randrange(len(folders))]
        ext = exts[rng.randrange(len(exts))]
        ignored = ignored or ext == ".log"
        size = int(1024 * 20 ** rng.random())  # log-uniform, 1-20 KiB
        data = text_bytes(rng, pool, size)
        lines = data.decode().split("\n")[:-1]
        lit = rng.random() < 0.006
        rx = rng.random() < 0.01
        if lit:
            lines.insert(rng.randrange(len(lines) + 1), f"    # {LITERAL}: handle the empty case")
        if rx:
            lines.insert(rng.randrange(len(lines) + 1), f"def on_{rng.choice(_WORDS)}_handler(event, ctx):")
        data = ("\n".join(lines) + "\n").encode()
        path = root / folder / f"f{i:05d}{ext}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        want["all_files"] += 1
        want["all_bytes"] += len(data)
        want["literal_all"] += lit
        if not ignored:
            want["files"] += 1
            want["bytes"] += len(data)
            want["literal"] += lit
            want["regex"] += rx
            if ext == ".py":
                want["py"] += 1
                want["py_literal"] += lit
    want["folders"] = sum(1 for _ in os.walk(root))
    return want


def grep_cases(want: dict) -> list[dict]:
    return [
        dict(label=f"literal `{LITERAL}`", args=GrepArgs(re.escape(LITERAL), max_matches=1000),
             grep=["-F", LITERAL], matches=want["literal"], files=want["files"], bytes=want["bytes"]),
        dict(label=f"regex `{REGEX}`", args=GrepArgs(REGEX, max_matches=1000),
             grep=["-P", REGEX], matches=want["regex"], files=want["files"], bytes=want["bytes"]),
        dict(label=f"no match `{NEVER}`", args=GrepArgs(NEVER, max_matches=1000),
             grep=["-F", NEVER], matches=0, files=want["files"], bytes=want["bytes"]),
        dict(label="no match, `include_ignored: true` (every file)",
             args=GrepArgs(NEVER, include_ignored=True, max_matches=1000),
             grep=["-F", NEVER], all=True, matches=0, files=want["all_files"], bytes=want["all_bytes"]),
        dict(label="literal, `glob: \"*.py\"`", args=GrepArgs(re.escape(LITERAL), glob="*.py", max_matches=1000),
             grep=["-F", "--include=*.py", LITERAL], matches=want["py_literal"], files=want["py"],
             bytes=None),
    ]


def grep_ref(root: Path, case: dict) -> tuple[float, int] | None:
    exe = shutil.which("grep")
    if not exe:
        return None
    excludes = [] if case.get("all") else ["--exclude-dir=build", "--exclude-dir=node_modules",
                                             "--exclude-dir=generated", "--exclude=*.log"]
    includes = [a for a in case["grep"] if a.startswith("--include")]  # first, or other names pass (grep(1))
    cmd = [exe, "-rn", *includes, *excludes, *[a for a in case["grep"] if a not in includes], "."]
    t0 = time.perf_counter_ns()
    proc = subprocess.run(cmd, cwd=root, capture_output=True, env={**os.environ, "LC_ALL": "C"})
    ms = (time.perf_counter_ns() - t0) / 1e6
    assert proc.returncode in (0, 1), proc.stderr
    return ms, len(proc.stdout.splitlines())


def python_loop(root: Path, case: dict) -> tuple[float, int]:
    """The floor for pure Python: os.walk, read, decode, split, rx.search per line; no sandbox."""
    rx = re.compile(case["args"].pattern)
    skip_dirs = set() if case.get("all") else {"build", "node_modules", "generated"}
    py_only = case["args"].glob == "*.py"
    t0 = time.perf_counter_ns()
    hits = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in skip_dirs)
        for name in sorted(names):
            if (not case.get("all") and name.endswith(".log")) or (py_only and not name.endswith(".py")):
                continue
            with open(os.path.join(folder, name), "rb") as f:
                data = f.read()
            for n, line in enumerate(data.decode("utf-8", "replace").split("\n"), 1):
                if rx.search(line):
                    hits.append(f"{name}:{n}:{line}")
    return (time.perf_counter_ns() - t0) / 1e6, len(hits)


def count_matches(text: str) -> int:
    if text.startswith("no matches"):
        return 0
    return sum(1 for line in text.split("\n") if re.match(r"[^\n]*?:\d+:", line) and not line.startswith("["))


async def run_grep(session: ToolSession, args: GrepArgs) -> tuple[float, float, str]:
    """Wall ms, CPU ms of the process (the worker thread does the work; the trio thread waits), output."""
    ctx = ToolContext(agent=AGENT, call_id="g", session=session)
    c0 = time.process_time_ns()
    t0 = time.perf_counter_ns()
    out = await grep_files(args, ctx)
    return (time.perf_counter_ns() - t0) / 1e6, (time.process_time_ns() - c0) / 1e6, out


def stages(session: ToolSession, rounds: int) -> list[tuple[str, float]]:
    """Time the parts of grep_files (no-match pattern) through its private helpers, main thread."""
    rx = re.compile(NEVER)

    def walk_only():
        with open_checked(session, ".", "folder") as top:
            return sum(len(fs) for _, _, _, fs in walk(session, top))

    def with_ignores():
        with open_checked(session, ".", "folder") as top:
            return sum(1 for _ in search._files(session, top, False))

    def with_read():
        n = 0
        with open_checked(session, ".", "folder") as top:
            for folder, fd, name in search._files(session, top, False):
                opened = files.open_entry(fd, name)
                try:
                    n += len(files.read_fd(name, opened[0], search.GREP_FILE_BYTES))
                finally:
                    os.close(opened[0])
        return n

    def with_shown():
        n = 0
        with open_checked(session, ".", "folder") as top:
            for folder, fd, name in search._files(session, top, False):
                opened = files.open_entry(fd, name)
                try:
                    data = files.read_fd(name, opened[0], search.GREP_FILE_BYTES)
                finally:
                    os.close(opened[0])
                n += len(files.shown(session, folder / name)) + len(data)
        return n

    def full():
        return files._grep(session, GrepArgs(NEVER, max_matches=1000))

    def match_only():  # decode + split + search of the same bytes, already in memory
        datas = []
        with open_checked(session, ".", "folder") as top:
            for folder, fd, name in search._files(session, top, False):
                opened = files.open_entry(fd, name)
                try:
                    datas.append(files.read_fd(name, opened[0], search.GREP_FILE_BYTES))
                finally:
                    os.close(opened[0])
        grep = files._Grep(rx, 0, 1000)
        t0 = time.process_time_ns()
        for d in datas:
            grep.file("x", d)
        return (time.process_time_ns() - t0) / 1e6

    def timed(fn) -> float:  # CPU ms, lowest of the rounds: the stages are single-threaded and noise only adds
        best = []
        for _ in range(rounds):
            t0 = time.process_time_ns()
            fn()
            best.append((time.process_time_ns() - t0) / 1e6)
        return min(best)

    return [
        ("sandbox walk (`walk`: scandir, `Rules.refusal` per entry)", timed(walk_only)),
        ("+ .gitignore (`_files`: pathspec per file and folder)", timed(with_ignores)),
        ("+ open and read each file (`open_entry`, `_read_fd`)", timed(with_read)),
        ("+ `shown()` per file (the path as the model sees it)", timed(with_shown)),
        ("full `_grep` body (+ decode, split, `re.search` per line)", timed(full)),
        ("decode, split, search alone (`_Grep.file` over bytes in memory)",
         min(match_only() for _ in range(rounds))),
    ]


async def bench_grep(rounds: int, n_files: int) -> tuple[list[dict], list[tuple[str, float]], dict]:
    with tempfile.TemporaryDirectory(prefix="bench-tools-") as tmp:
        root = Path(tmp) / "ws"
        t0 = time.perf_counter()
        want = make_tree(root, n_files)
        os.sync()  # no writeback of the fresh tree during the timed runs
        want["gen_s"] = time.perf_counter() - t0
        session = ToolSession(root)
        rows = []
        for case in grep_cases(want):
            await run_grep(session, case["args"])  # warm-up (page cache is warm from generation)
            if ref := grep_ref(root, case):
                assert ref[1] == case["matches"], (case["label"], ref[1], case["matches"])
            ours, cpus, refs, loops = [], [], [], []
            for _ in range(rounds):
                ms, cpu, out = await run_grep(session, case["args"])
                assert "stopped" not in out, out[-300:]
                got = count_matches(out)
                assert got == case["matches"], (case["label"], got, case["matches"])
                assert "skipped" not in out, out[-300:]
                ours.append(ms)
                cpus.append(cpu)
                if ref := grep_ref(root, case):
                    refs.append(ref[0])
                ms, hits = python_loop(root, case)
                assert hits == case["matches"], (case["label"], hits)
                loops.append(ms)
            if case["bytes"] is None:  # the glob case: bytes of the .py files actually searched
                case["bytes"] = sum(p.stat().st_size for p in root.rglob("*.py")
                                    if not {"build", "node_modules", "generated"} & set(p.relative_to(root).parts))
            rows.append(dict(case, ours=ours, cpus=cpus, refs=refs, loops=loops))
        stage_rows = stages(session, rounds)
        return rows, stage_rows, want


def grep_table(rows: list[dict], want: dict, rounds: int) -> str:
    out = [f"#### grep_files over {want['all_files']:,} files in {want['folders']:,} folders "
           f"({want['all_bytes'] / 2**20:.1f} MiB; {want['files']:,} files, {want['bytes'] / 2**20:.1f} MiB "
           f"not ignored); median of {rounds} rounds, warm page cache", "",
           "| pattern | files searched | MiB | matches | grep_files ms | (min) | CPU ms | files/s | MiB/s "
           "| `grep -rn` ms | grep_files / grep | Python loop ms |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        ms = median(r["ours"])
        ref = median(r["refs"]) if r["refs"] else None
        mb = r["bytes"] / 2**20
        out.append(f"| {r['label']} | {r['files']:,} | {mb:.1f} | {r['matches']} | {ms:,.0f} | "
                   f"{min(r['ours']):,.0f} | {median(r['cpus']):,.0f} | "
                   f"{r['files'] / ms * 1e3:,.0f} | {mb / ms * 1e3:.1f} | "
                   f"{f'{ref:.0f}' if ref is not None else 'n/a'} | "
                   f"{f'×{ms / ref:.0f}' if ref else 'n/a'} | {median(r['loops']):,.0f} |")
    return "\n".join(out)


def stage_table(rows: list[tuple[str, float]], files_n: int, rounds: int) -> str:
    full = rows[4][1]
    out = [f"#### Where grep_files' time goes (no-match pattern, {files_n:,} files; main thread, cumulative; "
           f"CPU time, lowest of {rounds} rounds)", "",
           "| stage | CPU ms | µs per file | share of the full body |",
           "|---|---:|---:|---:|"]
    for label, ms in rows:
        out.append(f"| {label} | {ms:,.0f} | {ms / files_n * 1e3:.0f} | {ms / full * 100:.0f} % |")
    return "\n".join(out)


def profile(args) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-tools-") as tmp:
        root = Path(tmp) / "ws"
        make_tree(root, args.files)
        session = ToolSession(root)
        files._grep(session, GrepArgs(NEVER))
        prof = cProfile.Profile()
        prof.enable()
        files._grep(session, GrepArgs(NEVER, max_matches=1000))  # the body of grep_files, on this thread
        prof.disable()
    buf = io.StringIO()
    st = pstats.Stats(prof, stream=buf)
    st.sort_stats("tottime").print_stats(args.top)
    st.sort_stats("cumulative").print_stats(args.top)
    print(f"# cProfile: grep_files body, no-match pattern, {args.files:,} files")
    print(buf.getvalue())


def live_members(pgid: int) -> list[int]:
    """Processes of the group still running (zombies wait only for init to reap them)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            state, _, group = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError):
            continue
        if int(group) == pgid and state not in ("Z", "X"):
            found.append(int(entry))
    return found


async def bench_sandbox(rounds: int) -> str:
    jail = backend()
    if why := jail.unavailable():
        return f"<!-- sandbox: skipped, {why} -->"
    with tempfile.TemporaryDirectory(prefix="bench-jail-") as tmp:
        ws = Path(tmp)
        session = ToolSession(ws)

        def jailed(command: str, limits: Limits | None = None, seccomp: int | None = None) -> list[str]:
            c = replace(confinement(session, ws, False, ()), seccomp=seccomp)
            return jail.argv([SHELL, "-c", command], c if limits is None else replace(c, limits=limits))

        async def run_layer(layer: str) -> object:
            if layer == "plain":
                return await run_command("true", cwd=ws, timeout=10)
            if layer == "bare":
                return await run_command(jailed("true", Limits.unlimited()), cwd=ws, timeout=10)
            if layer == "limits":
                return await run_command(jailed("true", Limits()), cwd=ws, timeout=10)
            fds = [fd] if (fd := open_filter(False)) is not None else []
            return await run_command(jailed("true", Limits(), fd), cwd=ws, timeout=10, pass_fds=fds,
                                     limits=Limits() if layer == "cgroup" else None)

        layers = ["plain", "bare", "limits", "filter"] + (["cgroup"] if cgroup.place() else [])
        walls = {k: [] for k in layers}
        cpus = {k: [] for k in layers}  # CPU time of the command's processes: fair on a shared machine
        for i in range(rounds):
            for layer in layers[i % len(layers):] + layers[:i % len(layers)]:
                used = resource.getrusage(resource.RUSAGE_CHILDREN)
                t = time.perf_counter()
                result = await run_layer(layer)
                walls[layer].append(time.perf_counter() - t)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpus[layer].append(after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime)
                assert result.returncode == 0, result.output
        plain, boxed = walls["plain"], walls["cgroup" if "cgroup" in walls else "filter"]
        cpu = {id(plain): cpus["plain"], id(boxed): cpus["cgroup" if "cgroup" in cpus else "filter"]}
        stops = {}
        for label, command in (("sleep", "sleep 1000"), ("shell ignoring TERM", "trap '' TERM; sleep 1000 & wait")):
            took = []
            for _ in range(max(5, rounds // 10)):
                pgids = []
                async with trio.open_nursery() as nursery:
                    async def one():  # as the bash tool runs it: limits, filter, and a cgroup where one is made
                        fds = [fd] if (fd := open_filter(False)) is not None else []
                        await run_command(jailed(command, Limits(), fd), cwd=ws, timeout=100, on_start=pgids.append,
                                          pass_fds=fds, limits=Limits())
                    nursery.start_soon(one)
                    while not pgids:
                        await trio.sleep(0.005)
                    await trio.sleep(0.15)  # running inside its namespaces by now
                    t = time.perf_counter()
                    nursery.cancel_scope.cancel()
                returned = time.perf_counter() - t
                while live_members(pgids[0]):  # SIGKILLed, but the kernel ends a namespace's processes async
                    if time.perf_counter() - t > 5:
                        raise AssertionError("the sandboxed group outlived its stop")
                    await trio.sleep(0.0005)
                took.append((returned, time.perf_counter() - t))
            stops[label] = took
    start = median(boxed) - median(plain)
    cpu_start = statistics.mean(cpu[id(boxed)]) - statistics.mean(cpu[id(plain)])
    lines = ["| measure | median | p90 | rounds |", "|---|---:|---:|---:|",
             f"| `bash -c true`, no sandbox | {median(plain) * 1e3:.2f} ms | "
             f"{statistics.quantiles(plain, n=10)[-1] * 1e3:.2f} ms | {rounds} |",
             f"| `bash -c true` in bubblewrap, as the bash tool runs it | {median(boxed) * 1e3:.2f} ms | "
             f"{statistics.quantiles(boxed, n=10)[-1] * 1e3:.2f} ms | {rounds} |",
             f"| **sandbox start cost per command (wall)** | **{start * 1e3:.2f} ms** | | |",
             f"| sandbox start cost per command (CPU of its processes, mean) | {cpu_start * 1e3:.2f} ms | | |"]
    names = {"bare": "bubblewrap alone (no limits, no filter)", "limits": "+ limits (rlimits prefix, sized tmpfs)",
             "filter": "+ seccomp filter", "cgroup": "+ cgroup (pids, memory)"}
    for layer in layers[1:]:
        lines.append(f"| `bash -c true`, {names[layer]} | {median(walls[layer]) * 1e3:.2f} ms | "
                     f"{statistics.quantiles(walls[layer], n=10)[-1] * 1e3:.2f} ms | {rounds} |")
    for layer, before in zip(layers[2:], layers[1:]):
        lines.append(f"| what {names[layer].lstrip('+ ')} adds (wall, median; CPU of its processes, mean) | "
                     f"{(median(walls[layer]) - median(walls[before])) * 1e3:.2f} ms; "
                     f"{(statistics.mean(cpus[layer]) - statistics.mean(cpus[before])) * 1e3:.2f} ms CPU | | |")
    for label, took in stops.items():
        for what, xs in (("run_command returned", [r for r, _ in took]), ("every process gone", [g for _, g in took])):
            lines.append(f"| stop latency, sandboxed {label}: {what} | {median(xs) * 1e3:.2f} ms | "
                         f"{max(xs) * 1e3:.2f} ms (max) | {len(xs)} |")
    return "\n".join(lines)


async def bench_guard(rounds: int, n_files: int) -> str:
    """What the look at the workspace before and after each command costs (tools/guard.py), on an empty
    workspace and on the grep section's tree of `n_files` files (a git repository with a few protected
    names and build files in it), and the whole bash tool's `true` with the look against the sandboxed
    run alone (its command line built as the tool builds it)."""
    from orchestrator.tools import guard
    from orchestrator.tools.shell import BASH

    lines = ["| workspace | look before + after (median) | p90 | bash tool `true` (median) | "
             "of which the sandboxed run | rounds |", "|---|---:|---:|---:|---:|---:|"]
    with tempfile.TemporaryDirectory(prefix="bench-guard-") as tmp:
        small = Path(tmp) / "small"
        small.mkdir()
        big = Path(tmp) / "tree"
        make_tree(big, n_files)
        subprocess.run(["git", "init", "-q"], cwd=big, check=True)
        for rel in ("Makefile", "pyproject.toml", "src/pkg00/conftest.py", ".vscode/settings.json"):
            (big / rel).parent.mkdir(parents=True, exist_ok=True)
            (big / rel).write_text("x\n")
        for ws, label in ((small, "empty"), (big, f"{n_files:,} files, a repository")):
            session = ToolSession(ws)
            watch = guard.of(session)
            looks, tools, runs = [], [], []
            for _ in range(rounds):
                t = time.perf_counter()
                seen = await trio.to_thread.run_sync(watch.before, "bench", ())
                await trio.to_thread.run_sync(watch.after, "bench", seen, (), ())
                looks.append(time.perf_counter() - t)
                t = time.perf_counter()
                out = await BASH.run(BASH.parse({"command": "true"}), ToolContext(agent="bench", call_id="c",
                                                                                  session=session))
                tools.append(time.perf_counter() - t)
                assert "exit code 0" in str(out), out
                c = confinement(session, ws, False, (), seen.read_only())
                fds = [fd] if (fd := open_filter(False)) is not None else []
                t = time.perf_counter()
                await run_command(backend().argv([SHELL, "-c", "true"], replace(c, limits=Limits(), seccomp=fd)),
                                  cwd=ws, timeout=10, pass_fds=fds, limits=Limits())
                runs.append(time.perf_counter() - t)
            lines.append(f"| {label} | {median(looks) * 1e3:.2f} ms | {statistics.quantiles(looks, n=10)[-1] * 1e3:.2f} ms"
                         f" | {median(tools) * 1e3:.2f} ms | {median(runs) * 1e3:.2f} ms | {rounds} |")
    return "\n".join(lines)


async def main_async(args) -> None:
    print(f"<!-- {machine()}; nproc {os.cpu_count()}; grep: "
          f"{subprocess.run(['grep', '--version'], capture_output=True, text=True).stdout.splitlines()[0]}; "
          f"load average at start {os.getloadavg()[0]:.2f} -->")
    print()
    if args.only in (None, "reads"):
        rows, steps = await bench_reads(args.rounds)
        print(reads_table(rows, args.rounds))
        print()
        print(breakdown_table(steps, args.rounds))
        print()
    if args.only in (None, "grep"):
        rows, stage_rows, want = await bench_grep(args.grep_rounds, args.files)
        print(f"<!-- tree generated in {want['gen_s']:.1f} s -->")
        print()
        print(grep_table(rows, want, args.grep_rounds))
        print()
        print(stage_table(stage_rows, want["files"], args.grep_rounds))
        print()
    if args.only in (None, "sandbox"):
        print(await bench_sandbox(args.sandbox_rounds))
        print()
    if args.only in (None, "sandbox", "guard"):
        print(await bench_guard(max(10, args.sandbox_rounds // 3), args.files))
        print()
    print(f"<!-- load average at end {os.getloadavg()[0]:.2f} (1 min), {os.getloadavg()[1]:.2f} (5 min) -->")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: 3 read rounds, 2,000 files, 1 grep round")
    ap.add_argument("--only", choices=("reads", "grep", "sandbox", "guard"))
    ap.add_argument("--sandbox-rounds", type=int, default=100, help="commands per kind in the sandbox section")
    ap.add_argument("--rounds", type=int, default=0, help="rounds per read medium (default 9; 3 with --quick)")
    ap.add_argument("--grep-rounds", type=int, default=0, help="rounds per grep pattern (default 5; 1 with --quick)")
    ap.add_argument("--files", type=int, default=0, help=f"files in the grep tree (default {TREE_FILES:,}; "
                                                        f"2,000 with --quick)")
    ap.add_argument("--profile", action="store_true", help="cProfile grep_files' body on the tree")
    ap.add_argument("--top", type=int, default=25, help="rows of profile output")
    args = ap.parse_args()
    args.rounds = args.rounds or (3 if args.quick else 9)
    args.grep_rounds = args.grep_rounds or (1 if args.quick else 5)
    args.files = args.files or (2_000 if args.quick else TREE_FILES)
    if args.profile:
        profile(args)
    else:
        trio.run(main_async, args)


if __name__ == "__main__":
    main()

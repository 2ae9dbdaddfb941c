"""The knowledge base's labelled retrieval set (tests/data/kb) and a deterministic offline embedder.
Shared by tests/test_knowledge.py and bench/knowledge.py.

HashEmbedder stands in for an embedding model: hashed bag of words plus character trigrams, with a
small synonym table that plays the part of a real model's sense of meaning, so that paraphrased
questions find their documents somewhat, and exact identifiers blur into their parts (as they do
for real models). Same text, same vector, on any machine.
"""
from __future__ import annotations

import math
import re
import tomllib
import zlib
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np

KB_DIR = Path(__file__).resolve().parent / "data" / "kb"
DOCS = KB_DIR / "docs"

# Each line: the canonical word, then words folded into it (before stemming).
_SYNONYMS = """
disk drive volume storage space
full fill fills filled exhausted
node server servers machine machines box host laptop
leader primary lead leadership master charge
partition shard
database db sqlite embedded
producer sender senders publisher publish
consumer reader readers subscriber subscribers
lag behind trail trails trailing keep
throttle slow backpressure push pushes
key secret secrets
sign signing signature signed
rotate rotated rotation changed change
get fetch retrieve obtain
next following
page batch
item result results items
request call calls requests
service background daemon systemd
fail crash crashes dies died failure
restart bring
restore recover recovered
delete deleted removed remove purged purge erase
mistake accident accidentally mistakenly
metric measurement gauge
vulnerability hole flaw
report disclose
onboard hire onboarding newcomer
setup prepare install
wait pause sleep delay backoff
retry attempt attempts repeated
compact merge merges combine
segment file files
ledger log
evict throws discard drops
job work task tasks jobs
drain stop
shutdown exit exits terminate
outage down unavailable downtime
03 march
breaking break breaks incompatible
3 three
2 two
duplicate twice once
message payload
max maximum big biggest
retain retained retention kept
test tests testing
name naming names
function functions method methods
replay replayed
expire expired old outdated stale
order sequence ordering preserve guarantee
production prod
"""
_STOP = frozenset("""
a an and are as at be by can do does for from how i in is it its of on or the this to what when where which who
why with my me we our you your if into that there their they them then than so it's i'm should would could will
""".split())
_WORD = re.compile(r"[a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _fold_table() -> dict[str, str]:
    table: dict[str, str] = {}
    for line in _SYNONYMS.strip().splitlines():
        canonical, *others = line.split()
        for w in (canonical, *others):
            table.setdefault(w, canonical)
            table.setdefault(_stem(w), canonical)
    return table


_FOLD = _fold_table()


def words(text: str) -> list[str]:
    """Lower-case word tokens; `reconcile_ledger` and `TokenBucket` also give their parts."""
    return [w for line in text.split("\n") for w in _line_words(line)]


@lru_cache(maxsize=500_000)  # no token spans a line: memoised per line, since chunks overlap and repeat lines
def _line_words(line: str) -> tuple[str, ...]:
    out = []
    for w in _WORD.findall(_CAMEL.sub(" ", line).lower()):
        if w not in _STOP:
            out.append(_FOLD.get(w) or _FOLD.get(_stem(w)) or _stem(w))
    return tuple(out)


def _hash(feature: str) -> int:
    return zlib.crc32(feature.encode())


class HashEmbedder:
    """Deterministic, offline; speaks the Embedder protocol. Counts its calls and texts for the tests."""

    def __init__(self, dim: int = 1024, model: str | None = None, trigram_weight: float = 0.15):
        self.dim = dim
        self.model = model or f"test/hash-{dim}"
        self.trigram_weight = trigram_weight
        self.calls = 0
        self.texts = 0
        self._features = lru_cache(maxsize=200_000)(self._word_features)

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        self.texts += len(texts)
        return self.vectors(texts)

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            counts = Counter(words(text))
            if not counts:
                continue
            parts = [self._features(w) for w in counts]
            idx = np.concatenate([p[0] for p in parts])
            weight = np.repeat([1 + math.log(c) for c in counts.values()], [len(p[0]) for p in parts])
            vals = np.concatenate([p[1] for p in parts]) * weight
            out[row] = np.bincount(idx, weights=vals, minlength=self.dim)
        return out

    def _word_features(self, word: str) -> tuple[np.ndarray, np.ndarray]:
        padded = f"#{word}#"
        feats = [("w:" + word, 1.0)] + [("t:" + padded[i:i + 3], self.trigram_weight) for i in range(len(padded) - 2)]
        hashes = [_hash(f) for f, _ in feats]
        idx = np.array([h % self.dim for h in hashes], dtype=np.int64)
        sign = np.array([1.0 if (h >> 20) & 1 else -1.0 for h in hashes])
        return idx, sign * np.array([w for _, w in feats])


# --- the labelled set ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Answer:
    path: str  # relative to DOCS
    line: int


@dataclass(frozen=True)
class Question:
    q: str
    kind: str  # "keyword" | "paraphrase"
    answers: tuple[Answer, ...]

    def found_by(self, path: str, start: int, end: int) -> bool:
        return any(a.path == path and start <= a.line <= end for a in self.answers)


def documents() -> dict[str, str]:
    """Relative path -> text, sorted by path."""
    return {p.relative_to(DOCS).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(DOCS.rglob("*")) if p.is_file()}


def questions() -> list[Question]:
    docs = documents()
    raw = tomllib.loads((KB_DIR / "questions.toml").read_text(encoding="utf-8"))["question"]
    out = []
    for item in raw:
        answers = []
        for ref in item["answers"]:
            path, _, anchor = ref.partition("#")
            lines = docs[path].split("\n")
            line = next(n for n, text in enumerate(lines, 1) if anchor in text)  # StopIteration: a broken label
            answers.append(Answer(path, line))
        out.append(Question(item["q"], item["kind"], tuple(answers)))
    return out


def recall_at(hits_per_question: Sequence[Sequence[tuple[str, int, int]]], qs: Sequence[Question], k: int = 5) -> float:
    """Share of questions with an answer inside one of their first `k` (path, start, end) hits."""
    found = sum(any(q.found_by(*h) for h in hits[:k]) for q, hits in zip(qs, hits_per_question))
    return found / len(qs)

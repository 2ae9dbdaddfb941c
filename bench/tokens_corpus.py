"""The multilingual corpus that token estimation (E6) is calibrated and tested on.

`build()` returns the same samples on every call for a given Faker version and Python stdlib: every
random choice comes from a fixed seed. Sources: the source articles in shared/seeds (Vietnamese,
Thai, Indonesian; skipped when that folder is absent), real Python source, docstrings and the
pydoc topics (English prose) from the running interpreter's stdlib, and Faker's locales for the
other scripts (their real words where a locale has them, names, addresses, jobs and companies
where its `paragraph()` falls back to Latin). Most samples are 2,000 to 8,000 characters long;
a few short ones ride along so the estimate is also exercised on chat-sized messages.

    .venv/bin/python bench/tokens_corpus.py          # one line per kind: samples, characters
"""
from __future__ import annotations

import ast
import base64
import json
import os
import random
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEED = 20240611
# The articles live in the shared folder beside the repository (as CI lays it out too).
SEEDS_DIR = Path(os.environ.get("ORCHESTRATOR_SEEDS") or ROOT.parent / "shared" / "seeds")

# Article file prefix -> language (shared/seeds/README.md).
SEED_LANGS = {"000": "vi", "001": "vi", "002": "vi", "003": "th", "004": "id"}

PY_MODULES = [
    "textwrap.py", "argparse.py", "json/decoder.py", "json/encoder.py", "dataclasses.py", "functools.py",
    "pathlib.py", "shutil.py", "subprocess.py", "tokenize.py", "inspect.py", "typing.py", "asyncio/tasks.py",
    "email/message.py", "http/client.py", "logging/__init__.py", "collections/__init__.py", "difflib.py",
    "calendar.py", "csv.py", "enum.py", "string.py", "heapq.py", "sched.py", "fractions.py", "zipfile.py",
]
DOC_MODULES = [
    "argparse", "asyncio.tasks", "collections", "dataclasses", "difflib", "email.message", "enum", "functools",
    "http.client", "inspect", "json", "logging", "pathlib", "shutil", "subprocess", "textwrap", "typing",
    "zipfile", "tarfile", "pickle", "decimal", "fractions", "statistics", "unittest.case", "doctest",
]
# Emoji beyond Faker's list: ZWJ families, skin tones, flags, keycaps and the symbols chat uses most.
EMOJI_EXTRA = ["😂", "🔥", "👍", "👍🏽", "❤️", "✅", "🎉", "🙏", "😅", "🤔", "👀", "💯", "🚀", "😭", "✨",
               "👨‍👩‍👧", "🧑🏻‍💻", "🏳️‍🌈", "🇻🇳", "🇯🇵", "1️⃣", "☕", "⚠️", "❌", "➡️", "🤷‍♀️", "😍", "🥲"]


@dataclass(frozen=True)
class Sample:
    kind: str  # the language or kind of text, e.g. "ru", "python", "emoji-chat"
    name: str  # where it came from, unique within the corpus
    text: str


def _chunks(text: str, size: int, sep: str = "\n") -> list[str]:
    """Cut at `sep` boundaries into pieces of about `size` characters (the last may be shorter)."""
    out, cur, n = [], [], 0
    for part in text.split(sep):
        cur.append(part)
        n += len(part) + len(sep)
        if n >= size:
            out.append(sep.join(cur))
            cur, n = [], 0
    if cur and n >= size // 2:
        out.append(sep.join(cur))
    return out


def _grow(make, rng: random.Random, sizes=(2200, 3000, 4500, 6500), sep: str = "\n\n") -> str:
    """Concatenate `make()` results until the text reaches one of `sizes` characters."""
    target = rng.choice(sizes)
    parts, n = [], 0
    while n < target:
        parts.append(make())
        n += len(parts[-1]) + len(sep)
    return sep.join(parts)


def _faker(locale: str, offset: int = 0):
    from faker import Faker

    f = Faker(locale)
    f.seed_instance(SEED + offset)
    return f


def _seed_articles() -> list[Sample]:
    out = []
    if not SEEDS_DIR.is_dir():
        return out
    for path in sorted(SEEDS_DIR.glob("0*.txt")):
        lang = SEED_LANGS.get(path.name[:3], "other")
        text = path.read_text(encoding="utf-8")
        for i, chunk in enumerate(_chunks(text, 5000)):
            out.append(Sample(lang, f"seeds/{path.name}#{i}", chunk))
        out.append(Sample(lang, f"seeds/{path.name}", text))  # the whole article, as the issue quotes it
    return out


def _stdlib() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def _python_source() -> list[Sample]:
    out = []
    for rel in PY_MODULES:
        path = _stdlib() / rel
        if path.exists():
            for i, chunk in enumerate(_chunks(path.read_text(encoding="utf-8"), 4000)[:4]):
                out.append(Sample("python", f"stdlib/{rel}#{i}", chunk))
    return out


def _english() -> list[Sample]:
    out = []
    docs = []
    for mod in DOC_MODULES:
        path = _stdlib() / (mod.replace(".", "/") + ".py")
        if not path.exists():
            path = _stdlib() / mod.replace(".", "/") / "__init__.py"
        if not path.exists():
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc and len(doc) > 200:
                    docs.append(doc)
    for i, chunk in enumerate(_chunks("\n\n".join(docs), 3500, sep="\n\n")):
        out.append(Sample("en-prose", f"stdlib docstrings#{i}", chunk))
    try:
        from pydoc_data.topics import topics
    except ImportError:
        topics = {}
    # The pydoc topics are the language reference in reST: prose with code examples.
    text = "\n\n".join(topics[k] for k in sorted(topics))
    for i, chunk in enumerate(_chunks(text, 5000, sep="\n\n")[::6]):
        out.append(Sample("en-docs", f"pydoc topics#{i}", chunk))
    lic = _stdlib() / "LICENSE.txt"
    if lic.exists():
        for i, chunk in enumerate(_chunks(lic.read_text(encoding="utf-8"), 4000, sep="\n\n")[:3]):
            out.append(Sample("en-prose", f"stdlib/LICENSE.txt#{i}", chunk))
    f, rng = _faker("en_US"), random.Random(SEED)
    for i in range(6):
        out.append(Sample("en-faker", f"en_US paragraphs#{i}", _grow(lambda: f.paragraph(nb_sentences=6), rng)))
    return out


def _paragraphs(kind: str, locale: str, n: int) -> list[Sample]:
    f, rng = _faker(locale, n), random.Random(f"{SEED}{locale}")
    return [Sample(kind, f"{locale} paragraphs#{i}", _grow(lambda: f.paragraph(nb_sentences=5), rng))
            for i in range(n)]


def _directory(kind: str, locale: str, n: int, template: str) -> list[Sample]:
    """Where `paragraph()` falls back to Latin: sentences built from the locale's names and places."""
    f, rng = _faker(locale, n), random.Random(f"{SEED}{locale}dir")

    def line() -> str:
        return template.format(name=f.name(), job=f.job(), company=f.company(), city=f.city(),
                               address=f.address().replace("\n", ", "), street=f.street_name(),
                               phrase=f.catch_phrase(), day=f.day_of_week(), month=f.month_name(),
                               country=f.country(), n=rng.randint(2, 90))

    return [Sample(kind, f"{locale} directory#{i}", _grow(line, rng, sep="\n")) for i in range(n)]


def _json(n: int) -> list[Sample]:
    out = []
    rng = random.Random(f"{SEED}json")
    for locale in ("en_US", "ru_RU", "zh_CN", "ja_JP", "vi_VN"):
        f = _faker(locale, 7)

        def record() -> dict:
            return {"id": f.uuid4(), "name": f.name(), "email": f.email(), "address": f.address(),
                    "created": f.iso8601(), "score": round(rng.uniform(0, 100), 3), "active": rng.random() < .5,
                    "tags": [f.word() for _ in range(rng.randint(0, 4))],
                    "orders": [{"sku": f.bothify("??-#####"), "qty": rng.randint(1, 9),
                                "price": round(rng.uniform(1, 500), 2)} for _ in range(rng.randint(0, 3))],
                    "note": f.sentence()}

        for i in range(n):
            data = [record() for _ in range(rng.randint(4, 12))]
            pretty = json.dumps(data, indent=2, ensure_ascii=False)
            out.append(Sample("json", f"{locale} json indent=2#{i}", pretty))
            if i % 2 == 0:
                out.append(Sample("json-compact", f"{locale} json compact#{i}",
                                  json.dumps(data, ensure_ascii=False, separators=(",", ":"))))
            if locale != "en_US" and i == 0:  # \uXXXX escapes, as many serializers write them
                out.append(Sample("json-ascii", f"{locale} json ensure_ascii#{i}", json.dumps(data, indent=4)))
    return out


def _logs(n: int) -> list[Sample]:
    f, rng = _faker("en_US", 11), random.Random(f"{SEED}logs")
    levels = ["INFO", "DEBUG", "WARN", "ERROR"]

    def line() -> str:
        pick = rng.random()
        if pick < 0.5:
            return (f"{f.iso8601()}Z {rng.choice(levels)} [worker-{rng.randint(1, 16)}] {f.http_method()} "
                    f"{f.uri_path()} status={rng.choice([200, 201, 204, 400, 404, 500])} "
                    f"dur={rng.uniform(0.1, 900):.1f}ms req={f.uuid4()} ip={f.ipv4()}")
        if pick < 0.7:
            return f"{f.sha256()[:rng.choice([7, 12, 40, 64])]}  {f.file_path(depth=rng.randint(1, 4))}"
        if pick < 0.85:
            return (f"  File \"{f.file_path(depth=3, extension='py')}\", line {rng.randint(1, 3000)}, "
                    f"in {f.word()}_{f.word()}")
        return f"{f.user_name()}@{f.hostname()}:~$ {rng.choice(['ls -la', 'git log --oneline', 'pytest -q'])}"

    out = [Sample("logs", f"logs#{i}", _grow(line, rng, sep="\n")) for i in range(n)]
    # Opaque blobs that tool results carry: base64 and hex dumps.
    for i in range(2):
        blob = rng.randbytes(rng.choice([1800, 3000]))
        out.append(Sample("base64", f"base64#{i}", base64.encodebytes(blob).decode()))
        out.append(Sample("hex", f"hex#{i}", blob.hex(" ", 2)))
    return out


def _emoji_chat(n: int) -> list[Sample]:
    out = []
    for locale in ("en_US", "en_US", "vi_VN", "ru_RU", "ja_JP"):
        f, rng = _faker(locale, 13 + len(out)), random.Random(f"{SEED}emoji{len(out)}")
        names = [f.first_name() for _ in range(5)]
        pool = EMOJI_EXTRA + [f.emoji() for _ in range(30)]

        def line() -> str:
            emo = "".join(rng.choice(pool) for _ in range(rng.choice([0, 1, 1, 2, 3, 5])))
            if rng.random() < 0.15:
                return f"{rng.choice(names)}: {emo or '👍'}"
            return f"{rng.choice(names)}: {f.sentence(nb_words=rng.randint(3, 14))} {emo}".rstrip()

        for i in range(n):
            out.append(Sample("emoji-chat", f"{locale} chat#{len(out)}", _grow(line, rng, sep="\n")))
    return out


def _mixed(samples: list[Sample], n: int) -> list[Sample]:
    """Markdown-ish messages that switch language and kind: prose, a code block, a JSON result."""
    rng = random.Random(f"{SEED}mixed")
    pool = [s for s in samples if s.kind not in ("base64", "hex") and len(s.text) >= 2000]
    out = []
    for i in range(n):
        parts = []
        for _ in range(rng.randint(3, 6)):
            s = rng.choice(pool)
            start = rng.randrange(0, len(s.text) - 600)
            piece = s.text[start:start + rng.randint(300, 900)]
            parts.append(f"```\n{piece}\n```" if s.kind in ("python", "json") else piece)
        out.append(Sample("mixed", f"mixed#{i}", "\n\n".join(parts)))
    return out


def _mixed_languages(samples: list[Sample], n: int) -> list[Sample]:
    """English paragraphs alternating with another language's, as a conversation about the seeds goes."""
    rng = random.Random(f"{SEED}mixlang")
    english = [s for s in samples if s.kind in ("en-prose", "python") and len(s.text) >= 2000]
    other = [s for s in samples if s.kind in ("id", "latin-other", "vi", "lorem") and len(s.text) >= 2000]
    out = []
    for i in range(n):
        parts = []
        for j in range(rng.randint(3, 6)):
            s = rng.choice(other if j % 2 else english)
            start = rng.randrange(0, len(s.text) - 1600)
            parts.append(s.text[start:start + rng.randint(500, 1500)])
        out.append(Sample("mixed-lang", f"mixed-lang#{i}", "\n\n".join(parts)))
    return out


def _short(samples: list[Sample]) -> list[Sample]:
    """Chat-sized slices (under 2,000 characters): not held to the accuracy band, only to sanity."""
    rng = random.Random(f"{SEED}short")
    out = []
    for s in samples[::7]:
        start = rng.randrange(0, max(1, len(s.text) - 400))
        out.append(Sample(s.kind, f"{s.name}[short]", s.text[start:start + rng.choice([20, 80, 300, 1200])]))
    return out


def build() -> list[Sample]:
    samples = _seed_articles() + _english() + _python_source() + _json(4) + _logs(6) + _emoji_chat(3)
    samples += _paragraphs("vi", "vi_VN", 4) + _paragraphs("th", "th_TH", 4)
    samples += _paragraphs("ru", "ru_RU", 6) + _paragraphs("uk", "uk_UA", 3)
    samples += _paragraphs("zh", "zh_CN", 5) + _paragraphs("zh", "zh_TW", 3) + _paragraphs("ja", "ja_JP", 6)
    samples += _paragraphs("ar", "ar_AA", 5) + _paragraphs("fa", "fa_IR", 3) + _paragraphs("he", "he_IL", 3)
    samples += _paragraphs("el", "el_GR", 4) + _paragraphs("bn", "bn_BD", 3) + _paragraphs("hy", "hy_AM", 2)
    for locale in ("de_DE", "fr_FR", "es_ES", "it_IT", "nl_NL", "da_DK", "pl_PL", "cs_CZ", "az_AZ", "tl_PH"):
        samples += _paragraphs("latin-other", locale, 2)
    samples += _paragraphs("lorem", "la", 2)
    samples += _directory("ko", "ko_KR", 6, "{name}님은 {company}에서 {job}(으)로 {n}년째 일합니다. "
                          "주소는 {address}입니다. {phrase}. 다음 회의는 {month} {day}입니다.")
    samples += _directory("hi", "hi_IN", 6, "{name} {city} में रहते हैं और {n} साल से {street} पर काम करते हैं। "
                          "उनका पता {address} है। वे {month} में {country} जाएँगे, शायद {day} को।")
    samples += _directory("hi", "ne_NP", 2, "{name} {city} मा बस्छन्। ठेगाना: {address}। {country}, {street}।")
    samples += _directory("ka", "ka_GE", 2, "{name} — {job}, {city}, {street}. {country}. {day}, {month}.")
    samples += _mixed(samples, 12) + _mixed_languages(samples, 12)
    return samples + _short(samples)


if __name__ == "__main__":
    from collections import Counter

    corpus = build()
    count, chars = Counter(), Counter()
    for s in corpus:
        count[s.kind] += 1
        chars[s.kind] += len(s.text)
    for kind in sorted(count):
        print(f"{kind:12} {count[kind]:4} samples {chars[kind]:9,} chars")
    print(f"{'total':12} {len(corpus):4} samples {sum(chars.values()):9,} chars", file=sys.stderr)

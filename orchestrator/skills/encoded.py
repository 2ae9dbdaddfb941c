"""Encoded and binary content in a skill, and the lines of its own text that ask to decode, apply or run it:
what would then be followed or run is hidden from the scanner and from the user, so the skill is blocked.

Inert media (an image, a font) may be bundled freely; asked to be decoded and acted on, it is blocked too.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from orchestrator.memory import lexicon
from orchestrator.skills.problems import Problem

Kind = Literal["text", "encoded", "media", "opaque"]

# An image or a font is media only when its bytes are what its name says: a "logo.png" holding anything
# else is an opaque binary.
MEDIA = {
    ".png": (b"\x89PNG\r\n\x1a\n",), ".jpg": (b"\xff\xd8\xff",), ".jpeg": (b"\xff\xd8\xff",),
    ".gif": (b"GIF87a", b"GIF89a"), ".webp": (b"RIFF",), ".bmp": (b"BM",), ".ico": (b"\x00\x00\x01\x00",),
    ".tif": (b"II*\x00", b"MM\x00*"), ".tiff": (b"II*\x00", b"MM\x00*"),
    ".ttf": (b"\x00\x01\x00\x00", b"true"), ".otf": (b"OTTO",), ".woff": (b"wOFF",), ".woff2": (b"wOF2",),
    ".ttc": (b"ttcf",),
}
ENCODED_SUFFIXES = frozenset({".b64", ".base64", ".hex", ".enc", ".uu", ".uue", ".asc"})
_ALPHABET = re.compile(r"[A-Za-z0-9+/=_-]+")
_HEXLINE = re.compile(r"(?:[0-9A-Fa-f]{2}[\s:]?){20,}")
_DATA_URI = re.compile(r"data:[\w/+.-]*(?:;[\w=.-]+)*;base64,[A-Za-z0-9+/=]{16,}")
_RUN = re.compile(r"(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]{40,}={0,2}(?![A-Za-z0-9+/=])")
LONG_LINE = 1000  # a line this long in the base64 or hex alphabet is a blob, whatever the file is called

# Beyond the scanner's words (16 languages, less the bare name of an encoding, which only says what a file
# is): the tools that decode or decrypt, those that unpack archives, and ways to run text.
_DECODE_EXTRA = ("b64decode", "atob", "fromhex", "unhexlify", "uudecode", "decrypt", "decipher", "deobfuscat")
_UNPACK = ("unzip", "untar", "tar x", "gunzip", "unpack", "extract", "decompress", "inflate")
# words match as prefixes ("decod" is "decoded" too), so eval and exec are written as they are used
_ACT_EXTRA = ("exec ", "exec(", "eval ", "eval(", "source ", "invoke", "launch", "interpret", "chmod +x", "| sh",
              "|sh", "| bash", "|bash", "| python", "pipe it")
# Decoding and running in one command: nothing of what runs is ever written down to be read.
_DECODE_CMD = re.compile(r"base64\s+(?:-\w*d\w*|--decode)|b64decode|\batob\s*\(|xxd\s+-r|fromhex|unhexlify"
                         r"|uudecode|openssl\s+(?:enc\s+|base64\s+)\S*.*?-d\b|codecs\.decode|Buffer\.from\([^)]*"
                         r"['\"](?:base64|hex)['\"]", re.I)
_EXEC_CMD = re.compile(r"\|\s*(?:sudo\s+)?(?:[\w./-]*/)?(?:ba|z|da|k|c|tc|fi)?sh\b|\|\s*(?:[\w./-]*/)?"
                       r"(?:python[\d.]*|perl|ruby|node|php)\b|\beval\b|\bexec\b|\bsource\s+<\(|(?:^|\s)\.\s+<\("
                       r"|\bFunction\s*\(|\b(?:ba|z)?sh\s+-c\b", re.I)


@dataclass(frozen=True)
class Asset:
    """A bundled file the model could not read as plain text: encoded text, media or another binary."""
    path: Path
    rel: str  # relative to the skill's folder
    kind: Kind

    @property
    def what(self) -> str:
        return {"encoded": "an encoded file", "media": "an image or font", "opaque": "a binary file"}[self.kind]


def kind_of(rel: str, head: bytes, text: str | None) -> Kind:
    """What a bundled file is, from its name, its first bytes and its text (None: not valid UTF-8)."""
    suffix = Path(rel).suffix.lower()
    if suffix in MEDIA and head.startswith(MEDIA[suffix]) and (suffix != ".webp" or head[8:12] == b"WEBP"):
        return "media"
    if b"\0" in head:
        return "opaque"
    if text is None or suffix in ENCODED_SUFFIXES or _is_blob(text):
        return "encoded"  # files with bytes that are not text count here: asked to decode them, it is blocked
    return "text"


def _is_blob(text: str) -> bool:
    """One encoded run (wrapped or not), a line of one too long to be prose, or lines of base64 or hex."""
    joined = "".join(text.split())
    if len(joined) >= 64 and _ALPHABET.fullmatch(joined) and not joined.isalpha():
        return True
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if any(len(ln) >= LONG_LINE and _mostly_encoded(ln) for ln in lines):
        return True
    wrapped = [ln for ln in lines if len(ln) >= 40 and (_ALPHABET.fullmatch(ln) or _HEXLINE.fullmatch(ln))]
    return len(wrapped) >= 4 and len(wrapped) >= 0.8 * len(lines)


def _mostly_encoded(line: str) -> bool:
    return sum(len(m) for m in _ALPHABET.findall(line)) >= 0.9 * len(line) and " " not in line[:200]


def inline_blobs(text: str) -> bool:
    """Does the text carry encoded content of its own: a data: URI, or a long run of base64?"""
    if _DATA_URI.search(text):
        return True
    for m in _RUN.finditer(text):
        token = m.group()
        # a path or an identifier is not base64: real base64 mixes cases and digits, with few slashes
        if (re.search(r"[a-z]", token) and re.search(r"[A-Z]", token) and re.search(r"\d", token)
                and token.count("/") <= max(2, len(token) // 32)):
            return True
    return False


def _fold(text: str) -> str:
    if text.isascii():
        return text.lower()
    return "".join(c for c in unicodedata.normalize("NFKD", text.lower()) if not unicodedata.combining(c))


@cache
def _words(group: str) -> re.Pattern:
    group_words = {"decode": (*(w for w in lexicon.DECODE if w != "base64"), *_DECODE_EXTRA), "unpack": _UNPACK,
                   "act": (*lexicon.ACT_ON, *_ACT_EXTRA)}[group]
    words = sorted({_fold(w) for w in group_words}, key=len, reverse=True)
    # a word of the Latin script starts at a word's start; scripts without spaces match anywhere
    latin = [re.escape(w) for w in words if w[0].isascii() and w[0].isalnum()]
    other = [re.escape(w) for w in words if not (w[0].isascii() and w[0].isalnum())]
    return re.compile("|".join([rf"(?<![a-z0-9])(?:{'|'.join(latin)})", *other]))


# what every decoding command holds: the regex runs only on text that has one of them
_DECODE_TOOLS = ("base64", "b64decode", "atob", "xxd", "fromhex", "unhexlify", "uudecode", "openssl", "codecs",
                 "buffer.from")


def _decodes(text: str) -> bool:
    lower = text.lower()
    return any(t in lower for t in _DECODE_TOOLS) and _DECODE_CMD.search(text) is not None


def _asks(text: str, *groups: str) -> bool:
    """Does the text hold a word of each group? "decode" also counts a decoding command (`base64 -d`)."""
    folded = _fold(text)
    return all(_words(g).search(folded) or (g == "decode" and _decodes(text)) for g in groups)


_ANY_ASK = ("decode", "unpack", "act")


def _naming(asset: Asset) -> tuple[list[str], re.Pattern]:
    """The words a line names the asset by (its path, its file name when it has a suffix, the folder it sits
    in: "decode what is in assets/"), and the pattern that checks they stand on their own."""
    rel = Path(asset.rel)
    words, ways = [asset.rel], [re.escape(asset.rel)]
    if "." in rel.name:
        words.append(rel.name)
        ways.append(rf"(?<![\w.-]){re.escape(rel.name)}(?![\w-])")
    if rel.parent.as_posix() != ".":
        words.append(rel.parent.as_posix())
        ways.append(rf"(?<![\w./-]){re.escape(rel.parent.as_posix())}/?(?![\w./-])")
    return words, re.compile("|".join(ways))


def check(folder: Path, texts: list[tuple[Path, str]], assets: list[Asset]) -> list[Problem]:
    """The lines of `texts` (SKILL.md and every bundled text, with their paths) that ask to decode or run
    encoded or binary content; each a blocking Problem at its file and line."""
    out: list[Problem] = []
    holds_encoded = [a.rel for a in assets if a.kind == "encoded"]
    holds_encoded += [p.relative_to(folder).as_posix() for p, t in texts if inline_blobs(t)]
    namings = [(asset, *_naming(asset)) for asset in assets]
    # plain words first, as one alternation: most lines name no asset, and the exact patterns cost more
    words = sorted({w for _, ws, _ in namings for w in ws}, key=len, reverse=True)
    any_named = re.compile("|".join(map(re.escape, words))) if words else None
    for path, text in texts:
        lines = text.split("\n")
        speaks = _asks(text, "decode")  # most texts never speak of decoding: their lines need no second look
        for n, line in enumerate(lines, 1):
            named = [a for a, _, p in namings if p.search(line)] if any_named and any_named.search(line) else []
            near = "\n".join(lines[max(0, n - 2):n + 1]) if named else ""  # the ask may sit on the line before
            for asset in named:
                media = asset.kind == "media"  # "extract the colours of logo.png" is not an attack
                asked = _asks(near, "decode", "act") if media else any(_asks(near, g) for g in _ANY_ASK)
                if asked:
                    how = "decode and act on" if media else "decode, unpack, apply or run"
                    out.append(Problem(path, n, "blocked", f"asks to {how} {asset.rel}, {asset.what}: what it "
                                                           "holds is hidden from the scanner and from you"))
                    break
            else:
                if not speaks:
                    continue
                if _decodes(line) and _EXEC_CMD.search(line):
                    out.append(Problem(path, n, "blocked", "decodes text and runs it in one step: what runs is "
                                                           "hidden from the scanner and from you"))
                elif holds_encoded and _asks(line, "decode", "act"):
                    out.append(Problem(path, n, "blocked", "asks to decode something and act on it, and the "
                                                           f"skill holds encoded content ({holds_encoded[0]})"))
    return out

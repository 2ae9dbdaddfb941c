"""Which kept memory entries a new write is read with, so an instruction assembled across writes is seen:
a term defined in one entry and used in the next, a sentence split over entries, "X means Y" then "do X".

A write is read joined with the entries it continues (one of the last kept that stops mid-sentence) or
refers to (it uses a term the entry defines or quotes, or names the entry's label: "as in step 1"), and once
more with the terms it uses replaced by their definitions. Entries it neither continues nor refers to are
not read with it: two finished, unrelated notes do not make one instruction. Bounded: a few entries, each
cut to a length, so a write costs a handful of scans at most."""
from __future__ import annotations

import re
from collections.abc import Sequence

from orchestrator.core.patterns import Pattern

LAST = 2  # the entries kept last: a sentence split over writes continues one of them
RELATED = 3  # at most this many entries the write refers to
LONGEST = 600  # characters of an entry read with the write: a definition or half a sentence is short

_QUOTES = "\"'“”‘’«»„‚「」『』《》〈〉"
_QUOTED = Pattern(rf"(?<!\w)[{_QUOTES}]([^{_QUOTES}\n]{{1,40}})[{_QUOTES}](?!\w)")
_TERM = rf"[{_QUOTES}]?([^\s=:{_QUOTES}][^=:\n{_QUOTES}]{{0,28}}?)[{_QUOTES}]?"
_MEANING = rf"[{_QUOTES}]?([^\n]{{2,200}}?)[{_QUOTES}]?\s*(?:[.;。]\s|[.;。]?$)"
# "X = Y", "X := Y" at the start of an entry or of a clause.
_ASSIGNED = Pattern(rf"(?:^|[:;.]\s+){_TERM}\s*(?::=|=>|->|=)\s*{_MEANING}", re.MULTILINE)
# A word that announces a term, then the term and its meaning: "Codeword BLUE: ...", "Alias: mk = ...".
_ANNOUNCED = Pattern(rf"\b(?:alias|aliases|codeword|code word|shortcut|term|word|abbreviation|acronym|keyword|"
                     rf"label|name|mode|rule name|vocabulary|glossary)\s*:?\s+{_TERM}\s*[:=]\s*{_MEANING}",
                     re.IGNORECASE | re.MULTILINE)
# Words that say a term means something, in the languages the scanner reads; what follows is the meaning.
_MEANS = (r"means|meaning|stands for|is short for|refers to|is an alias for|is our word for|is code for|"
          r"significa|quiere decir|quer dizer|veut dire|signifie|bedeutet|hei(?:ss|ß)t|betekent|oznacza|"
          r"означает|значит|означає|значить|anlamına gelir|demek|artinya|berarti|tegese|maana yake|ina maana|"
          r"ibig sabihin|nghĩa là|có nghĩa là|का मतलब|का अर्थ|मतलब|یعنی|يعني|معناه|تعني|মানে|ਦਾ ਮਤਲਬ|म्हणजे|"
          r"એટલે|అంటే|என்றால்|ಅಂದರೆ|ማለት|túmọ̀ sí|yana nufin|的意思是|意思是|指的是|是指|とは|という意味|이란|란|뜻은|"
          r"หมายถึง")
_DEFINED = Pattern(rf"(?:^|[\s:(]){_TERM}\s*[,:]?\s*(?:{_MEANS})\s*[:：,]?\s*{_MEANING}",
                   re.IGNORECASE | re.MULTILINE)
_LET = Pattern(rf"\b(?:let|define|call)\s+[{_QUOTES}]?(\w[\w-]{{0,30}})[{_QUOTES}]?\s+(?:be|as|stand for|mean|"
               rf"refer to|=)\s+{_MEANING}", re.IGNORECASE)
_CALLED = Pattern(r"(?:\bas|\bcall(?:ed)?|\bnamed|\bknown as)\s*$", re.IGNORECASE)
# A part's label: "Part 2:", "Sentence, second half:", "Step 1 of the workflow:", "(cont.)".
_LABEL = Pattern(r"^\s*(?:\(?(?:cont(?:inued)?|\d+\s*/\s*\d+)\.?\)?\s*|[\w][\w ,'’-]{0,31}[:：]\s+)")
_NUMBERED = Pattern(r"^\s*((?:step|part|line|item|note|rule|point|paso|parte|etape|schritt|teil|шаг|часть)\s*\d+)",
                    re.IGNORECASE)
_FINISHED = Pattern(r"[.!?。！？؟।።]['\"”’»)\]]*\s*$")
_NOT_TERMS = frozenset({"the", "a", "an", "it", "this", "that", "note", "glossary", "vocabulary", "remember", "i",
                        "we", "you"})


def readings(text: str, kept: Sequence[str]) -> list[tuple[str, tuple[str, ...]]]:
    """(a reading of `text` with kept entries, the entries in it): each entry the write continues or refers
    to joined with it, then the write with the terms it uses replaced by what entries define them as."""
    kept = [e for e in kept if e and e != text]
    if not kept:
        return []
    folded = text.casefold()
    chosen: list[str] = [e for e in reversed(kept[-LAST:]) if not _FINISHED.search(e[-LONGEST:])]
    definitions: dict[str, tuple[str, str]] = {}
    for entry in reversed(kept):
        terms = _terms(entry[:LONGEST])
        used = [(t, m) for t, m in terms if _uses(folded, t.casefold())]
        label = _NUMBERED.match(entry)
        if used or (label and _uses(folded, " ".join(label.group(1).casefold().split()))):
            if entry not in chosen and len(chosen) < LAST + RELATED:
                chosen.append(entry)
            for term, meaning in used:
                if meaning:
                    definitions.setdefault(term.casefold(), (meaning, entry))
        if len(chosen) >= LAST + RELATED:
            break
    body = _unlabelled(text)
    out: list[tuple[str, tuple[str, ...]]] = [(f"{_unlabelled(entry[-LONGEST:]).rstrip()} {body}", (entry,))
                                             for entry in chosen]
    if definitions:
        substituted = text
        for term, (meaning, _) in definitions.items():
            substituted = _replace(substituted, term, meaning)
        if substituted != text:
            out.append((substituted, tuple(dict.fromkeys(entry for _, entry in definitions.values()))))
    return out


def _unlabelled(text: str) -> str:
    return _LABEL.sub("", text, count=1).strip().removesuffix("...").strip().strip("…")


def _terms(entry: str) -> list[tuple[str, str]]:
    """The terms an entry defines, with their meanings, and the terms it quotes (meaning unknown: "")."""
    found = []
    for pattern in (_ASSIGNED, _ANNOUNCED, _DEFINED, _LET):
        for m in pattern.finditer(entry):
            term, meaning = m.group(1).strip(" \t'\"").strip(), m.group(2).strip()
            if term and meaning and len(term) <= 30 and term.casefold() not in _NOT_TERMS:
                found.append((term, meaning))
    for m in _QUOTED.finditer(entry):
        term = m.group(1).strip()
        before = entry[:m.start()].rstrip()
        if _CALLED.search(before):  # "... as 'the archive'": the quoted term names what comes before it
            meaning = _CALLED.sub("", re.split(r"[.:;]\s", before)[-1]).strip()
            found.append((term, meaning))
        elif term.casefold() not in _NOT_TERMS and len(term) > 1:
            found.append((term, ""))
    return found


def _uses(folded: str, term: str) -> bool:
    if not term:
        return False
    if not term.isascii() or re.search(r"[^\w\s-]", term):
        return term in folded
    return re.search(rf"(?<![\w]){re.escape(term)}(?![\w])", folded) is not None


def _replace(text: str, term: str, meaning: str) -> str:
    if not term.isascii():
        return re.sub(re.escape(term), lambda _: f" {meaning} ", text, flags=re.IGNORECASE)
    return re.sub(rf"(?<![\w]){re.escape(term)}(?![\w])", lambda _: meaning, text, flags=re.IGNORECASE)

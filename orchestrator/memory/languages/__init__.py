"""Each language's word parts for the memory scanner's classes, one module per language (ISO 639-1 code):
PARTS maps a part's name (the names lexicon.py uses, and the parts only these modules define) to stems.

Stems are written "a|b|c". As in lexicon.py a stem matches at the start of a word, so inflections may
follow; "$" after a stem ends the word there, and "~" before it lets it start inside a word (languages
that put prefixes or particles before the stem: Swahili verb prefixes, Amharic prepositions)."""
from __future__ import annotations

import importlib
from functools import cache

CODES = ("en", "zh", "hi", "es", "fr", "ar", "bn", "pt", "ru", "ur", "id", "de", "ja", "pa", "mr", "te", "tr",
         "ta", "vi", "ko", "fa", "it", "sw", "jv", "tl", "ha", "th", "gu", "kn", "pl", "uk", "nl", "am", "yo")


@cache
def _parts() -> tuple[dict[str, str], ...]:
    return tuple(importlib.import_module(f"{__name__}.{code}").PARTS for code in CODES)


def split(spec: str) -> list[str]:
    """"a|b$|~c" as the scanner's stems: a trailing space ends a word, "~" is kept for the scanner."""
    stems = []
    for stem in spec.split("|"):
        stem = " ".join(stem.split())
        if stem:
            stems.append(stem[:-1] + " " if stem.endswith("$") else stem)
    return stems


@cache
def stems(part: str) -> tuple[str, ...]:
    """Every language's stems for one part."""
    return tuple(s for parts in _parts() for s in split(parts.get(part, "")))


def language(code: str) -> dict[str, list[str]]:
    """One language's parts, for tests and for reading."""
    return {name: split(spec) for name, spec in importlib.import_module(f"{__name__}.{code}").PARTS.items()}

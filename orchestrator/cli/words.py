"""How the command line counts in words: "1 message", "2 messages", for every count it prints."""
from __future__ import annotations


def count(n: int, noun: str, plural: str = "") -> str:
    """`n` and the noun in the number it takes (`plural` when adding "s" is wrong: entry, entries)."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"

"""The skill catalog in a system prompt: name, description and location of each skill, within a budget.

The budget is 2% of the model's window and at most 8,000 characters. Over it, locations go first, then
descriptions are shortened, then skills are left out; the catalog then says how many, never silently.
"""
from __future__ import annotations

from dataclasses import dataclass

from orchestrator.core.prompts import render
from orchestrator.core.tokens import estimate
from orchestrator.skills.skill import Skill

MAX_CHARS = 8_000
WINDOW_SHARE = 0.02
MIN_DESCRIPTION = 60  # shorter than this, a description no longer tells when to use the skill


@dataclass(frozen=True)
class Listed:
    skill: Skill
    untrusted: bool = False


def budget(window: int) -> tuple[int, int]:
    """(characters, tokens) the catalog may take in a prompt for a model with this window."""
    return MAX_CHARS, max(1, int(window * WINDOW_SHARE))


def _shorten(text: str, limit: int | None) -> str:
    if limit is None or len(text) <= limit:
        return text
    cut = text[:limit - 1].rsplit(" ", 1)[0] if " " in text[:limit - 1] else text[:limit - 1]
    return cut.rstrip(" ,.;:") + "…"


def _line(item: Listed, limit: int | None, locations: bool) -> str:
    from xml.sax.saxutils import quoteattr  # when a skill is shown: it loads urllib.request
    s = item.skill
    attrs = f"name={quoteattr(s.name)}"
    if locations:
        attrs += f" location={quoteattr(str(s.file))}"
    if item.untrusted:
        attrs += ' tier="untrusted"'
    return f"<skill {attrs}>{_shorten(s.description, limit)}</skill>"


def _render(items: list[Listed], limit: int | None, locations: bool, left_out: int) -> str:
    return render("skills_catalog.md.j2", skills=[_line(i, limit, locations) for i in items], left_out=left_out,
                  untrusted=any(i.untrusted for i in items), bare=False)


def catalog(items: list[Listed], window: int) -> str:
    """The catalog block for a system prompt ("" without skills), fitted to `budget(window)`."""
    if not items:
        return ""
    chars, tokens = budget(window)

    def fits(text: str) -> bool:
        return len(text) <= chars and estimate(text) <= tokens

    for locations in (True, False):
        if fits(text := _render(items, None, locations, 0)):
            return text
    longest = max(len(i.skill.description) for i in items)
    lo, hi = MIN_DESCRIPTION, longest  # the longest per-description limit that fits
    if fits(_render(items, lo, False, 0)):
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if fits(_render(items, mid, False, 0)) else (lo, mid - 1)
        return _render(items, lo, False, 0)
    kept = len(items)
    while kept > 0 and not fits(_render(items[:kept], MIN_DESCRIPTION, False, len(items) - kept)):
        kept -= 1
    if kept == 0:  # a window too small for even the list's preamble: one line, still not silent
        return render("skills_catalog.md.j2", skills=[], left_out=len(items), untrusted=False, bare=True)
    return _render(items[:kept], MIN_DESCRIPTION, False, len(items) - kept)

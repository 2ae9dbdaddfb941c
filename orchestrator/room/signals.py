"""What starts a room's self-improvement pass: signals read from the room's events as they happen (a user's
correction, a recovered failure, a long task, a known weakness, a skill the user contradicted), weighted and summed.

The correction phrases are one data table per language; a room's `Signals` only observes events and keeps the sum.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal, cast, get_args

from orchestrator.core.events import CallUsage, Done, Event, MessageEvent, Retry, ToolEnd
from orchestrator.skills.activation import NAME as ACTIVATE

Kind = Literal["correction", "skill_contradicted", "recovery", "long_task", "weakness"]
_KINDS: frozenset[str] = frozenset(get_args(Kind))
_KEPT = 1_000  # signals restored at most: a pass resets them long before

# A user line that corrects the previous answer, per language: (phrase, where). "start": the line begins with it
# (after an @mention); "any": it appears anywhere as whole words. Lower case, straight apostrophes. Short words
# such as "no" count only at the start and followed by a comma, so "no problem" or "no, thanks"-like openings
# are what the table must judge: keep phrases that, in that place, nearly always mean "you got it wrong".
CORRECTIONS: dict[str, tuple[tuple[str, Literal["start", "any"]], ...]] = {
    "en": (("no,", "start"), ("nope", "start"), ("actually,", "start"), ("wrong", "start"),
           ("that's wrong", "any"), ("that is wrong", "any"), ("that's not right", "any"),
           ("that's not what i", "any"), ("not what i asked", "any"), ("not what i meant", "any"),
           ("i said", "any"), ("i meant", "any"), ("you misunderstood", "any"), ("that's incorrect", "any"),
           ("try again", "any")),
    "de": (("nein,", "start"), ("doch,", "start"), ("eigentlich,", "start"), ("das ist falsch", "any"),
           ("das stimmt nicht", "any"), ("nicht das, was ich", "any"), ("ich sagte", "any"),
           ("ich meinte", "any"), ("du hast mich falsch verstanden", "any")),
    "fr": (("non,", "start"), ("en fait,", "start"), ("c'est faux", "any"), ("ce n'est pas ce que j'ai", "any"),
           ("j'ai dit", "any"), ("je voulais dire", "any"), ("tu as mal compris", "any")),
    "es": (("no,", "start"), ("en realidad,", "start"), ("eso está mal", "any"), ("eso no es lo que", "any"),
           ("no es lo que pedí", "any"), ("dije que", "any"), ("quise decir", "any"), ("me entendiste mal", "any")),
}

# Each phrase once, as a pattern over the normalized line: at its start, or between non-word characters.
_PHRASES = sorted({(p, w) for table in CORRECTIONS.values() for p, w in table})
_CORRECTION = re.compile("|".join(
    ("^" if where == "start" else r"(?<!\w)") + re.escape(p) + ("" if not p[-1].isalnum() else r"(?!\w)")
    for p, where in _PHRASES))
_MENTION = re.compile(r"^@[a-z][a-z0-9_-]{0,31}\s*")
_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u00a0": " "})

# A note the memory holds about a known weakness: "weakness: TOPIC — what goes wrong" (or "avoid: TOPIC ...");
# the topic, up to the first dash, semicolon or full stop, is what a line must mention to touch it.
_WEAKNESS = re.compile(r"^\s*(?:known weakness|weakness|avoid|schwäche|faiblesse|debilidad)\s*:\s*(.+)$", re.I)
_TOPIC_END = re.compile(r"\s+[-\u2013\u2014]\s+|[;.:]")


def normalized(text: str) -> str:
    return " ".join(_MENTION.sub("", text.translate(_QUOTES).strip().lower()).split())


def is_correction(text: str) -> bool:
    """Whether a user line reads as correcting the answer before it (the CORRECTIONS table)."""
    return _CORRECTION.search(normalized(text)) is not None


def weaknesses(notes: list[str]) -> list[str]:
    """The topics of the known weaknesses among memory notes, lower case."""
    topics = []
    for entry in notes:
        if m := _WEAKNESS.match(entry.strip().splitlines()[0] if entry.strip() else ""):
            topic = _TOPIC_END.split(m[1], maxsplit=1)[0].strip().lower()
            if len(topic) >= 3:
                topics.append(topic)
    return topics


@dataclass(frozen=True, kw_only=True)
class Weights:
    correction: float = 3.0
    skill_contradicted: float = 2.0
    recovery: float = 2.0
    long_task: float = 1.0
    weakness: float = 2.0


@dataclass(kw_only=True)
class Signals:
    """A room's signals since its last pass. `observe` is subscribed to the room's events; each kind of signal
    counts at most once per user line, so one long line cannot start a pass by itself being long."""

    weights: Weights
    long_task_calls: int = 8
    topics: list[str] = field(default_factory=list)  # known weaknesses (weaknesses())
    total: float = 0.0
    seen: list[Kind] = field(default_factory=list)  # what added to the total, in order
    last_pass: float | None = None  # trio time the room's last pass started
    _line: set[Kind] = field(default_factory=set)  # signals the current line gave already
    _answered = False  # an agent spoke to the user since the last user line
    _skill = False  # a skill was activated in the previous line (or is in this one)
    _troubled = False  # a tool failed or a call was retried in this line
    _calls = 0  # model calls in this line

    def add(self, kind: Kind) -> None:
        if kind in self._line:
            return
        self._line.add(kind)
        self.seen.append(kind)
        self.total += getattr(self.weights, kind)

    def reset(self) -> None:
        self.total, self.seen = 0.0, []

    def saved(self) -> dict[str, Any]:
        """What a restart needs to go on counting: what made the sum (restore adds it up again), and whether the
        next user line follows an answer (and a skill) so that it can correct them."""
        return {"seen": list(self.seen), "answered": self._answered, "skill": self._skill}

    def restore(self, saved: object) -> None:
        """Go on from what `saved` returned, as the room's metadata kept it; anything else there (the store is
        a file others may write) is ignored, and the sum is what the kinds kept would add up to, never a number
        read as it is."""
        if not isinstance(saved, dict) or not isinstance(seen := saved.get("seen"), list):
            return
        kept = [cast(Kind, k) for k in seen[:_KEPT] if isinstance(k, str) and k in _KINDS]
        self.seen = kept
        self.total = sum(getattr(self.weights, k) for k in kept)
        self._answered, self._skill = saved.get("answered") is True, saved.get("skill") is True

    def observe(self, ev: Event) -> None:
        if isinstance(ev, MessageEvent):
            self._message(ev)
        elif isinstance(ev, ToolEnd):
            if ev.is_error:
                self._troubled = True
                self._touches(ev.result)
        elif isinstance(ev, Retry):
            self._troubled = True
        elif isinstance(ev, Done):
            if self._troubled:
                self.add("recovery")
        elif isinstance(ev, CallUsage) and not ev.auxiliary:
            self._calls += 1
            if self._calls >= self.long_task_calls:
                self.add("long_task")

    def _message(self, ev: MessageEvent) -> None:
        if ev.kind == "user" and ev.author == "user":
            corrected = self._answered and is_correction(ev.text)
            skill = self._skill
            self._line, self._answered, self._skill, self._troubled, self._calls = set(), False, False, False, 0
            if corrected:
                self.add("correction")
                if skill:
                    self.add("skill_contradicted")
            self._touches(ev.text)
        elif ev.kind == "text" and ev.author != "user" and "user" in ev.visible_to and ev.text:
            self._answered = True
        elif ev.kind == "tool_call" and ev.calls and any(c.name == ACTIVATE for c in ev.calls):
            self._skill = True

    def _touches(self, text: str) -> None:
        if self.topics:
            low = normalized(text)
            if any(t in low for t in self.topics):
                self.add("weakness")

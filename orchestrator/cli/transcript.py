"""How `run` and `show` print a room's events: the readable transcript for a person, JSON lines for a
script (`--json`), and a reader that may leave early (`| head`).

The transcript shows what the user sees: not the anonymous workers (the commander's hidden hands), the
note a handoff gives its agent, or what a message hidden from the user says; `--all` shows those too, dim.
Text streams live for one agent at a time (parallel agents print whole messages when they land);
the handback marker is held back while streaming so it is never shown.
"""
from __future__ import annotations

import os
import re
import sys
from typing import Callable, TextIO

from orchestrator.cli.words import count
from orchestrator.core.events import (
    EVENT_ENCODER,
    Cancelled, Check, Compaction, Confirm, Done, ErrorEvent, Event, MessageEvent, Retry, State, TaskEvent, TextDeltaEvent,
)
from orchestrator.core.errors import retry_label
from orchestrator.core.visible import displayed
from orchestrator.room.handback import StreamFilter


def json_out(ev: Event) -> None:
    sys.stdout.buffer.write(EVENT_ENCODER.encode(ev) + b"\n")
    sys.stdout.buffer.flush()


def reader_may_leave(sink: Callable[[Event], None]) -> Callable[[Event], None]:
    """`orchestrator run --json | head`: once the reader has gone, the run finishes quietly."""
    def write(ev: Event) -> None:
        try:
            sink(ev)
        except BrokenPipeError:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())

    return write


_ANONYMOUS = re.compile(r"worker(?:-\d+)?")  # the reserved names of anonymous workers (team/schema.py)
# tools whose outcome the transcript already shows: the member's report, its ledger line, the floor line
ASSIGN = frozenset({"dispatch_to", "run_worker", "hand_off_to"})

_COLORS = {"user": "1;32", "commander": "1;35", "room": "2", "worker": "2;36"}
_PALETTE = ["1;34", "1;33", "1;36", "1;31", "1;94", "1;93"]


def _short(value: object, n: int = 60) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= n else text[:n - 1] + "…"


def anonymous(name: str) -> bool:
    """An anonymous worker (`worker`, `worker-2`, ...): what it does is hidden from the user."""
    return bool(_ANONYMOUS.fullmatch(name))


class Printer:
    """A room's events as the user sees them; with `everything`, also what is hidden from the user (dim)."""

    def __init__(self, out: TextIO = sys.stdout, color: bool | None = None, everything: bool = False):
        self.out = out
        self.color = out.isatty() if color is None else color
        self.everything = everything
        self._calls: set[str] = set()  # ids of the tool calls printed, whose results are printed too
        self._handed: set[str] = set()  # agents handed the floor whose task (the handoff's note) is not seen yet
        self._floor: str | None = None  # the floor last printed
        self._streaming: str | None = None  # the one agent whose text streams live
        self._held = ""  # trailing spaces of the stream, printed only if more text follows
        self._filter = StreamFilter()
        self._shown: dict[str, str] = {}  # text of a message in progress already on screen, per agent
        self._palette: dict[str, str] = {}
        self.room: str | None = None  # the room its events came from

    def interrupted(self, db: object = None) -> str:
        """Ctrl-C: a half-streamed line ends first, and the user learns the room was kept and how to see it."""
        self._end_stream()
        if self.room is None:
            return "interrupted"
        show = f"orchestrator show {self.room}" + (f" --db {db}" if db else "")
        return f"interrupted: the room is kept (`{show}` prints it again)"

    def _paint(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def _who(self, name: str) -> str:
        code = _COLORS.get(name) or ("2;36" if name.startswith("worker") else None)
        if code is None:
            code = self._palette.setdefault(name, _PALETTE[len(self._palette) % len(_PALETTE)])
        return self._paint(code, name)

    def _line(self, text: str) -> None:
        self._end_stream()
        print(text, file=self.out, flush=True)

    def _end_stream(self) -> None:
        if self._streaming is not None:
            tail = (self._held + self._filter.flush()).rstrip()
            print(tail, file=self.out, flush=True)
            self._streaming, self._held = None, ""

    def _unseen(self, agent: object) -> bool:
        """An anonymous worker's stream, turn or ledger line, not printed unless everything is."""
        return not self.everything and isinstance(agent, str) and anonymous(agent)

    def __call__(self, ev: Event) -> None:
        ev = displayed(ev)  # agents' text never drives the terminal
        self.room = ev.room or self.room
        if isinstance(ev, (TextDeltaEvent, TaskEvent, Retry, Compaction, Done)) and self._unseen(ev.agent):
            return
        if isinstance(ev, TextDeltaEvent):
            if self._streaming is None and (ev.agent in self._shown or not self._shown):
                self._streaming = ev.agent
                self._filter = StreamFilter()
                lead = "…" if self._shown.get(ev.agent) else ""
                print(f"{self._who(ev.agent)}: {lead}", end="", file=self.out)
            if self._streaming == ev.agent:
                shown = self._filter.feed(ev.text)
                self._shown[ev.agent] = self._shown.get(ev.agent, "") + shown
                # spaces wait for what follows them: a line never ends in spaces (nor before a marker)
                text = self._held + shown
                out = re.sub(r"[ \t]+(?=\n)", "", text.rstrip(" \t"))
                self._held = text[len(text.rstrip(" \t")):]
                print(out, end="", file=self.out, flush=True)
        elif isinstance(ev, MessageEvent):
            self._message(ev)
        elif isinstance(ev, State):
            if ev.floor != self._floor:  # a state that only repeats the floor says nothing new
                self._floor = ev.floor
                self._line(self._paint("2", f"* {ev.floor} has the floor"))
        elif isinstance(ev, TaskEvent):
            self._line(self._paint("2", f"* task {ev.task_id} ({ev.kind}) for {ev.agent}: {ev.status}"))
        elif isinstance(ev, Retry):
            self._line(self._paint("2", f"  ↻ {ev.agent}: {retry_label(ev.reason)}, retry {ev.attempt} in "
                                        f"{ev.delay:.2f}s"))
        elif isinstance(ev, Compaction):
            self._line(self._paint("2", f"  ⇣ {ev.agent}: history compacted {ev.tokens_before} → {ev.tokens_after} tokens"))
        elif isinstance(ev, Confirm):
            self._line(self._paint("1;33", f"? {ev.agent} asks to run something risky ({ev.category}): "
                                           f"{_short(ev.summary, 200)}"))
        elif isinstance(ev, Cancelled):
            self._line(self._paint("1;33", f"■ stopped: {ev.reason}"))
        elif isinstance(ev, ErrorEvent):
            who = f"{ev.agent}: " if isinstance(ev.agent, str) else ""
            self._line(self._paint("1;31", f"! {who}{ev.message}"))
        elif isinstance(ev, Check):
            if ev.ok:
                self._line(self._paint("1;32", "✓ every expectation held"))
            else:
                self._line(self._paint("1;31", "✗ expectations failed:"))
                for f in ev.failures:
                    self._line(self._paint("31", f"  - {f}"))
        elif isinstance(ev, Done) and ev.agent == self._streaming:
            self._end_stream()

    def _message(self, ev: MessageEvent) -> None:
        hidden = "user" not in ev.visible_to or self._handoff_note(ev)
        if ev.kind == "tool_result" and isinstance(ev.call_id, str) and ev.call_id in self._calls:
            # the outcome of a call the user saw; an assignment's shows as its report, ledger or floor line
            hidden = ev.name in ASSIGN and ev.is_error is not True
        if hidden and not self.everything:
            if ev.author == self._streaming:
                self._end_stream()
            self._shown.pop(ev.author, None)
            return
        dim = (lambda s: self._paint("2", s)) if hidden else (lambda s: s)
        if ev.kind in ("text", "tool_call"):
            shown = self._shown.pop(ev.author, "")
            if ev.author == self._streaming:
                self._end_stream()
            elif ev.text and ev.text.startswith(shown) and ev.text != shown:
                rest = ev.text[len(shown):]
                self._line(dim(f"{self._who(ev.author)}: {'…' if shown else ''}{rest}"))
        if ev.kind == "tool_call" and isinstance(ev.calls, list):
            for c in ev.calls:
                self._calls.add(c.call_id)
                if c.name == "hand_off_to":
                    self._handed.add(str(c.input.get("agent")))
                args = ", ".join(f"{k}={_short(v, 40)}" for k, v in c.input.items())
                self._line(self._paint("2", f"  → {ev.author} calls {c.name}({args})"))
        elif ev.kind == "tool_result":
            mark = self._paint("31", "error") if ev.is_error else count(len(ev.text), "char")
            self._line(self._paint("2", f"  ← {ev.name}: {mark}" + (f" {_short(ev.text)}" if ev.is_error else "")))
        elif ev.kind == "user":
            self._line(f"{self._who('user')}: {ev.text}")
        elif ev.kind == "task":
            to = next((v for v in ev.visible_to if v not in ("user", ev.author)), "?")
            self._line(dim(f"{self._who(ev.author)} → {self._who(to)}: {_short(ev.text, 200)}"))
        elif ev.kind in ("notice", "summary"):
            self._line(self._paint("2", f"  ({ev.author}) {ev.text}"))

    def _handoff_note(self, ev: MessageEvent) -> bool:
        """The task a handoff gives its agent: instructions for that agent, which the user sees as the
        hand_off_to call and the floor line."""
        if ev.kind != "task":
            return False
        to = [v for v in ev.visible_to if v not in ("user", ev.author)]
        if to and to[0] in self._handed:
            self._handed.discard(to[0])
            return True
        return False

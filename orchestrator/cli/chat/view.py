"""What the chat shell shows: room events as whole lines above the prompt (`View`), the line an agent
is still writing (for the toolbar), and `Lines`, which writes them without tearing a prompt being drawn.

The handback marker is never shown, hidden messages are dim, anonymous workers fold under the commander.
"""
from __future__ import annotations

import re
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, TextIO

from orchestrator.cli.transcript import ASSIGN, Printer, anonymous
from orchestrator.cli.words import count
from orchestrator.core.events import (
    Cancelled, Compaction, Confirm, Done, ErrorEvent, Event, MessageEvent, Retry, State, TaskEvent,
    TextDeltaEvent,
)
from orchestrator.core.errors import retry_label
from orchestrator.core.visible import displayed
from orchestrator.room.handback import StreamFilter


@dataclass
class _Stream:
    """One agent's message in progress: the handback hold-back, the partial line, what is printed."""

    filter: StreamFilter = field(default_factory=StreamFilter)
    pending: str = ""
    printed: str = ""  # whole lines already printed (with their newlines)
    lines: int = 0


def short(value: object, n: int = 60) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= n else text[:n - 1] + "…"


_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
_PAINTED = re.compile(r"(\x1b\[[0-9;]*m)(.*)\x1b\[0m", re.S)
# what continuation rows are indented under: a speaker's label, a mark, or a table's first column
_LABEL = re.compile(r"\s*(?:└ )?(?:[\w.-]+: |[›⇢▸!?*] |[^ ]+(?: [^ ]+)*? {2,})?")


def width_of(text: str) -> int:
    from prompt_toolkit.utils import get_cwidth

    return get_cwidth(_ESCAPE.sub("", text))


def wrap(line: str, width: int) -> list[str]:
    """A line in rows of at most `width` cells, broken between words (a word longer than a row is cut),
    continuation rows indented under the text after the speaker's label. Colour codes take no room;
    a line painted whole stays painted on every row."""
    if width < 20 or width_of(line) <= width:
        return [line]
    if m := _PAINTED.fullmatch(line):
        return [f"{m.group(1)}{row}\x1b[0m" for row in wrap(m.group(2), width)]
    label = _LABEL.match(_ESCAPE.sub("", line))
    indent = " " * min(width_of(label.group(0)) if label else 0, width // 3)
    rows: list[str] = []
    row, used = "", 0
    for word in re.split(r"(?<= )", line):  # each word keeps the space after it
        size = width_of(word.rstrip(" "))
        if row and used + size > width:
            rows.append(row.rstrip(" "))
            row, used = indent, len(indent)
        while used + size > width:  # a word longer than a whole row
            cut = _fit(word, width - used)
            rows.append(row + cut)
            word, row, used = word[len(cut):], indent, len(indent)
            size = width_of(word.rstrip(" "))
        row += word
        used += width_of(word)
    rows.append(row.rstrip(" "))
    return rows


def _fit(word: str, cells: int) -> str:
    """The longest start of `word` that fits in `cells` (at least one character)."""
    end = 1
    while end < len(word) and width_of(word[:end + 1]) <= cells:
        end += 1
    return word[:end]


def _args(args: dict[str, Any], n: int = 40) -> str:
    return ", ".join(f"{k}={short(v, n)}" for k, v in args.items())


class View(Printer):
    """Room events as whole lines (for printing above the prompt) plus the partial lines in progress.

    It borrows the transcript Printer's colours (`_paint`, `_who`) and keeps its rules: the handback
    marker is never shown, hidden messages are dim; anonymous workers fold under the commander.
    """

    def __init__(self, emit: Callable[[str], None], color: bool):
        super().__init__(out=sys.stdout, color=color)
        self.emit = emit
        self.streams: dict[str, _Stream] = {}
        self.partial: tuple[tuple[str, str], ...] = ()  # (agent, line in progress): read by the toolbar thread
        self.floor = "commander"
        self._handoffs: dict[str, str] = {}  # agent -> the note of a hand_off_to whose task is not shown yet
        self._last: str | None = None  # whose line was printed last (continuation lines are not labelled)

    # formatting helpers
    def dim(self, text: str) -> str:
        return self._paint("2", text)

    def red(self, text: str) -> str:
        return self._paint("1;31", text)

    def yellow(self, text: str) -> str:
        return self._paint("1;33", text)

    def notice(self, text: str) -> None:
        self._out(self.dim(text))

    def _out(self, line: str, speaker: str | None = None) -> None:
        self._last = speaker
        self.emit(line)

    def _text(self, author: str, line: str, first: bool, hidden: bool = False) -> None:
        if anonymous(author):
            self._out(self.dim(f"  └ {author}: {line}".rstrip()), author)
            return
        label = f"{self._who(author)}: " if first or self._last != author else " " * (len(author) + 2)
        text = (label + line).rstrip()
        self._out(self.dim(text) if hidden else text, author)

    def _publish_partial(self) -> None:
        self.partial = tuple((a, s.pending) for a, s in self.streams.items() if s.pending.strip())

    # events
    def __call__(self, ev: Event) -> None:
        ev = displayed(ev)  # agents' text never drives the terminal
        if isinstance(ev, TextDeltaEvent):
            self._delta(ev.agent, ev.text)
        elif isinstance(ev, MessageEvent):
            self.message(ev)
        elif isinstance(ev, State):
            self.floor = ev.floor
            self._out(self._paint("1;2", f"* {ev.floor} has the floor"))
        elif isinstance(ev, TaskEvent):
            self._task(ev)
        elif isinstance(ev, Retry):
            self._reset(ev.agent)
            self.notice(f"  ↻ {ev.agent}: {retry_label(ev.reason)}, retry {ev.attempt} in {ev.delay:.1f}s")
        elif isinstance(ev, Compaction):
            self.notice(f"  ⇣ {ev.agent}: history compacted {ev.tokens_before} → {ev.tokens_after} tokens")
        elif isinstance(ev, Cancelled):
            self._flush_all(" ⋯")
            self._out(self._paint("1;33", f"■ stopped: {ev.reason}"))
        elif isinstance(ev, ErrorEvent):
            agent = ev.agent if isinstance(ev.agent, str) else None
            if agent:
                self._flush(agent, " ⋯")
            self._out(self.red(f"! {agent + ': ' if agent else ''}{ev.message}"))
            if ev.error_class == "connection" and "ollama" in ev.message:
                self.notice("  (is Ollama running? start `ollama serve`, or set OLLAMA_HOST to where it listens)")
        elif isinstance(ev, Confirm):
            self._out(self._paint("1;33", f"? {ev.agent} asks to run something risky ({ev.category}): "
                                          f"{short(ev.summary, 200)}"))
            self._out(self._paint("1;33", "  answer o (this once), r (for this run) or d (deny)"))
        elif isinstance(ev, Done):
            self._flush(ev.agent)
        self._publish_partial()

    def _delta(self, agent: str, text: str) -> None:
        st = self.streams.setdefault(agent, _Stream())
        st.pending += st.filter.feed(text)
        while "\n" in st.pending:
            line, st.pending = st.pending.split("\n", 1)
            self._text(agent, line, first=st.lines == 0)
            st.lines += 1
            st.printed += line + "\n"

    def _reset(self, agent: str) -> None:
        self.streams.pop(agent, None)

    def _flush(self, agent: str, suffix: str = "") -> None:
        """A stream that ends without its message (a stop, an error): show what was written."""
        st = self.streams.pop(agent, None)
        if st is not None:
            rest = st.pending + st.filter.flush()
            if rest.strip():
                self._text(agent, rest + suffix, first=st.lines == 0)

    def _flush_all(self, suffix: str = "") -> None:
        for agent in list(self.streams):
            self._flush(agent, suffix)

    def message(self, ev: MessageEvent) -> None:
        """A committed message: live (after its stream) or replayed from the store."""
        hidden = "user" not in ev.visible_to
        author = ev.author
        if ev.kind in ("text", "tool_call"):
            st = self.streams.pop(author, None)
            text, first = ev.text, True
            # compared before stripping: `printed` keeps the newline that ended its last line
            if st is not None and text.startswith(st.printed):
                text, first = text[len(st.printed):], st.lines == 0
            text = text.rstrip()
            if text:
                for i, line in enumerate(text.split("\n")):
                    self._text(author, line, first=first and i == 0, hidden=hidden)
        if ev.kind == "tool_call" and isinstance(ev.calls, list):
            for c in ev.calls:
                if c.name == "hand_off_to":
                    self._handoffs[str(c.input.get("agent"))] = str(c.input.get("note") or "")
                elif c.name not in ASSIGN:
                    self._tool(author, f"→ {c.name}({_args(c.input)})")
        elif ev.kind == "tool_result":
            name = ev.name if isinstance(ev.name, str) else "tool"
            if ev.is_error is True:
                self._tool(author, self.red(f"← {name} failed: {short(ev.text, 120)}"), dim=False)
            elif name not in ASSIGN:
                self._tool(author, f"← {name}: {count(len(ev.text), 'char')}")
        elif ev.kind == "user":
            self._out(f"{self._who('user')}: {ev.text}", "user")
        elif ev.kind == "task":
            to = [v for v in ev.visible_to if v not in ("user", author)]
            target = to[0] if to else "?"
            if target in self._handoffs:
                note = self._handoffs.pop(target)
                line = f"⇢ {author} hands the floor to {target}" + (f": {short(note, 90)}" if note else "")
            else:
                line = f"⇢ {author} → {target}: {short(ev.text, 90)}"
            self._out(self.dim(f"  └ {line}" if anonymous(target) else f"  {line}"))
        elif ev.kind == "notice" and not hidden:
            self.notice(f"  ({author}) {ev.text}")

    def _tool(self, agent: str, text: str, dim: bool = True) -> None:
        line = f"  └ {agent} {text}" if anonymous(agent) else f"  {agent} {text}"
        self._out(self.dim(line) if dim else line)

    def _task(self, ev: TaskEvent) -> None:
        """Ledger changes; a task's start is already the dispatch line (`⇢ commander → agent: task`)."""
        if ev.status == "running":
            return
        line = f"▸ {ev.agent}: task {ev.task_id} ({ev.kind}) {ev.status}"
        line = f"  └ {line}" if anonymous(ev.agent) else f"  {line}"
        if ev.status == "failed":
            self._out(self.red(line))
        elif ev.status == "cancelled":
            self._out(self._paint("33", line))
        else:
            self._out(self.dim(line))


# --- the shell --------------------------------------------------------------------------------------

class Lines:
    """Whole lines to the terminal, never through a prompt being drawn.

    While a prompt runs, lines go through its `run_in_terminal` (the prompt is erased, the lines
    printed, the prompt redrawn with the typed text intact); otherwise they are written at once. One
    lock orders the two: a prompt starts (`started`, before its first draw) only between direct
    writes, and lines it did not print before it ended are written by `stopped`. (patch_stdout's
    own writer thread can print over a prompt that is starting; this class is for our lines.)
    """

    def __init__(self, out: Any = None):
        self._out: TextIO = out or sys.__stdout__ or sys.stdout  # __stdout__ is None only without a console
        self._lock = threading.Lock()
        self._pending: list[str] = []
        self._app: Any = None
        self._scheduled = False  # a write is on its way through the prompt's loop

    def line(self, text: str) -> None:
        with self._lock:
            self._pending.append(text)
            app = self._app
            if app is None:
                self._write()
                return
            if self._scheduled:
                return
            self._scheduled = True
        try:
            app.loop.call_soon_threadsafe(self._in_app, app)
        except (RuntimeError, AttributeError):  # the prompt's loop just closed: `stopped` writes them
            pass

    def _write(self) -> None:
        """With the lock held."""
        if self._pending:
            text = "".join(ln + "\n" for ln in self._pending)
            self._pending.clear()
            self._out.write(text)
            self._out.flush()

    def _in_app(self, app: Any) -> None:
        from prompt_toolkit.application import run_in_terminal

        def write() -> None:
            with self._lock:
                self._scheduled = False
                self._write()

        if app.is_running:
            run_in_terminal(write, in_executor=False)
        else:
            write()

    def started(self, app: Any) -> None:
        """Called in the prompt's thread before it draws anything."""
        with self._lock:
            self._write()
            self._app, self._scheduled = app, False

    def stopped(self) -> None:
        with self._lock:
            self._app, self._scheduled = None, False
            self._write()

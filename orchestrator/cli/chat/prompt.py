"""The chat shell's input: a prompt_toolkit PromptSession run in a worker thread, with the floor in
its prompt, a status toolbar, `@name` and slash-command completion, and a clean exit when abandoned.

It runs under `trio.to_thread.run_sync(..., abandon_on_cancel=True)` so input stays usable while
agents work; `close` makes an abandoned prompt thread give the terminal back.
"""
from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any, Callable

import trio

from orchestrator.cli.chat.view import Lines, View, anonymous, short


class Prompt:
    """Reads one line at a time: from the terminal through prompt_toolkit, or plain from a pipe."""

    def __init__(self, view: View, history: Path | None, room: Callable[[], Any], room_name: Callable[[], str],
                 commands: dict[str, str], interactive: bool):
        self.view, self._room, self._room_name, self._commands = view, room, room_name, commands
        self.interactive = interactive
        self._running = threading.Event()
        self._carried = ""  # the line the next prompt starts with (it was being typed when Ctrl-C stopped agents)
        self.typed = ""  # what the input line held when Ctrl-C ended the last prompt
        self.lines = Lines() if interactive else None
        self.session = self._session(history) if interactive else None

    def _session(self, history_path: Path | None):
        from prompt_toolkit import PromptSession
        from prompt_toolkit.formatted_text import ANSI
        from prompt_toolkit.history import FileHistory, InMemoryHistory

        history: Any = InMemoryHistory()
        if history_path is not None:
            try:
                history_path.parent.mkdir(parents=True, exist_ok=True)
                history = FileHistory(str(history_path))
            except OSError:
                pass

        def message():
            room = self._room()
            if room is not None and room.asking:
                return ANSI(self.view._paint("1;33", "confirm o/r/d> "))
            floor = self.view.floor
            to = "" if floor == "commander" else f" → {floor}"  # where a line without @name goes
            return ANSI(self.view._paint("1;32", f"you{to}> "))

        return PromptSession(message, history=history, completer=_completer(self._room, self._commands),
                             input_processors=[_unjoined()],
                             complete_while_typing=True, bottom_toolbar=self._toolbar, refresh_interval=0.1,
                             erase_when_done=True, enable_suspend=False)

    def _toolbar(self) -> str:
        """The status area (prompt thread): lines in progress, else floor and who is working."""
        try:
            assert self.session is not None  # a toolbar is only shown by the interactive session
            return self.status(self.session.app.output.get_size().columns)
        except Exception:  # never let a status line break the prompt
            return f" {self._room_name()} · /help"

    def status(self, width: int) -> str:
        lines = []
        for agent, text in self.view.partial:
            line = f"{'  └ ' if anonymous(agent) else ''}{agent}: {text}"
            lines.append(line if len(line) < width else "…" + line[-(width - 2):])
        if not lines:
            room = self._room()
            busy = room is not None and room.busy
            tasks = list(room.ledger.tasks.values()) if busy else []
            working = sorted({t.agent for t in tasks if t.status == "running"})
            state = (f"working: {', '.join(working)}" if working else "working") if busy else "idle"
            if room is not None and room.asking:
                state = "waiting for your answer (o/r/d)"
            lines.append(f" {self._room_name()} · floor: {self.view.floor} · {state} · /help")
        return "\n".join(lines)

    def _prompt(self) -> str:
        session, lines = self.session, self.lines
        assert session is not None and lines is not None  # read_line prompts only when interactive
        self._running.set()
        default, self._carried = self._carried, ""
        try:
            return session.prompt(default=default, pre_run=lambda: lines.started(session.app),
                                  set_exception_handler=False)
        except KeyboardInterrupt:
            self.typed = session.default_buffer.text  # the next prompt resets the buffer, not the interrupt
            raise
        finally:
            lines.stopped()
            self._running.clear()

    def carry(self) -> None:
        """Ctrl-C stopped the agents: the line being typed comes back at the next prompt, as it was."""
        self._carried, self.typed = self.typed, ""

    def shelve(self) -> bool:
        """Ctrl-C at an idle prompt clears the line, which ↑ brings back; False when the line was empty."""
        text, self.typed = self.typed, ""
        if not text.strip() or self.session is None:
            return False
        self.session.history.append_string(text)
        return True

    async def read_line(self) -> str:
        if not self.interactive:
            line = await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
            if not line:
                raise EOFError
            return line.rstrip("\n")
        try:
            return await trio.to_thread.run_sync(self._prompt, abandon_on_cancel=True)
        except trio.Cancelled:
            self._close()
            raise

    def _close(self) -> None:
        """Make the abandoned prompt thread exit, so that it gives the terminal back."""
        app = self.session.app if self.session else None
        if app is None:
            return

        def close() -> None:
            if app.is_running and app.future is not None and not app.future.done():
                app.exit(exception=EOFError())

        if app.is_running and app.loop is not None:
            try:
                app.loop.call_soon_threadsafe(close)
            except RuntimeError:  # its loop has just closed
                pass

    async def gone(self) -> None:
        """On the way out: wait (briefly) until no prompt thread holds the terminal."""
        with trio.move_on_after(2):
            while self._running.is_set():
                self._close()
                await trio.sleep(0.02)


def _completer(current_room: Callable[[], Any], commands: dict[str, str]):
    """`@name` over the room's named members; the slash commands at the start of a line."""
    from prompt_toolkit.completion import Completer, Completion

    class MemberCompleter(Completer):
        def get_completions(self, document, complete_event):
            word = document.get_word_before_cursor(WORD=True)
            room = current_room()
            if word.startswith("@") and room is not None:
                for name, m in list(room.members.items()):
                    if not m.anonymous and ("@" + name).startswith(word):
                        meta = "hosts the room" if name == "commander" else m.spec.description
                        yield Completion("@" + name, start_position=-len(word), display_meta=short(meta, 40))
            elif word.startswith("/") and document.text_before_cursor == word:
                for cmd, meta in commands.items():
                    if cmd.startswith(word):
                        yield Completion(cmd, start_position=-len(word), display_meta=short(meta, 40))

    return MemberCompleter()


def _unjoined():
    """Shows an emoji sequence joined by U+200D (👩‍💻) as its parts, in the input line only.

    prompt_toolkit counts the parts' widths (4 cells) while a modern terminal draws the joined glyph
    in 2, so the cursor and the rest of the line drift; drawn apart, every terminal agrees with it.
    The typed text keeps the joiner.
    """
    from prompt_toolkit.layout.processors import Processor, Transformation
    from prompt_toolkit.utils import get_cwidth

    class Unjoined(Processor):
        def apply_transformation(self, ti):
            to_display: list[int] = []
            fragments, shown, previous = [], 0, ""
            for style, text, *rest in ti.fragments:
                kept = []
                for ch in text:
                    to_display.append(shown)
                    if not (ch == "\u200d" and previous and get_cwidth(previous) == 2):
                        kept.append(ch)
                        shown += 1
                    previous = ch
                fragments.append((style, "".join(kept), *rest))
            if shown == len(to_display):
                return Transformation(ti.fragments)
            to_display.append(shown)
            to_source = [0] * (shown + 1)
            for i in reversed(range(len(to_display))):
                to_source[to_display[i]] = i

            def source_to_display(i: int) -> int:
                return to_display[min(i, len(to_display) - 1)] if i >= 0 else i

            def display_to_source(i: int) -> int:
                return to_source[min(i, shown)] if i >= 0 else i

            return Transformation(fragments, source_to_display, display_to_source)

    return Unjoined()

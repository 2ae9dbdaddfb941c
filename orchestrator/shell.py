"""`orchestrator chat`: the interactive group-chat shell (G7, G9, G10, G11).

The prompt is a prompt_toolkit PromptSession run in a worker thread (`trio.to_thread.run_sync(...,
abandon_on_cancel=True)`) under `patch_stdout(raw=True)`, so everything runs under one trio loop and
input stays usable while agents work (stack-notes §6). Only whole lines are printed above the
prompt (through `Lines`, which never writes while a prompt is being drawn); the line an agent is
still writing is shown in the bottom toolbar. Without a terminal (piped input) it reads lines and
prints the same transcript, without colour. A line typed while
agents work is simply posted: the room turns it into an interjection (G10). Ctrl-C stops the group
(G9); a second Ctrl-C at an idle prompt leaves. The terminal is restored on every way out.

Wiring: `shell.add_parser(subparsers)` registers `chat` with its own `fn`; `main(argv)` is a
stand-alone entry (`python -m orchestrator.shell chat ...`) with the same flags and exit codes.
"""
from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import tempfile
import threading
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import structlog
import trio

from orchestrator.core.errors import InputError
from orchestrator.core.events import (
    Cancelled, Compaction, Confirm, Done, ErrorEvent, Event, MessageEvent, Retry, State, TaskEvent,
    TextDeltaEvent, message_event,
)
from orchestrator.room.handback import StreamFilter
from orchestrator.team.schema import Team
from orchestrator.store.db import Store
from orchestrator.transcript import Printer

log = structlog.get_logger(__name__)

_ANONYMOUS = re.compile(r"worker(?:-\d+)?")
_ASSIGN = {"dispatch_to", "run_worker", "hand_off_to"}  # shown through their task, ledger and floor notices
_ANSWERS = {"o": "once", "once": "once", "this once": "once",
            "r": "run", "run": "run", "this run": "run",
            "d": "deny", "deny": "deny", "n": "deny", "no": "deny"}

COMMANDS = {
    "/stop": "stop every agent in the room (same as Ctrl-C while agents work)",
    "/floor": "who answers your next line without an @name",
    "/ledger": "the room's tasks: assignee, status, result summary",
    "/who": "the members of the room",
    "/rooms": "the rooms in this database",
    "/resume": "/resume ID: leave this room and continue a stored one",
    "/export": "/export PATH: write this room's transcript as Markdown",
    "/help": "this list",
    "/exit": "leave the shell (also Ctrl-D, or Ctrl-C twice at an idle prompt)",
}

HELP = """\
Type a line to talk to the room; it goes to the floor owner (the commander unless it handed off).
  @name line    address one member directly (Tab completes names); @commander takes the floor back
  a line typed while agents work is picked up by them at their next step
  Ctrl-C        stop every agent (G9); at an idle prompt, twice to leave
  o / r / d     answer a confirmation request: this once, this run, deny
  //text        send a line that starts with "/"
""" + "\n".join(f"  {cmd:<13} {text}" for cmd, text in COMMANDS.items())


# --- the command line -------------------------------------------------------------------------------

def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `chat` (with its own `fn`) on the `orchestrator` subparsers."""
    from orchestrator.cli import default_db  # lazily: cli.py imports this module to register `chat`

    c = subparsers.add_parser("chat", help="talk with a room interactively",
                              description="Talk with a room: a commander and its team. Lines typed while "
                                          "agents work steer them; Ctrl-C stops them all.")
    c.add_argument("--team", type=Path, metavar="TEAM.yaml",
                   help="the team (a scenario's `team:` block on its own); default: the agents/ folder")
    c.add_argument("--model", default=os.environ.get("ORCHESTRATOR_MODEL") or None, metavar="PROVIDER/MODEL",
                   help="run every agent on this model (default: $ORCHESTRATOR_MODEL)")
    c.add_argument("--db", type=Path, default=default_db(), help="the SQLite file (default: %(default)s)")
    c.add_argument("--resume", metavar="ROOM", help="continue a stored room (id, unique id prefix or name)")
    c.add_argument("--scripted", type=Path, metavar="SCENARIO.yaml",
                   help="play a scenario's scripted models (and team) instead of a real model; "
                        "its turns are ignored: you type instead")
    c.add_argument("--workspace", type=Path, help="the agents' workspace folder (default: the current folder; "
                                                  "with --scripted, the scenario's or a temporary one)")
    c.add_argument("--name", default=None, help="the new room's name (default: chat, or the scenario's name)")
    c.set_defaults(fn=cmd_chat)
    return c


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry with cli.main's flags and exit codes (2 bad input, 3 failure)."""
    from orchestrator.core.log import configure

    p = argparse.ArgumentParser(prog="orchestrator")
    p.add_argument("--debug", action="store_true", help="detailed logs and tracebacks")
    p.add_argument("--log-json", metavar="FILE", help="write logs as JSON lines to FILE")
    add_parser(p.add_subparsers(dest="command", required=True))
    try:
        args = p.parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2
    configure(debug=args.debug, json_file=args.log_json)
    try:
        return trio.run(args.fn, args)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if args.debug:
            raise
        log.debug("crash", exc_info=True)
        print(f"error: {type(exc).__name__}: {exc} (run with --debug for details)", file=sys.stderr)
        return 3


async def cmd_chat(args: argparse.Namespace) -> int:
    """The `chat` subcommand (called by cli.main through `trio.run(args.fn, args)`)."""
    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    try:
        with _terminal_restored(), _patched_stdout(interactive, args):
            return await _chat(args, interactive)
    except BaseExceptionGroup as group:  # a nursery's single error reads better as itself
        raise _single(group) from None


def _single(group: BaseExceptionGroup) -> BaseException:
    leaves: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for e in exc.exceptions:
                walk(e)
        elif not isinstance(exc, trio.Cancelled):
            leaves.append(exc)

    walk(group)
    return leaves[0] if len(leaves) == 1 else group


@contextmanager
def _terminal_restored() -> Iterator[None]:
    """Whatever happens to the prompt thread, the terminal leaves in the mode it came in."""
    try:
        import termios
        saved = termios.tcgetattr(0) if os.isatty(0) else None
    except (ImportError, OSError):
        saved = None
    try:
        yield
    finally:
        if saved is not None:
            try:
                termios.tcsetattr(0, termios.TCSADRAIN, saved)
            except OSError:
                pass


@contextmanager
def _patched_stdout(interactive: bool, args: argparse.Namespace) -> Iterator[None]:
    """Stray writes (logs, warnings) go above the prompt too; our own lines go through `Lines`."""
    if not interactive:
        yield
        return
    from prompt_toolkit.patch_stdout import patch_stdout

    from orchestrator.core.log import configure

    log_json, debug = getattr(args, "log_json", None), getattr(args, "debug", False)
    try:
        with patch_stdout(raw=True):
            if not log_json:
                configure(debug=debug)  # structlog keeps the stream it was given: give it the proxy
            yield
    finally:
        if not log_json:
            configure(debug=debug)


# --- models and teams -------------------------------------------------------------------------------

@dataclass
class Setup:
    team: Team | None  # None: each room keeps its stored team (--resume without --team/--scripted)
    resolve: Callable[[str], tuple[Any, str]]
    models: Callable[[str], Any] | None  # the catalog: real models' windows (None: scripted only)
    name: str
    workspace: Path | None
    scripted: Any = None  # the ScriptedProvider of --scripted, for its `sees` failures


async def _setup(args: argparse.Namespace, store: Store, stack: AsyncExitStack) -> Setup:
    team: Team | None = None
    scripted = None
    workspace = args.workspace.resolve() if args.workspace else None
    name = args.name or "chat"
    if args.scripted:
        from orchestrator.providers.scripted import ScriptedProvider
        from orchestrator.scenario.loader import load_scenario
        from orchestrator.scenario.runner import prepare_workspace, reply

        scn = load_scenario(args.scripted)
        team = scn.team
        scripted = ScriptedProvider({q: [reply(i) for i in items] for q, items in scn.models.items()},
                                    record=False)
        if workspace is None and not scn.workspace:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="orchestrator-chat-"))
            workspace = prepare_workspace(scn, Path(tmp) / "workspace", tmp)
        else:
            workspace = prepare_workspace(scn, workspace, "")
        name = args.name or scn.name
    if args.team:
        from orchestrator.team.loader import load_team

        team = load_team(args.team)
    models_of = team
    if args.resume:
        record = await store.room(args.resume)
        if record is None:
            raise InputError(f"no room {args.resume!r} in {args.db}; `orchestrator rooms --db {args.db}` "
                             "lists them")
        if models_of is None:
            import msgspec

            models_of = msgspec.convert(record.meta.get("team", {}), Team)
    elif team is None:
        from orchestrator.team.loader import default_team

        team = models_of = default_team()
    resolve, models = await resolver(args.model, models_of, scripted, stack)
    return Setup(team=team, resolve=resolve, models=models, name=name, workspace=workspace, scripted=scripted)


async def resolver(model: str | None, team: Team, scripted: Any,
                   stack: AsyncExitStack) -> tuple[Callable[[str], tuple[Any, str]], Callable[[str], Any] | None]:
    """Model strings to (provider, model id), and to their catalog entries: the one place where the
    shell meets the provider registry.

    `--model` puts every agent on that model. Otherwise each agent's own model string is routed
    (`scripted` and "" to the --scripted script); an agent without a model needs `--model`.
    Everything is resolved now, so a missing key is reported before any room exists.
    """
    from orchestrator.providers.registry import Registry

    strings = {a.model for a in (team.commander, *team.agents)}
    if scripted is not None and model is None and strings <= {"", "scripted"}:
        return (lambda _model: (scripted, "scripted")), None
    registry = await stack.enter_async_context(Registry.load())
    if model is None and scripted is None and "" in strings:
        raise _which_model(registry)
    forced = registry.forcing(model) if model else None
    if forced is None:
        for s in strings - {"", "scripted"}:
            registry.resolve(s)

    def resolve(model_string: str) -> tuple[Any, str]:
        if forced is not None:
            return forced(model_string)
        if scripted is not None and model_string in ("", "scripted"):
            return scripted, "scripted"
        return registry.resolve(model_string)

    return resolve, registry.windows(model)


def _which_model(registry: Any) -> InputError:
    """No model was chosen: what to set, or what is there to choose from."""
    sources = registry.config.sources
    configured = [n for n, src in sources.items() if src.explicit and src.candidates]
    if not any(src.explicit for src in sources.values()):
        return InputError(
            f"{registry.config.nothing_configured()}.\n"
            "Then choose the model with --model PROVIDER/MODEL (or ORCHESTRATOR_MODEL), e.g. "
            "`orchestrator chat --model ollama/qwen3` for a local Ollama (`ollama serve`; set OLLAMA_HOST "
            "if it is not on localhost:11434). To try the shell without any key: "
            "`orchestrator chat --scripted scenarios/tutor-handoff.yaml`")
    example = f"{configured[0]}/MODEL" if configured else "PROVIDER/MODEL"
    return InputError(f"which model should the agents use? pass --model PROVIDER/MODEL or set ORCHESTRATOR_MODEL "
                      f"(configured: {', '.join(configured) or 'none usable'}; e.g. --model {example})")


# --- what the user sees -----------------------------------------------------------------------------

@dataclass
class _Stream:
    """One agent's message in progress: the handback hold-back, the partial line, what is printed."""

    filter: StreamFilter = field(default_factory=StreamFilter)
    pending: str = ""
    printed: str = ""  # whole lines already printed (with their newlines)
    lines: int = 0


def _short(value: object, n: int = 60) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= n else text[:n - 1] + "…"


def _args(args: dict[str, Any], n: int = 40) -> str:
    return ", ".join(f"{k}={_short(v, n)}" for k, v in args.items())


def anonymous(name: str) -> bool:
    return bool(_ANONYMOUS.fullmatch(name))


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

    def notice(self, text: str) -> None:
        self._out(self.dim(text))

    def _out(self, line: str, speaker: str | None = None) -> None:
        self._last = speaker
        self.emit(line)

    def _text(self, author: str, line: str, first: bool, hidden: bool = False) -> None:
        if anonymous(author):
            self._out(self.dim(f"  └ {author}: {line}"), author)
            return
        label = f"{self._who(author)}: " if first or self._last != author else " " * (len(author) + 2)
        text = label + line
        self._out(self.dim(text) if hidden else text, author)

    def _publish_partial(self) -> None:
        self.partial = tuple((a, s.pending) for a, s in self.streams.items() if s.pending.strip())

    # events
    def __call__(self, ev: Event) -> None:
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
            self.notice(f"  ↻ {ev.agent}: {ev.reason}, retry {ev.attempt} in {ev.delay:.1f}s")
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
                                          f"{_short(ev.summary, 200)}"))
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
            text = ev.text.rstrip()
            first = True
            if st is not None and text.startswith(st.printed):
                text, first = text[len(st.printed):], st.lines == 0
            if text:
                for i, line in enumerate(text.split("\n")):
                    self._text(author, line, first=first and i == 0, hidden=hidden)
        if ev.kind == "tool_call" and isinstance(ev.calls, list):
            for c in ev.calls:
                if c.name == "hand_off_to":
                    self._handoffs[str(c.input.get("agent"))] = str(c.input.get("note") or "")
                elif c.name not in _ASSIGN:
                    self._tool(author, f"→ {c.name}({_args(c.input)})")
        elif ev.kind == "tool_result":
            name = ev.name if isinstance(ev.name, str) else "tool"
            if ev.is_error is True:
                self._tool(author, self.red(f"← {name} failed: {_short(ev.text, 120)}"), dim=False)
            elif name not in _ASSIGN:
                self._tool(author, f"← {name}: {len(ev.text):,} chars")
        elif ev.kind == "user":
            self._out(f"{self._who('user')}: {ev.text}", "user")
        elif ev.kind == "task":
            to = [v for v in ev.visible_to if v not in ("user", author)]
            target = to[0] if to else "?"
            if target in self._handoffs:
                note = self._handoffs.pop(target)
                line = f"⇢ {author} hands the floor to {target}" + (f": {_short(note, 90)}" if note else "")
            else:
                line = f"⇢ {author} → {target}: {_short(ev.text, 90)}"
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
        self._out = out or sys.__stdout__
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


@dataclass
class _Resume:
    ref: str


class Shell:
    def __init__(self, args: argparse.Namespace, store: Store, setup: Setup, interactive: bool):
        self.args, self.store, self.setup, self.interactive = args, store, setup, interactive
        color = interactive and not os.environ.get("NO_COLOR")
        self.view = View(self._print, color)
        self.room: Any = None
        self.room_name = ""
        self._armed = False  # a Ctrl-C at an idle prompt: the next one leaves
        self._stopping = False
        self._nursery: trio.Nursery | None = None
        self._leave = trio.CancelScope()
        self._failures = 0
        self._last_room: str | None = None
        self._prompt_running = threading.Event()
        self.lines = Lines() if interactive else None
        self.session = self._prompt_session() if interactive else None

    # output
    def _print(self, line: str) -> None:
        if self.lines is not None:
            self.lines.line(line)  # whole lines only, above the prompt
        else:
            print(line, flush=True)

    def say(self, line: str) -> None:
        self._print(self.view.dim(line))

    def on_event(self, ev: Event) -> None:
        self.view(ev)
        scripted = self.setup.scripted
        if isinstance(ev, Done) and scripted is not None and len(scripted.failures) > self._failures:
            for f in scripted.failures[self._failures:]:
                self._print(self.view.red(f"! script: {f}"))
            self._failures = len(scripted.failures)

    # the prompt
    def _prompt_session(self):
        from prompt_toolkit import PromptSession
        from prompt_toolkit.formatted_text import ANSI
        from prompt_toolkit.history import FileHistory, InMemoryHistory

        history: Any = InMemoryHistory()
        try:
            path = self.args.db.parent / "chat_history"
            path.parent.mkdir(parents=True, exist_ok=True)
            history = FileHistory(str(path))
        except OSError:
            pass

        def message():
            room = self.room
            if room is not None and room.asking:
                return ANSI(self.view._paint("1;33", "confirm o/r/d> "))
            floor = self.view.floor
            to = "" if floor == "commander" else f" → {floor}"  # where a line without @name goes
            return ANSI(self.view._paint("1;32", f"you{to}> "))

        return PromptSession(message, history=history, completer=_completer(self), complete_while_typing=True,
                             bottom_toolbar=self._toolbar, refresh_interval=0.1, erase_when_done=True,
                             enable_suspend=False)

    def _toolbar(self) -> str:
        """The status area (prompt thread): lines in progress, else floor and who is working."""
        try:
            return self._status(self.session.app.output.get_size().columns)
        except Exception:  # never let a status line break the prompt
            return f" {self.room_name} · /help"

    def _status(self, width: int) -> str:
        lines = []
        for agent, text in self.view.partial:
            line = f"{'  └ ' if anonymous(agent) else ''}{agent}: {text}"
            lines.append(line if len(line) < width else "…" + line[-(width - 2):])
        if not lines:
            room = self.room
            busy = room is not None and room.busy
            tasks = list(room.ledger.tasks.values()) if busy else []
            working = sorted({t.agent for t in tasks if t.status == "running"})
            state = (f"working: {', '.join(working)}" if working else "working") if busy else "idle"
            if room is not None and room.asking:
                state = "waiting for your answer (o/r/d)"
            lines.append(f" {self.room_name} · floor: {self.view.floor} · {state} · /help")
        return "\n".join(lines)

    def _prompt(self) -> str:
        self._prompt_running.set()
        try:
            return self.session.prompt(pre_run=lambda: self.lines.started(self.session.app),
                                       set_exception_handler=False)
        finally:
            self.lines.stopped()
            self._prompt_running.clear()

    async def read_line(self) -> str:
        if not self.interactive:
            line = await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
            if not line:
                raise EOFError
            return line.rstrip("\n")
        try:
            return await trio.to_thread.run_sync(self._prompt, abandon_on_cancel=True)
        except trio.Cancelled:
            self._close_prompt()
            raise

    def _close_prompt(self) -> None:
        """Make the abandoned prompt thread exit, so that it gives the terminal back."""
        app = self.session.app if self.session else None

        def close() -> None:
            if app.is_running and app.future is not None and not app.future.done():
                app.exit(exception=EOFError())

        if app is not None and app.is_running and app.loop is not None:
            try:
                app.loop.call_soon_threadsafe(close)
            except RuntimeError:  # its loop has just closed
                pass

    async def _prompt_gone(self) -> None:
        with trio.move_on_after(2):
            while self._prompt_running.is_set():
                self._close_prompt()
                await trio.sleep(0.02)

    # the session
    async def run(self) -> int:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._watch_sigint)
            try:
                with self._leave:
                    target: str | None = await self._room(self.args.resume)
                    while target is not None:
                        try:
                            target = await self._room(target)
                        except InputError as exc:  # that room cannot be opened: back to the last one
                            self._print(self.view.red(f"! {exc}"))
                            target = self._last_room if self._last_room != target else None
            finally:
                if self.interactive:
                    with trio.CancelScope(shield=True):
                        await self._prompt_gone()
                nursery.cancel_scope.cancel()
        return 0

    async def _room(self, ref: str | None) -> str | None:
        """Create (ref None) or reopen a room and talk in it; returns the room to open next, None to leave."""
        from orchestrator.room.room import Room

        common = dict(on_event=self.on_event, can_confirm=True, models=self.setup.models)
        if ref is None:
            opening = Room.create(self.store, self.setup.team, self.setup.resolve, name=self.setup.name,
                                  workspace=self.setup.workspace, **common)
        else:
            record = await self.store.room(ref)
            if record is None:
                raise InputError(f"no room {ref!r} in {self.args.db}; /rooms lists them")
            messages = await self.store.load(record.id)
            self.say(f"── room {record.name} ({record.id}): {len(messages)} messages ──")
            for m in messages:
                self.view.message(message_event(m))
            team = self.setup.team if (self.args.team or self.args.scripted) else None
            opening = Room.open(self.store, record.id, self.setup.resolve, team=team, **common)
        self.view.streams.clear()
        self.view.partial = ()
        async with opening as room:
            self.room, self.room_name = room, room.record.name
            self._last_room = room.id
            try:
                if ref is None:
                    self.say(f"room {room.record.name} ({room.id}) · {self.args.db} · /help for commands")
                else:
                    self.say(f"resumed room {room.record.name} ({room.id}) · floor: {room.floor}")
                return await self._converse(room)
            finally:
                with trio.CancelScope(shield=True), trio.move_on_after(10):
                    if room.busy:
                        await room.stop("the shell left the room")
                self.room = None

    async def _converse(self, room) -> str | None:
        while True:
            try:
                line = await self.read_line()
            except KeyboardInterrupt:
                self._interrupt()
                continue
            except EOFError:
                if not self.interactive:  # piped input: let the room finish, refusing what it asks
                    while await room.question_or_idle():
                        room.answer("deny")
                return None
            self._armed = False
            try:
                nxt = await self.handle(room, line)
            except InputError as exc:
                self._print(self.view.red(f"! {exc}"))
                continue
            if nxt is not None:
                return nxt.ref

    def _interrupt(self) -> None:
        room = self.room
        if room is not None and (room.busy or room.asking):
            self._armed = False
            if not self._stopping:
                self._nursery.start_soon(self._stop, room)
        elif self._armed:
            self._leave.cancel()
        else:
            self._armed = True
            self.say("(nothing is running: Ctrl-C again, Ctrl-D or /exit leaves)")

    async def _stop(self, room) -> None:
        self._stopping = True
        try:
            await room.stop()
        finally:
            self._stopping = False

    async def _watch_sigint(self) -> None:
        """SIGINT outside the prompt (the prompt itself reads Ctrl-C as a key)."""
        with trio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                self._interrupt()

    async def handle(self, room, line: str) -> _Resume | None:
        text = line.strip()
        if not text:
            return None
        if room.asking and text.lower() in _ANSWERS:
            room.answer(_ANSWERS[text.lower()], room.asking[0])
            return None
        if text.startswith("//"):
            await room.post(text[1:])
            return None
        if text.startswith("/"):
            self.say(f"› {text}")
            return await self.command(room, text)
        if room.asking:
            self.say("(a confirmation request is still open: answer o, r or d)")
        await room.post(line)
        return None

    async def command(self, room, text: str) -> _Resume | None:
        cmd, _, arg = text.partition(" ")
        arg = arg.strip()
        if cmd == "/help":
            for ln in HELP.splitlines():
                self._print(ln)
        elif cmd in ("/exit", "/quit"):
            self._leave.cancel()
        elif cmd == "/stop":
            if room.busy or room.asking:
                await room.stop()
            else:
                self.say("nothing is running")
        elif cmd == "/floor":
            floor = room.floor
            where = "the commander" if floor == "commander" else f"{floor} (until it hands back; @commander takes it)"
            self._print(f"floor: {floor} — lines without an @name go to {where}")
        elif cmd == "/ledger":
            tasks = list(room.ledger.tasks.values())
            if not tasks:
                self._print("the ledger is empty")
            for t in tasks:
                result = f" → {_short(t.result, 60)}" if t.result else ""
                self._print(f"{t.id}  {t.agent:<12} {t.kind:<8} {t.status:<9} {_short(t.task, 50)}{result}")
        elif cmd == "/who":
            self._who(room)
        elif cmd == "/rooms":
            for r in await self.store.rooms():
                mark = "*" if r.id == room.id else " "
                self._print(f"{mark} {r.id}  {r.name:<24} floor={r.floor:<12} {r.messages} messages")
        elif cmd == "/resume":
            if not arg:
                raise InputError("/resume ID: which room? /rooms lists them")
            record = await self.store.room(arg)
            if record is None:
                raise InputError(f"no room {arg!r} in {self.args.db}; /rooms lists them")
            if record.id == room.id:
                self.say("this is the current room")
                return None
            return _Resume(record.id)
        elif cmd == "/export":
            await self._export(room, arg)
        else:
            raise InputError(f"unknown command {cmd}; /help lists them (start a line with // to send a '/')")
        return None

    def _who(self, room) -> None:
        for name, m in room.members.items():
            if m.anonymous:
                continue
            flags = [f for f, on in (("floor", name == room.floor), ("interactive", m.spec.interactive and
                                                                       name != "commander")) if on]
            desc = "hosts the room" if name == "commander" else m.spec.description
            extra = f" [{', '.join(flags)}]" if flags else ""
            self._print(f"{self.view._who(name)}{extra} — {desc}".rstrip(" —"))
        hidden = [n for n, m in room.members.items() if m.anonymous]
        if hidden:
            self.say(f"  anonymous workers so far: {', '.join(hidden)}")

    async def _export(self, room, arg: str) -> None:
        from orchestrator.store.export import to_markdown

        if not arg:
            raise InputError("/export PATH: where to write the Markdown transcript?")
        if room.busy:
            raise InputError("agents are still working: wait, or /stop them, then /export")
        record = await self.store.room(room.id)
        messages = await self.store.load(room.id)
        path = Path(arg).expanduser()
        try:
            await trio.Path(path).write_text(to_markdown(record, messages), encoding="utf-8")
        except OSError as exc:
            raise InputError(f"{path}: cannot write: {exc.strerror or exc}") from None
        self.say(f"wrote {len(messages)} messages to {path}")


def _completer(shell: Shell):
    """`@name` over the room's named members; the slash commands at the start of a line."""
    from prompt_toolkit.completion import Completer, Completion

    class MemberCompleter(Completer):
        def get_completions(self, document, complete_event):
            word = document.get_word_before_cursor(WORD=True)
            room = shell.room
            if word.startswith("@") and room is not None:
                for name, m in list(room.members.items()):
                    if not m.anonymous and ("@" + name).startswith(word):
                        meta = "hosts the room" if name == "commander" else m.spec.description
                        yield Completion("@" + name, start_position=-len(word), display_meta=_short(meta, 40))
            elif word.startswith("/") and document.text_before_cursor == word:
                for cmd, meta in COMMANDS.items():
                    if cmd.startswith(word):
                        yield Completion(cmd, start_position=-len(word), display_meta=_short(meta, 40))

    return MemberCompleter()


async def _chat(args: argparse.Namespace, interactive: bool) -> int:
    async with AsyncExitStack() as stack:
        db = Path(args.db)
        if args.resume and not db.exists():
            raise InputError(f"{db}: no such database; pass --db PATH or set ORCHESTRATOR_DB")
        db.parent.mkdir(parents=True, exist_ok=True)
        store = await Store.open(db)
        stack.push_async_callback(store.close)
        setup = await _setup(args, store, stack)
        return await Shell(args, store, setup, interactive).run()


if __name__ == "__main__":
    sys.exit(main())

"""The chat session: one room at a time, lines typed by the user posted to it, slash commands, answers
to confirmation questions, Ctrl-C as the group stop, and moving between rooms with /resume.

A line typed while agents work is simply posted: the room turns it into an interjection.
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import signal
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from orchestrator.cli.chat.holding import holding
from orchestrator.cli.chat.prompt import Prompt
from orchestrator.cli.chat.view import View, short, wrap
from orchestrator.cli.paths import default_db, private_file
from orchestrator.cli.words import count
from orchestrator.core.errors import FATAL_KINDS, InputError, RoomNotFound
from orchestrator.core.events import Done, ErrorEvent, Event, message_event
from orchestrator.core.visible import visible
from orchestrator.providers.catalog import UNKNOWN
from orchestrator.store.contract import Store

_EXPORT_IO = trio.CapacityLimiter(1)  # /export's file writes, off the event loop

_ANSWERS = {"o": "once", "once": "once", "this once": "once",
            "r": "run", "run": "run", "this run": "run",
            "d": "deny", "deny": "deny", "n": "deny", "no": "deny"}

COMMANDS = {
    "/stop": "stop every agent in the room (same as Ctrl-C while agents work)",
    "/floor": "who answers your next line without an @name",
    "/ledger": "the room's tasks: assignee, status, result summary",
    "/usage": "what this room spent: model calls, tokens, time and cost per agent and model",
    "/who": "the members of the room",
    "/rooms": "the rooms in this database",
    "/resume": "/resume ID: leave this room and continue a stored one",
    "/export": "/export PATH: write this room's transcript as Markdown",
    "/skills": "the skills found: name, root, tier, status, and who may use them",
    "/skill": "/skill NAME [line]: use that skill for your next line (or this one)",
    "/proposals": "/proposals [accept|reject ID|all]: what the self-improvement pass proposed",
    "/help": "this list",
    "/exit": "leave the shell (also Ctrl-D, or Ctrl-C twice at an idle prompt)",
}

HELP = """\
Type a line to talk to the room; it goes to the floor owner (the commander unless it handed off).
  @name line    address one member directly (Tab completes names); @commander takes the floor back
  a line typed while agents work is picked up by them at their next step
  Tab           complete an @name or a /command
  ↑ / ↓         your earlier lines (kept between sessions)
  Ctrl-C        stop every agent; at an idle prompt, clear the line (↑ brings it back), twice on an empty one to leave
  Ctrl-D        at an empty prompt, leave
  o / r / d     answer a confirmation request: this once, this run, deny
  //text        send a line that starts with "/"
""" + "\n".join(f"  {cmd:<13} {text}" for cmd, text in COMMANDS.items())


# a scripted reply's `sees` / `not_sees` that the request failed (providers/scripted.py)
_OFF_SCRIPT = re.compile(r"(?P<agent>\S+) call #(?P<n>\d+): the request (?:(?P<missing>did not contain)|contained) "
                         r"(?P<text>.+)", re.S)


# --- the command line -------------------------------------------------------------------------------


@dataclass
class _Resume:
    ref: str


class Shell:
    def __init__(self, args: argparse.Namespace, store: Store, setup: Any, interactive: bool):
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
        self._checked = False  # the models were looked up in their servers' listings (once a session)
        self.exit_code = 0
        self._last_room: str | None = None
        self._skill: str | None = None  # invoked with /skill for the next line
        history = private_file(Path(args.db).parent / "chat_history") if getattr(args, "db", None) else None
        self.prompt = Prompt(self.view, history, lambda: self.room, lambda: self.room_name, COMMANDS, interactive)

    # output
    def _print(self, line: str) -> None:
        if self.prompt.lines is not None:
            for row in wrap(line, shutil.get_terminal_size().columns):
                self.prompt.lines.line(row)  # whole lines only, above the prompt
        else:
            print(line, flush=True)

    def say(self, line: str) -> None:
        self._print(self.view.dim(visible(line)))  # it may quote names, descriptions and diffs agents wrote

    def on_event(self, ev: Event) -> None:
        self.view(ev)
        if isinstance(ev, ErrorEvent) and ev.error_class in FATAL_KINDS:  # every later line would fail alike
            self.exit_code = 3
            if self.interactive:  # the room and the shell stay: /export, /rooms, /resume still work
                self.say("every line will fail alike until the model or the address is fixed (`orchestrator "
                         "models` checks them); then resume this room")
            else:  # a script stops at the first such line
                self.say("the shell leaves: fix the model or the address, then resume the room")
                self._leave.cancel()
        scripted = self.setup.scripted
        if isinstance(ev, Done) and scripted is not None and len(scripted.failures) > self._failures:
            for f in scripted.failures[self._failures:]:
                self._print(self.view.yellow(visible(self._off_script(f))))
            self._failures = len(scripted.failures)

    def _off_script(self, failure: str) -> str:
        """A scripted reply met a line it was not written for: the script goes on regardless, and the user
        learns that `--scripted` plays a fixed script, and where to read the lines it expects."""
        from orchestrator.scenario.shipped import shipped

        path = Path(self.args.scripted)
        name = path.stem if shipped().get(path.stem) == path else str(path)
        m = _OFF_SCRIPT.fullmatch(failure)
        why = (f"{m['agent']}'s reply #{m['n']} was written for a line {'with' if m['missing'] else 'without'} "
               f"{m['text']}" if m else failure)
        return (f"! the scripted model plays {name}'s fixed script, whatever you type: {why} "
                f"(`orchestrator run {name}` shows the lines it expects)")

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
                            self._print(self.view.red(visible(f"! {exc}")))
                            target = self._last_room if self._last_room != target else None
            finally:
                if self.interactive:
                    with trio.CancelScope(shield=True):
                        await self.prompt.gone()
                nursery.cancel_scope.cancel()
        self.goodbye()
        return self.exit_code

    async def _room(self, ref: str | None) -> str | None:
        """Create (ref None) or reopen a room and talk in it; returns the room to open next, None to leave."""
        from orchestrator.room.room import Room

        common = dict(on_event=self.on_event, can_confirm=True, models=self.setup.models, mcp=self.setup.mcp,
                      evolve=bool(getattr(self.args, "evolve", False)), config=self.setup.config)
        nursery = self._nursery
        assert nursery is not None  # a room is only open inside run()'s nursery
        async with AsyncExitStack() as held:
            if ref is None:
                opening = Room.create(self.store, self.setup.team, self.setup.resolve, name=self.setup.name,
                                      workspace=self.setup.workspace, **common)
            else:
                record = await self.store.room(ref)
                if record is None:
                    raise RoomNotFound(f"no room {ref!r} in {self.args.db}; /rooms lists them")
                # Held before it opens: opening heals and writes, which another open copy must not do at once.
                await held.enter_async_context(holding(self.store, record.id, record.name, nursery))
                opening = Room.open(self.store, record.id, self.setup.resolve, **common,
                                    team=self.setup.team if (self.args.team or self.args.scripted) else None)
                await self._replay(record)
            return await self._inside(opening, ref is None, held, nursery)

    async def _replay(self, record) -> None:
        """The stored room as it was, before it opens."""
        messages = await self.store.load(record.id)
        self.say(f"── room {record.name} ({record.id}): {count(len(messages), 'message')} ──")
        for m in messages:
            self.view.message(message_event(m))

    async def _inside(self, opening, new: bool, held: AsyncExitStack, nursery: trio.Nursery) -> str | None:
        self.view.streams.clear()
        self.view.partial = ()
        async with opening as room:
            self.room, self.room_name = room, room.record.name
            self._last_room = room.id
            try:
                if new:  # nobody knows its id before this: held from here
                    await held.enter_async_context(holding(self.store, room.id, room.record.name, nursery))
                    await self._remember(room)
                    self.say(f"room {room.record.name} ({room.id}) · {self.args.db} · /help for commands")
                else:
                    self.say(f"resumed room {room.record.name} ({room.id}) · floor: {room.floor}")
                self._uncatalogued(room)
                if not self._checked:
                    self._checked = True
                    nursery.start_soon(self._preflight, room)
                return await self._converse(room)
            finally:
                with trio.CancelScope(shield=True), trio.move_on_after(10):
                    if room.busy:
                        await room.stop("the shell left the room")
                self.room = None

    def _uncatalogued(self, room) -> None:
        """Models the catalog does not know run with a small assumed window: say so once, with the fix."""
        if self.setup.models is None:
            return
        strings = {self.args.model} if self.args.model else {m.spec.model for m in room.members.values()}
        for model in sorted(strings - {"", "scripted", None}):
            info = self.setup.models(model)
            if info is not None and info.note == UNKNOWN.note:
                self.say(f"{model} is not in the catalog: assuming a {info.context_window:,}-token window; "
                         f'set [models."{model}"] context_window in the config file to change it')

    async def _preflight(self, room) -> None:
        """A model its server does not list, a dead address or a refused key, said while the user types the
        first line (the shell stays: the user may leave and start again with another --model)."""
        from orchestrator.runtime.preflight import problems

        if self.setup.models is None:  # only the script plays
            return
        strings = {self.args.model} if self.args.model else {m.spec.model for m in room.members.values()}
        found = await problems(self.setup.resolve, strings)
        for line in found:
            self._print(self.view.red(visible(f"! {line}")))
        if found:
            self.say("the first line will fail: leave (Ctrl-D) and start again with --model PROVIDER/MODEL, "
                     "or fix the config (`orchestrator models` checks it)")

    async def _remember(self, room) -> None:
        """What `--resume` needs to go on as this room started: its model, or the scenario it plays."""
        extra = {"model": self.args.model, "scripted": str(self.args.scripted) if self.args.scripted else None}
        extra = {k: v for k, v in extra.items() if v}
        if extra:
            await room.update_meta(**extra)

    def goodbye(self) -> None:
        """How to come back to the room just left."""
        if self._last_room is None:
            return
        db = "" if Path(self.args.db) == default_db() else f" --db {shlex.quote(str(self.args.db))}"
        self.say(f"resume with: orchestrator chat --resume {self._last_room}{db}")

    async def _converse(self, room) -> str | None:
        while True:
            try:
                line = await self.prompt.read_line()
            except KeyboardInterrupt:
                self._interrupt(at_prompt=True)
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
                self._print(self.view.red(visible(f"! {exc}")))
                continue
            if nxt is not None:
                return nxt.ref
            if not self.interactive:  # piped lines take turns, as typed ones would after each reply
                await room.question_or_idle()

    def _interrupt(self, at_prompt: bool = False) -> None:
        """Ctrl-C: stops the agents if any work (a line being typed stays); at an idle prompt clears the line
        typed (↑ brings it back), or else leaves when pressed twice."""
        room = self.room
        if room is not None and (room.busy or room.asking):
            self._armed = False
            if at_prompt:
                self.prompt.carry()
            if not self._stopping:
                assert self._nursery is not None  # a room is only open inside run()'s nursery
                self._nursery.start_soon(self._stop, room)
        elif at_prompt and self.prompt.shelve():
            self._armed = False
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
            await self._post(room, text[1:])
            return None
        if text.startswith("/"):
            self.say(f"› {text}")
            return await self.command(room, text)
        if room.asking:
            self.say("(a confirmation request is still open: answer o, r or d)")
        await self._post(room, line)
        return None

    async def _post(self, room, line: str) -> None:
        skill, self._skill = self._skill, None
        await room.post(line, skill=skill)

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
            self._print(visible(f"floor: {floor} — lines without an @name go to {where}"))
        elif cmd == "/ledger":
            tasks = list(room.ledger.tasks.values())
            if not tasks:
                self._print("the ledger is empty")
            for t in tasks:
                result = f" → {short(t.result, 60)}" if t.result else ""
                self._print(visible(f"{t.id}  {t.agent:<12} {t.kind:<8} {t.status:<9} {short(t.task, 50)}{result}"))
        elif cmd == "/usage":
            from orchestrator.store.usage import table

            for ln in table(await room.usage_report(self.setup.prices)).splitlines():
                self._print(ln)
        elif cmd == "/who":
            self._who(room)
        elif cmd == "/rooms":
            for r in await self.store.rooms():
                mark = "*" if r.id == room.id else " "
                self._print(f"{mark} {r.id}  {r.name:<24} floor={r.floor:<12} {count(r.messages, 'message')}")
        elif cmd == "/resume":
            if not arg:
                raise InputError("/resume ID: which room? /rooms lists them")
            record = await self.store.room(arg)
            if record is None:
                raise RoomNotFound(f"no room {arg!r} in {self.args.db}; /rooms lists them")
            if record.id == room.id:
                self.say("this is the current room")
                return None
            return _Resume(record.id)
        elif cmd == "/export":
            await self._export(room, arg)
        elif cmd == "/skills":
            self._skills(room)
        elif cmd == "/skill":
            name, _, line = arg.partition(" ")
            if not name:
                raise InputError("/skill NAME [line]: which skill? /skills lists them")
            if room.skills.library.get(name) is None:
                raise InputError(f"no usable skill named {name!r}; /skills lists them")
            self._skill = name
            if line.strip():
                await self._post(room, line.strip())
            else:
                self.say(f"your next line uses the skill {name}")
        elif cmd == "/proposals":
            await self._proposals(room, arg)
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

    def _skills(self, room) -> None:
        entries = room.skills.library.entries
        if not entries:
            self._print("no skills found; put skill folders in .agents/skills/ (`orchestrator skills check` "
                        "validates one)")
        for e in entries:
            users = [n for n, m in room.members.items() if not m.anonymous
                     and e.name in room.skills.usable(m.spec, n == "commander")]
            who = f" — {', '.join(users)}" if users else ""
            why = f": {e.reason}" if e.reason else ""
            self._print(f"{e.name:<24} {e.root:<8} {e.tier:<9} {e.status}{why}{who}")

    async def _proposals(self, room, arg: str) -> None:
        from orchestrator.skills.proposals import pending

        verb, _, ident = arg.partition(" ")
        if verb in ("accept", "reject"):
            for line in await room.review(verb == "accept", ident.strip() or "all"):
                self._print(line)
            return
        if verb:
            raise InputError("/proposals [accept|reject ID|all]")
        waiting = await trio.to_thread.run_sync(pending, room.workspace)
        if not waiting:
            self._print("no pending proposals")
        for staged in waiting:
            self._print(staged.summary())
            for ln in staged.diff().splitlines():
                self._print(f"  {ln}")
        if waiting:
            self.say("/proposals accept ID (or all) applies one; /proposals reject ID (or all) files it away")

    async def _export(self, room, arg: str) -> None:
        from orchestrator.store.export import to_markdown
        from orchestrator.tools.base import ToolError
        from orchestrator.tools.sandbox import write_named

        if not arg:
            raise InputError("/export PATH: where to write the Markdown transcript?")
        if room.busy:
            raise InputError("agents are still working: wait, or /stop them, then /export")
        record = await self.store.room(room.id)
        assert record is not None  # the open room's own row
        messages = await self.store.load(room.id)
        data = visible(to_markdown(record, messages)).encode("utf-8")  # read by a person: nothing acts
        # The path is often in the workspace, where an agent may have planted a link: written as the tools write.
        try:
            await trio.to_thread.run_sync(write_named, arg, data, limiter=_EXPORT_IO)
        except ToolError as exc:
            raise InputError(str(exc)) from None
        except OSError as exc:
            raise InputError(f"{arg}: cannot write: {exc.strerror or exc}") from None
        self.say(f"wrote {count(len(messages), 'message')} to {Path(arg).expanduser()}")

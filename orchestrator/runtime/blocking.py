"""Driving rooms from plain Python, outside trio: `run(team, lines)` plays lines to a new room and returns what
the user saw; `Conversation` keeps a room open across calls, its trio loop in a thread of its own.

From asyncio code, call either in a worker thread (`await asyncio.to_thread(orchestrator.run, ...)`): trio and
asyncio each need a thread's event loop to themselves, so a call from inside either loop is refused.
"""
from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import trio

from orchestrator.core.types import Message
from orchestrator.room.members import USER
from orchestrator.room.room import Room
from orchestrator.runtime.runtime import Runtime
from orchestrator.team.schema import Team

__all__ = ["Conversation", "run"]


def run(team: Team, lines: str | Sequence[str], **runtime: Any) -> list[Message]:
    """Post `lines` one after another to a new room (each once the room is idle again) and return every message
    the user saw, their own lines included. `runtime`: Runtime.open's options (model, scripted, db, workspace)."""
    _outside_event_loops("orchestrator.run")
    said = [lines] if isinstance(lines, str) else list(lines)

    async def main() -> list[Message]:
        async with Runtime.open(**runtime) as rt, rt.room(team) as room:
            for line in said:
                await rt.ask(room, line)
            return [m for m in await rt.store.load(room.id) if USER in m.visible_to]

    return trio.run(main)


class Conversation:
    """`with Conversation(team, model=...) as chat: chat.say("line")`: one room, open until the block ends;
    `say` blocks until the room is idle and returns what the user was told."""

    def __init__(self, team: Team, **runtime: Any):
        self._team, self._runtime = team, runtime
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._rt: Runtime | None = None
        self._room: Room | None = None
        self._done: trio.Event | None = None
        self._error: BaseException | None = None

    def __enter__(self) -> Conversation:
        _outside_event_loops("Conversation")
        self._thread = threading.Thread(target=self._loop, name="orchestrator-conversation", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._token is not None and self._done is not None:
            try:
                trio.from_thread.run_sync(self._done.set, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        if self._thread is not None:
            self._thread.join()
        if self._error is not None and exc is None:
            raise self._error

    @property
    def room_id(self) -> str:
        """The id of the room this conversation keeps open."""
        return self._opened()[1].id

    def say(self, line: str) -> list[Message]:
        """Post `line` to the room and wait for the team's answer; returns what the user would read."""
        rt, room = self._opened()
        return trio.from_thread.run(rt.ask, room, line, trio_token=self._token)

    def stop(self) -> None:
        """The group stop: every agent of the room stops; the room takes the next line."""
        _, room = self._opened()
        trio.from_thread.run(room.stop, "stopped by the program", trio_token=self._token)

    def _opened(self) -> tuple[Runtime, Room]:
        if self._rt is None or self._room is None:
            raise RuntimeError("the conversation is not open: use it inside `with Conversation(...) as chat:`")
        return self._rt, self._room

    def _loop(self) -> None:
        async def main() -> None:
            self._token, self._done = trio.lowlevel.current_trio_token(), trio.Event()
            async with Runtime.open(**self._runtime) as rt, rt.room(self._team) as room:
                self._rt, self._room = rt, room
                self._ready.set()
                await self._done.wait()

        try:
            trio.run(main)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            self._error = exc
        finally:
            self._rt = self._room = None
            self._ready.set()


def _outside_event_loops(what: str) -> None:
    try:
        trio.lowlevel.current_trio_token()
    except RuntimeError:
        pass
    else:
        raise RuntimeError(f"{what} blocks, and this is trio's loop: use `async with Runtime.open(...)` here")
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError(f"{what} blocks, and this is asyncio's loop: call it in a thread "
                       f"(`await asyncio.to_thread(...)`), or use Runtime under trio")

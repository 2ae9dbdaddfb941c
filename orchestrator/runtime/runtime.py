"""`Runtime`: what a program's rooms share, built once per program: the store, the model resolver and catalog
(config.toml read once, off the event loop), the workspace; it opens rooms and hosts of many rooms over them.

It runs under trio (`async with Runtime.open(...) as rt:`); outside trio, `orchestrator.run` and
`Conversation` (blocking.py) drive one from plain Python.
"""
from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from os import PathLike
from pathlib import Path
from typing import Any


from orchestrator.acp import homes
from orchestrator.core.events import Event
from orchestrator.core.types import Message
from orchestrator.providers.base import Provider
from orchestrator.providers.catalog import ModelInfo
from orchestrator.providers.config import Config
from orchestrator.providers.scripted import Reply, ScriptedProvider
from orchestrator.room.host import RoomHost
from orchestrator.room.members import USER
from orchestrator.room.room import Room
from orchestrator.runtime.models import models_for
from orchestrator.store.backends import open_store
from orchestrator.store.contract import Store
from orchestrator.team.schema import Team

__all__ = ["Runtime"]

Script = Mapping[str, Sequence[Reply]]  # agent name -> its scripted model's replies, in order


class Runtime:
    """Open with `async with Runtime.open(...) as rt:`; `rt.room(team)` opens a new room, `rt.reopen(id)` a
    stored one, `rt.host(team)` a host of many rooms, and `rt.ask(room, line)` posts and waits for the answer."""

    def __init__(self, store: Store, resolve: Callable[[str], tuple[Provider, str]], *, workspace: Path,
                 models: Callable[[str], ModelInfo | None] | None = None, config: Config | None = None):
        self._store, self._resolve, self._workspace, self._models = store, resolve, workspace, models
        self._config = config  # config.toml as read once; None: each room reads it

    @classmethod
    @asynccontextmanager
    async def open(cls, *, db: str | PathLike[str] | None = None, model: str | None = None,
                   scripted: Script | ScriptedProvider | None = None, workspace: str | PathLike[str] | None = None,
                   env: Mapping[str, str] | None = None) -> AsyncIterator[Runtime]:
        """`db`: an SQLite file or a postgresql:// URL (default: a temporary database, gone at the end);
        `model`: every agent on this model (`provider/model`), else each on its own `model`; `scripted`:
        the deterministic model for agents whose model is `scripted` (or empty), as replies per agent;
        `workspace`: the agents' folder (default: a temporary one); `env`: the environment config.toml and the
        API keys are read from (default: os.environ)."""
        async with AsyncExitStack() as stack:
            def temporary(name: str) -> Path:  # a folder of its own, gone with the runtime
                return Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="orchestrator-"))) / name

            store = await open_store(db if db is not None else temporary("rooms.db"))
            stack.push_async_callback(store.close)
            if db is None:  # run before the close: the temporary database's rooms' agents' HOMEs go with it
                stack.push_async_callback(homes.forget_store, store)
            folder = Path(workspace).expanduser().resolve() if workspace is not None else temporary("workspace")
            folder.mkdir(parents=True, exist_ok=True)
            play = ScriptedProvider({k: list(v) for k, v in scripted.items()}) \
                if isinstance(scripted, Mapping) else scripted
            models = await models_for(stack, model=model, scripted=play, env=env, no_script=(
                "an agent's model is scripted (or unset) and no script was given: pass "
                "Runtime.open(model='provider/model') or scripted={agent: [Reply...]}"))
            yield cls(store, models.resolve, workspace=folder, models=models.catalog, config=models.config)

    @property
    def store(self) -> Store:
        """The store every room of this runtime is kept in."""
        return self._store

    @property
    def workspace(self) -> Path:
        """The folder the agents' tools work in."""
        return self._workspace

    def resolve(self, model_string: str) -> tuple[Provider, str]:
        """The provider and model id an agent's model string runs on."""
        return self._resolve(model_string)

    def room(self, team: Team, *, name: str = "room", on_event: Callable[[Event], None] | None = None,
             can_confirm: bool = False, **options: Any) -> AbstractAsyncContextManager[Room]:
        """`async with rt.room(team) as room:` a new room, stored as it goes. Risky commands are denied unless
        `can_confirm` and something answers the room's questions (`room.answer`)."""
        return Room.create(self._store, team, self._resolve, name=name, workspace=self._workspace,
                           on_event=on_event, can_confirm=can_confirm, models=self._models,
                           config=self._config, **options)

    def reopen(self, room_id: str, *, team: Team | None = None, on_event: Callable[[Event], None] | None = None,
               **options: Any) -> AbstractAsyncContextManager[Room]:
        """`async with rt.reopen(id) as room:` a stored room, healed and rebuilt from the store."""
        return Room.open(self._store, room_id, self._resolve, team=team, on_event=on_event, models=self._models,
                         config=self._config, **options)

    def host(self, team: Team, *, idle_close: float = 60.0, **options: Any) -> AbstractAsyncContextManager[RoomHost]:
        """`async with rt.host(team) as host:` many rooms in this process, each opened when a line comes for it
        and closed once idle (`host.ask(room_id or None, line)`)."""
        return RoomHost.open(self._store, self._resolve, team=team, models=self._models, idle_close=idle_close,
                             workspace=self._workspace, config=self._config, **options)

    async def ask(self, room: Room, line: str) -> list[Message]:
        """Post `line` and wait until the room is idle: what the user was told since, in order."""
        posted = await room.post(line)
        await room.idle()
        return [m for m in await self._store.load(room.id)
                if m.seq > posted.seq and USER in m.visible_to and m.kind in ("text", "notice")]

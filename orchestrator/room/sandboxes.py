"""A room's shell sandbox settings: config.toml's [sandbox], then the team's, then each agent's own; and the
store's files, which no command or file tool may see.
"""
from __future__ import annotations

from pathlib import Path

from orchestrator.core.errors import InputError
from orchestrator.providers.config import Config, load_config
from orchestrator.room.members import COMMANDER
from orchestrator.store.contract import Store
from orchestrator.store.db import SqliteStore
from orchestrator.team.schema import Team
from orchestrator.tools.jail import Settings, SettingsError
from orchestrator.tools.sandbox import store_files


def store_paths(store: Store) -> tuple[Path, ...]:
    """The database file and its companions (a PostgreSQL store has none)."""
    return store_files(Path(store.name)) if isinstance(store, SqliteStore) and store.name != ":memory:" else ()


def sandboxes(team: Team, workspace: Path, config: Config | None = None) -> tuple[Settings, dict[str, Settings]]:
    """The shell sandbox of the room and of the agents that set their own; `config` as the program read it
    (None: read config.toml now)."""
    config = config if config is not None else load_config()
    try:
        room = Settings.parse(config.sandbox, base=workspace)
    except SettingsError as exc:
        raise InputError(f"{config.path}: [sandbox]: {exc}") from None
    try:
        room = room.over(team.sandbox, base=workspace)
        agents = {a.name or COMMANDER: room.over(a.sandbox, base=workspace)
                  for a in (team.commander, *team.agents) if a.sandbox is not None}
    except SettingsError as exc:
        raise InputError(f"team: {exc}") from None
    return room, agents

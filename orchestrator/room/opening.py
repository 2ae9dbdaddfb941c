"""How a room opens, besides its record and its history: one value (`Opening`) holding what `Room.create` and
`Room.open` were given, with the skill roots and library read for its workspace and checked against its team.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import trio

from orchestrator.core.events import Event
from orchestrator.core.retry import RetryPolicy
from orchestrator.mcplink.servers import Hub
from orchestrator.memory.knowledge import KnowledgeBase
from orchestrator.memory.notes import Memory
from orchestrator.providers.base import Provider
from orchestrator.providers.catalog import ModelInfo
from orchestrator.providers.config import Config, load_config
from orchestrator.room.evolution import Settings as EvolveSettings, settings as evolve_settings
from orchestrator.room.sandboxes import sandboxes
from orchestrator.room.signals import weaknesses
from orchestrator.room.skills import check_skills, default_roots
from orchestrator.skills.library import Library, Root, discover
from orchestrator.store.contract import Store
from orchestrator.team.schema import Team
from orchestrator.tools.jail import Settings

Resolve = Callable[[str], tuple[Provider, str]]  # model string -> (provider, model id)
Catalog = Callable[[str], "ModelInfo | None"]  # model string -> its window and compaction point, if known


@dataclass(frozen=True, kw_only=True)
class Opening:
    store: Store
    team: Team
    resolve: Resolve
    workspace: Path
    retry: RetryPolicy
    on_event: Callable[[Event], None] | None
    can_confirm: bool
    knowledge: KnowledgeBase | None
    models: Catalog | None
    mcp: Hub | None
    skill_roots: list[Root]  # read again by reload_skills
    library: Library
    evolve: EvolveSettings | None  # the self-improvement pass (None: this room does not run it)
    weaknesses: list[str]  # the known weaknesses in the notes, as the pass's signals look for them
    sandbox: Settings  # the room's shell sandbox
    agent_sandboxes: dict[str, Settings]  # of the members that set their own


async def opening(store: Store, team: Team, resolve: Resolve, workspace: Path, skill_roots: Sequence[Root] | None, *,
                  retry: RetryPolicy, on_event: Callable[[Event], None] | None, can_confirm: bool,
                  knowledge: KnowledgeBase | None, models: Catalog | None, mcp: Hub | None,
                  evolve: bool, config: Config | None) -> Opening:
    """`config`: config.toml as the program read it (a `Runtime` reads it once); None: read now, off the event
    loop. `skill_roots` None: the roots its [skills] names for the workspace, found off the event loop (it reads
    the folders too), as is the library; a member naming a skill that is not there is an error here. `evolve`:
    the program's --evolve, on top of the team's."""
    if config is None:
        config = await trio.to_thread.run_sync(load_config)
    room_sandbox, agent_sandboxes = sandboxes(team, workspace, config)
    evolving = evolve_settings(team, config.evolve, str(config.path), on=evolve)
    topics = weaknesses(await Memory(store).entries("notes")) if evolving else []
    if skill_roots is None:
        skill_roots = await trio.to_thread.run_sync(partial(default_roots, workspace, config=config))
    library = await trio.to_thread.run_sync(discover, skill_roots)
    check_skills(team, library)
    return Opening(store=store, team=team, resolve=resolve, workspace=workspace, retry=retry, on_event=on_event,
                   can_confirm=can_confirm, knowledge=knowledge, models=models, mcp=mcp,
                   skill_roots=list(skill_roots), library=library, evolve=evolving, weaknesses=topics,
                   sandbox=room_sandbox, agent_sandboxes=agent_sandboxes)

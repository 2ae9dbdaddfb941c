"""How a room opens, besides its record and its history: one value (`Opening`) holding what `Room.create` and
`Room.open` were given, with the skill roots and library read for its workspace and checked against its team.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import trio

from orchestrator.core.events import Event
from orchestrator.core.retry import RetryPolicy
from orchestrator.mcplink.servers import Hub
from orchestrator.memory.knowledge import KnowledgeBase
from orchestrator.providers.base import Provider
from orchestrator.providers.catalog import ModelInfo
from orchestrator.room.skills import check_skills, default_roots
from orchestrator.skills.library import Library, Root, discover
from orchestrator.store.contract import Store
from orchestrator.team.schema import Team

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
    evolve: bool


async def opening(store: Store, team: Team, resolve: Resolve, workspace: Path, skill_roots: Sequence[Root] | None, *,
                  retry: RetryPolicy, on_event: Callable[[Event], None] | None, can_confirm: bool,
                  knowledge: KnowledgeBase | None, models: Catalog | None, mcp: Hub | None,
                  evolve: bool) -> Opening:
    """`skill_roots` None: the roots config.toml's [skills] names for the workspace, read off the event loop
    (it reads the folders too), as is the library; a member naming a skill that is not there is an error here."""
    if skill_roots is None:
        skill_roots = await trio.to_thread.run_sync(default_roots, workspace)
    library = await trio.to_thread.run_sync(discover, skill_roots)
    check_skills(team, library)
    return Opening(store=store, team=team, resolve=resolve, workspace=workspace, retry=retry, on_event=on_event,
                   can_confirm=can_confirm, knowledge=knowledge, models=models, mcp=mcp,
                   skill_roots=list(skill_roots), library=library, evolve=evolve)

"""orchestrator: a multi-agent group-chat orchestrator for LLM agents.

A room hosted by a commander, workers assigned through tool calls, one bus, one stop path. The names below are
the public API (`from orchestrator import Runtime, Team, Agent, tool, run`); everything else is importable but
not promised. They load on first use, so `import orchestrator` costs nothing and changes nothing.
"""
from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> the module that defines it
_WHERE = {
    # running rooms
    "Runtime": "orchestrator.runtime.runtime",
    "run": "orchestrator.runtime.blocking",
    "Conversation": "orchestrator.runtime.blocking",
    "Room": "orchestrator.room.room",
    "RoomHost": "orchestrator.room.host",
    "LeasedRooms": "orchestrator.room.leased",
    # teams
    "Team": "orchestrator.team.schema",
    "Agent": "orchestrator.team.schema",
    "Limits": "orchestrator.team.schema",
    "load_team": "orchestrator.team.loader",
    # tools
    "tool": "orchestrator.tools.functions",
    "function_tool": "orchestrator.tools.functions",
    "Tool": "orchestrator.tools.base",
    "ToolContext": "orchestrator.tools.base",
    "ToolOutput": "orchestrator.tools.base",
    "ToolError": "orchestrator.tools.errors",
    # models
    "Reply": "orchestrator.providers.scripted",
    "ScriptedProvider": "orchestrator.providers.scripted",
    # what a room says
    "Message": "orchestrator.core.types",
    "Event": "orchestrator.core.events",
    "MessageEvent": "orchestrator.core.events",
    "TextDeltaEvent": "orchestrator.core.events",
    "ToolStart": "orchestrator.core.events",
    "ToolEnd": "orchestrator.core.events",
    "TaskEvent": "orchestrator.core.events",
    "Confirm": "orchestrator.core.events",
    "Done": "orchestrator.core.events",
    "ErrorEvent": "orchestrator.core.events",
    "Cancelled": "orchestrator.core.events",
    # errors
    "OrchestratorError": "orchestrator.core.errors",
    "InputError": "orchestrator.core.errors",
    "ProviderError": "orchestrator.core.errors",
    "RoomNotFound": "orchestrator.core.errors",
    # storage
    "Store": "orchestrator.store.contract",
    "open_store": "orchestrator.store.backends",
}
_ALIASES = {"Agent": "AgentDef"}

__all__ = [
    "Agent",
    "Cancelled",
    "Confirm",
    "Conversation",
    "Done",
    "ErrorEvent",
    "Event",
    "InputError",
    "LeasedRooms",
    "Limits",
    "Message",
    "MessageEvent",
    "OrchestratorError",
    "ProviderError",
    "Reply",
    "Room",
    "RoomHost",
    "RoomNotFound",
    "Runtime",
    "ScriptedProvider",
    "Store",
    "TaskEvent",
    "Team",
    "TextDeltaEvent",
    "Tool",
    "ToolContext",
    "ToolEnd",
    "ToolError",
    "ToolOutput",
    "ToolStart",
    "function_tool",
    "load_team",
    "open_store",
    "run",
    "tool",
]

if TYPE_CHECKING:
    from orchestrator.core.errors import InputError, OrchestratorError, ProviderError, RoomNotFound
    from orchestrator.core.events import (Cancelled, Confirm, Done, ErrorEvent, Event, MessageEvent, TaskEvent,
                                          TextDeltaEvent, ToolEnd, ToolStart)
    from orchestrator.core.types import Message
    from orchestrator.providers.scripted import Reply, ScriptedProvider
    from orchestrator.room.host import RoomHost
    from orchestrator.room.leased import LeasedRooms
    from orchestrator.room.room import Room
    from orchestrator.runtime.blocking import Conversation, run
    from orchestrator.runtime.runtime import Runtime
    from orchestrator.store.backends import open_store
    from orchestrator.store.contract import Store
    from orchestrator.team.loader import load_team
    from orchestrator.team.schema import AgentDef as Agent
    from orchestrator.team.schema import Limits, Team
    from orchestrator.tools.base import Tool, ToolContext, ToolOutput
    from orchestrator.tools.errors import ToolError
    from orchestrator.tools.functions import function_tool, tool


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'orchestrator' has no attribute {name!r}")
    value = getattr(import_module(where), _ALIASES.get(name, name))
    globals()[name] = value  # later reads are plain lookups
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])

"""The built-in tools an agent definition may name: the file tools and the shell tools.

One map, so the room, the loader's checks and the docs all see the same names.
The room-made tools are named here too, so a definition is checked before any room exists.
"""
from __future__ import annotations

import msgspec

from orchestrator.tools.base import Tool
from orchestrator.tools.files import FILE_TOOLS
from orchestrator.tools.kb_tool import SearchKnowledgeArgs
from orchestrator.tools.memory_tool import MemoryArgs
from orchestrator.tools.search import SEARCH_TOOLS
from orchestrator.tools.shell import SHELL_TOOLS

BUILTIN: dict[str, Tool] = {t.name: t for t in (*FILE_TOOLS, *SEARCH_TOOLS, *SHELL_TOOLS)}

# Tools a room builds over its own stores (the user's memory, the knowledge base): granted by name like the
# rest; their arguments are known before any room exists, so scripted calls to them are checked at load time.
ROOM_TOOLS: dict[str, type[msgspec.Struct]] = {"memory": MemoryArgs, "search_knowledge": SearchKnowledgeArgs}


def tool_args(name: str) -> type[msgspec.Struct] | None:
    """The arguments Struct of a built-in or room-made tool, None for any other name."""
    if name not in BUILTIN:
        return ROOM_TOOLS.get(name)
    args = BUILTIN[name].args
    assert not isinstance(args, dict)  # only a tool an MCP server brings has a JSON schema for arguments
    return args


def tool_names() -> list[str]:
    return [*BUILTIN, *ROOM_TOOLS]

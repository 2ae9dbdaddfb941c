"""The `memory` tool: the only way a model writes the cross-session profile and notes.

The room builds it from its Memory with memory_tool(); every write is scanned before it is stored.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import msgspec

from orchestrator.memory.notes import Memory, NoteError, Target
from orchestrator.tools.base import Tool, ToolContext, ToolError


class MemoryArgs(msgspec.Struct, forbid_unknown_fields=True):
    action: Literal["add", "replace", "remove"]
    target: Literal["profile", "notes"]
    content: str = ""
    old_text: str = ""


def _description(caps: Mapping[Target, int]) -> str:
    return (
        "Keep something in the cross-session memory. It is shown to every agent in its system prompt from the "
        "next turn on, in this session and later ones. `target`: `profile` for stable facts about the user (name, "
        "role, language, how they like to work); `notes` for durable facts about the work. Keep, first, "
        "corrections and preferences the user stated (\"call me Sam\", \"no emojis in commit messages\"); then "
        "durable decisions and conventions (\"we stay on SQLite\", \"tests live in tests/unit\"). Do not keep "
        "transient task state or progress, one-off debug output, or anything easy to find again (file contents, "
        "command output, what the code or docs already say). Actions: `add` a new entry with `content` (one "
        "short, self-contained fact); `replace` the exact text `old_text` inside one entry with `content`, to "
        "correct or update it; `remove` the entry that contains `old_text`. Copy `old_text` from the memory as "
        f"shown. The profile holds at most {caps['profile']:,} characters and the notes {caps['notes']:,}: when "
        "full, remove or shorten stale entries first. An entry already kept is not added twice. Writes are "
        "scanned: text that gives agents instructions, imitates role markup, asks for keys or secrets, or hides "
        "invisible characters is refused."
    )


def memory_tool(memory: Memory) -> Tool:
    async def run(args: MemoryArgs, ctx: ToolContext) -> str:
        if args.action == "add" and args.old_text:
            raise ToolError("add takes only `content`; to change an entry, use replace with `old_text`")
        if args.action != "add" and not args.old_text:
            raise ToolError(f"{args.action} needs `old_text`: the exact text of the entry to "
                            f"{'change' if args.action == 'replace' else 'remove'}, as the memory shows it")
        try:
            if args.action == "add":
                return await memory.add(args.target, args.content)
            if args.action == "replace":
                return await memory.replace(args.target, args.old_text, args.content)
            return await memory.remove(args.target, args.old_text)
        except NoteError as exc:
            raise ToolError(str(exc)) from None

    return Tool("memory", _description(memory.caps), MemoryArgs, run)

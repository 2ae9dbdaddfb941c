"""File tools for agents, all behind the workspace sandbox.

read_file reads a character range with a size cap and tells the model how to read on.
"""
from __future__ import annotations

import msgspec
import trio

from orchestrator.tools.base import Tool, ToolContext, ToolError
from orchestrator.tools.sandbox import resolve

READ_CAP = 50_000
_FILE_IO = trio.CapacityLimiter(8)


class ReadArgs(msgspec.Struct, forbid_unknown_fields=True):
    path: str
    offset: int = 0
    limit: int = READ_CAP


def _read(path, offset: int, limit: int) -> tuple[str, int]:
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    return text[offset:offset + limit], len(text)


async def read_file(args: ReadArgs, ctx: ToolContext) -> str:
    target = resolve(ctx.workspace, args.path)
    if not target.is_file():
        raise ToolError(f"{args.path}: no such file in the workspace")
    limit = max(1, min(args.limit, READ_CAP))
    chunk, total = await trio.to_thread.run_sync(_read, target, max(0, args.offset), limit, limiter=_FILE_IO)
    end = args.offset + len(chunk)
    if end < total:
        chunk += f"\n[showing characters {args.offset}-{end} of {total}; call read_file with offset={end} to read on]"
    return chunk


READ_FILE = Tool(
    "read_file",
    "Read a text file in the workspace. Large files come in pieces: pass `offset` (characters) "
    "to continue where the previous read stopped.",
    ReadArgs, read_file, read_only=True,
)

BUILTIN = {t.name: t for t in (READ_FILE,)}

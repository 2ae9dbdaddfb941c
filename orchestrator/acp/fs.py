"""The agent's fs/read_text_file and fs/write_text_file, answered by the room's own file tools: the same path
sandbox, the same read-before-write ledger, the same protected names, so an external agent is held as a member is.
"""
from __future__ import annotations

from typing import Any

from orchestrator.acp.jsonrpc import INVALID_PARAMS, RpcError
from orchestrator.tools.base import ToolContext, ToolError
from orchestrator.tools.files import WriteArgs, _io, _lines, _read, write_file


def _text(params: Any, key: str) -> str:
    value = params.get(key) if isinstance(params, dict) else None
    if not isinstance(value, str):
        raise RpcError(INVALID_PARAMS, f"`{key}` must be a string")
    return value


def _count(params: dict[str, Any], key: str) -> int | None:
    value = params.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise RpcError(INVALID_PARAMS, f"`{key}` must be a whole number of lines")
    return value


async def read_text_file(ctx: ToolContext, params: Any) -> dict[str, Any]:
    """The file's text (from 1-based `line`, at most `limit` lines); the read is recorded as read_file's is."""
    raw = _text(params, "path")
    line, limit = _count(params, "line"), _count(params, "limit")
    try:
        path, text, state = await _io(_read, ctx.session, raw)
    except ToolError as exc:
        raise RpcError(INVALID_PARAMS, str(exc)) from None
    ctx.session.reads.record(ctx.agent, path, state)
    if line is None and limit is None:
        return {"content": text}
    first = max(1, line or 1) - 1
    lines = _lines(text)
    return {"content": "".join(lines[first:None if limit is None else first + limit])}


async def write_text_file(ctx: ToolContext, params: Any) -> None:
    """The whole file written as write_file writes it: a file that exists must have been read first, unchanged."""
    try:
        await write_file(WriteArgs(_text(params, "path"), _text(params, "content")), ctx)
    except ToolError as exc:
        raise RpcError(INVALID_PARAMS, str(exc)) from None
    return None

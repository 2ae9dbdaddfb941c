"""Readable exports of a stored room: Markdown here; JSON lines are the `message` events themselves.

Hidden messages (the user could not see them) are marked, so an export is an honest record.
"""
from __future__ import annotations

import datetime as dt

from orchestrator.core.types import Message
from orchestrator.store.db import RoomRecord


def to_markdown(record: RoomRecord, messages: list[Message]) -> str:
    lines = [f"# {record.name} ({record.id})", "", f"Floor: {record.floor}", ""]
    for m in messages:
        when = dt.datetime.fromtimestamp(m.ts, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        hidden = "" if "user" in m.visible_to else " (hidden from the user)"
        head = f"**{m.author}** · {m.kind} · #{m.seq} · {when}{hidden}"
        body = m.text
        if m.kind == "tool_call":
            body += "".join(f"\n- calls `{c.name}` {c.input}" for c in m.calls)
        elif m.kind == "tool_result" and m.result:
            flag = " (error)" if m.result.is_error else ""
            body = f"`{m.result.name}` result{flag}:\n\n```\n{m.result.content}\n```"
        lines += [head, "", body.strip(), ""]
    return "\n".join(lines)

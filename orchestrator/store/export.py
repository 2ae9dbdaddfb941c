"""Readable exports of a stored room: Markdown here; JSON lines are the `message` events themselves.

Hidden messages (the user could not see them) are marked, so an export is an honest record. Text that
Markdown would read as HTML (`<handback />`) gets Markdown's own escape outside code, a backslash before
the `<`, so the file reads as written and a renderer shows it as written too.
"""
from __future__ import annotations

import datetime as dt
import re

import msgspec

from orchestrator.core.types import Message
from orchestrator.store.records import RoomRecord

_TAG = re.compile(r"<(?=[A-Za-z/!?])")
_FENCE = re.compile(r"^\s*(```|~~~)")


def to_markdown(record: RoomRecord, messages: list[Message]) -> str:
    lines = [f"# {record.name} ({record.id})", "", f"Floor: {record.floor}", ""]
    for m in messages:
        when = dt.datetime.fromtimestamp(m.ts, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        hidden = "" if "user" in m.visible_to else " (hidden from the user)"
        who = f"**{m.author}**"
        if m.kind == "task":
            to = [v for v in m.visible_to if v not in ("user", m.author)]
            who += "".join(f" → **{v}**" for v in to)
        head = f"{who} · {m.kind} · #{m.seq} · {when}{hidden}"
        body = escape(m.text)
        if m.kind == "tool_call":
            body += "".join(f"\n- calls `{c.name}` with `{msgspec.json.encode(c.input).decode()}`" for c in m.calls)
        elif m.kind == "tool_result" and m.result:
            flag = " (error)" if m.result.is_error else ""
            body = f"`{m.result.name}` result{flag}:\n\n```\n{m.result.content}\n```"
        lines += [head, "", body.strip(), ""]
    return "\n".join(line.rstrip() for line in lines)


def escape(text: str) -> str:
    """`<` that would open an HTML tag, backslash-escaped, except inside fenced blocks and `code spans`."""
    out, fenced = [], False
    for line in text.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            parts = line.split("`")
            line = "`".join(_TAG.sub(r"\\<", p) if i % 2 == 0 else p for i, p in enumerate(parts))
        out.append(line)
    return "\n".join(out)

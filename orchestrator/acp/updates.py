"""One session/update in the room's words (Update): a chunk of the agent's message or thought, a tool call
as one line, a plan; what the agent sends is cut to size and anything unknown is kept as "other".
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

MAX_TEXT = 100_000  # characters of one update's text the room is handed
MAX_CALLS = 1_000  # tool calls whose titles are remembered within one prompt

Kind = Literal["text", "thought", "tool", "plan", "other"]


@dataclass(frozen=True)
class Update:
    """One session/update: `text` is the chunk (text, thought), one line such as "read_file src/x.py
    (completed)" (tool), or the plan's entries, one a line (plan)."""
    kind: Kind
    text: str
    tool_call_id: str | None
    raw: dict[str, Any]


def _s(value: Any, cap: int = MAX_TEXT) -> str:
    return value[:cap] if isinstance(value, str) else ""


@dataclass
class Reader:
    """Reads one prompt's updates; remembers tool calls' titles so an update without one still says which."""
    titles: dict[str, str] = field(default_factory=dict)

    def read(self, update: Any) -> Update:
        if not isinstance(update, dict):
            return Update("other", "", None, {})
        kind = update.get("sessionUpdate")
        if kind in ("agent_message_chunk", "agent_thought_chunk"):
            content = update.get("content")
            text = _s(content.get("text")) if isinstance(content, dict) and content.get("type") == "text" else ""
            return Update("text" if kind == "agent_message_chunk" else "thought", text, None, update)
        if kind in ("tool_call", "tool_call_update"):
            call = _s(update.get("toolCallId"), 200) or None
            title = _s(update.get("title"), 300) or self.titles.get(call or "", "") or _s(update.get("kind"), 40)
            if call and title and (call in self.titles or len(self.titles) < MAX_CALLS):
                self.titles[call] = title
            status = _s(update.get("status"), 40) or ("pending" if kind == "tool_call" else "")
            line = " ".join(title.split()) or "tool call"
            return Update("tool", f"{line} ({status})" if status else line, call, update)
        if kind == "plan":
            given = update.get("entries")
            entries: list[Any] = given if isinstance(given, list) else []
            lines = [f"[{_s(e.get('status'), 40) or 'pending'}] {' '.join(_s(e.get('content'), 1000).split())}"
                     for e in entries[:200] if isinstance(e, dict)]
            return Update("plan", "\n".join(lines), None, update)
        return Update("other", "", None, update)

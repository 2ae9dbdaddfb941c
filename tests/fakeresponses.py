"""OpenAI's Responses API as the loopback vendor streams it, for the tests that run Codex: a reply's server-sent
events in the order the API sends them, to queue on a FakeServer (which records each request it answers).
"""
from __future__ import annotations

from typing import Any

from tests.fakeserver import Reply, sse

RESPONSE = "resp_1"
ITEM = "msg_1"
# Where a reply's text deltas begin: after created, in_progress, output_item.added and content_part.added.
FIRST_DELTA = 4


def events(*pieces: str) -> list[dict[str, Any]]:
    """A whole response whose one assistant message arrives as `pieces`, with its usage at the end."""
    text = "".join(pieces)
    response = {"id": RESPONSE, "object": "response", "status": "in_progress", "output": []}
    item = {"id": ITEM, "type": "message", "role": "assistant", "status": "in_progress", "content": []}
    part = {"item_id": ITEM, "output_index": 0, "content_index": 0}
    done = {**item, "status": "completed", "content": [{"type": "output_text", "text": text, "annotations": []}]}
    usage = {"input_tokens": 120, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": len(pieces),
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 120 + len(pieces)}
    return [
        {"type": "response.created", "response": response},
        {"type": "response.in_progress", "response": response},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.content_part.added", **part, "part": {"type": "output_text", "text": "", "annotations": []}},
        *({"type": "response.output_text.delta", **part, "delta": piece} for piece in pieces),
        {"type": "response.output_text.done", **part, "text": text},
        {"type": "response.content_part.done", **part, "part": done["content"][0]},
        {"type": "response.output_item.done", "output_index": 0, "item": done},
        {"type": "response.completed", "response": {**response, "status": "completed", "output": [done],
                                                    "usage": usage}},
    ]


def reply(*pieces: str) -> Reply:
    """The streamed response whose message is `pieces`, one delta each, ending the turn."""
    return Reply(chunks=sse(*events(*pieces), event_names=True))


def stalled(first: str, *rest: str, seconds: float) -> Reply:
    """The streamed response that sends `first` and then falls silent for `seconds` before the rest."""
    return Reply(chunks=sse(*events(first, *rest), event_names=True), stall=seconds, stall_at=FIRST_DELTA + 1)


def said(request: dict[str, Any]) -> list[str]:
    """The user's texts in a recorded Responses request, in order (what Codex sent the model as the user's)."""
    return [part.get("text", "") for item in request["json"]["input"]
            if item.get("type") == "message" and item.get("role") == "user" for part in item["content"]]

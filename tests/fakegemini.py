"""The Gemini API as the loopback vendor streams it, for the tests that run Gemini CLI: a streamGenerateContent
reply's server-sent events, to queue on a FakeServer (which records each request it answers).
"""
from __future__ import annotations

from typing import Any

from tests.fakeserver import Reply, sse


def path(model: str) -> str:
    """The request path of a streamed generation by `model`, as Gemini CLI asks it."""
    return f"/v1beta/models/{model}:streamGenerateContent?alt=sse"


def events(*pieces: str) -> list[dict[str, Any]]:
    """A whole streamed generation whose one candidate's text arrives as `pieces`, the last with its finish
    reason and the usage."""
    out: list[dict[str, Any]] = [{"candidates": [{"content": {"role": "model", "parts": [{"text": piece}]},
                                                  "index": 0}]} for piece in pieces]
    out[-1]["candidates"][0]["finishReason"] = "STOP"
    out[-1]["usageMetadata"] = {"promptTokenCount": 120, "candidatesTokenCount": len(pieces),
                                "totalTokenCount": 120 + len(pieces)}
    return out


def reply(*pieces: str) -> Reply:
    """The streamed generation whose text is `pieces`, one event each, ending the turn."""
    return Reply(chunks=sse(*events(*pieces)))


def stalled(first: str, *rest: str, seconds: float) -> Reply:
    """The streamed generation that sends `first` and then falls silent for `seconds` before the rest."""
    return Reply(chunks=sse(*events(first, *rest)), stall=seconds, stall_at=1)


def said(request: dict[str, Any]) -> list[str]:
    """The user's texts in a recorded generation request, in order (what Gemini CLI sent the model as the
    user's)."""
    return [part["text"] for content in request["json"]["contents"] if content.get("role") == "user"
            for part in content["parts"] if "text" in part]

"""A group stop while a real reply streams reaches llama-server: it cancels the request and frees the slot
while the CLI is still running, and the room takes the next line afterwards (d).
"""
from __future__ import annotations

import time
from typing import Any

from tests.live.lab import Lab
from tests.live.llama import Server

RELEASE_SECONDS = 25  # the bound for the server to see the stop; it takes well under a second when idle
NEXT_LINE_AFTER = 30  # the next line waits longer than that bound: the CLI is alive while the server is watched

STOP = f"""\
    name: live-stop
    description: The group stop during a long streamed reply.
    team:
      agents:
        - name: helper
          description: Writes stories.
          model: lab/smollm2
    turns:
      - user: "@helper Write a very long story about a dragon, at least two thousand words."
      - {{after: 4, stop: true}}
      - {{after: {NEXT_LINE_AFTER}, user: "@helper What is two plus two?"}}
    """


def _cancels(server: Server) -> int:
    # llama-server logs this when the client of a request goes away before the reply is whole; a reply that ran
    # to its end is released without it.
    return server.log_text().count("cancel task")


def test_d_stop_during_streaming_reaches_the_server(lab: Lab, server: Server) -> None:
    before = _cancels(server)
    seen: dict[str, Any] = {"deltas": 0}

    def on_event(ev: dict[str, Any], now: float) -> None:
        if ev["type"] == "text_delta" and ev.get("agent") == "helper" and "stopped" not in seen:
            seen["deltas"] += 1
        if ev["type"] != "cancelled" or "stopped" in seen:
            return
        seen["stopped"] = now
        while time.monotonic() - now < RELEASE_SECONDS:
            if server.busy() == 0 and _cancels(server) > before:
                seen["released"] = time.monotonic() - now
                return
            time.sleep(0.1)

    result = lab.watch(STOP, "stop", on_event)
    assert result.code == 0, result.explain()
    assert "stopped" in seen, f"no `cancelled` event\n{result.explain()}"
    assert seen["deltas"] >= 2, f"the stop came before the reply streamed ({seen['deltas']} deltas)"
    assert "released" in seen, (f"llama-server still served the stopped request {RELEASE_SECONDS} s after the "
                                f"stop (slots busy: {server.busy()}; new cancel lines: {_cancels(server) - before})")
    # The room carries on: the line after the stop gets its answer.
    users = [i for i, e in enumerate(result.events) if e["type"] == "message" and e.get("author") == "user"]
    after = [e for e in result.events[users[-1]:] if e["type"] == "message" and e.get("author") == "helper"
             and e.get("kind") == "text" and e["text"].strip()]
    assert after, f"no answer to the line after the stop\n{result.explain()}"

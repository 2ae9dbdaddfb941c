"""The server's 2048-token window, learned rather than configured: `orchestrator models` shows it (h), and a
room whose history outgrows it carries on, answering the line that overflowed and the ones after it (e).
"""
from __future__ import annotations

import json

import httpx

from tests.live.lab import Lab
from tests.live.llama import ALIAS, WINDOW, Server

LINE_TOKENS = 1100  # one line fits the window with room for a reply; two lines with their replies do not


def _passage(server: Server, topic: str, tokens: int) -> str:
    """Plain varied prose of about `tokens` tokens, as the server's own tokenizer counts them."""
    sentences = []
    i = 0
    while True:
        i += 1
        sentences.append(f"In the {topic} record number {i}, the keeper wrote that {i * 7 % 31} boats "
                         f"passed before noon and {i * 11 % 17} after it, under a {('grey', 'clear', 'windy')[i % 3]} sky.")
        if i % 10 == 0:
            text = " ".join(sentences)
            resp = httpx.post(f"{server.url}/tokenize", json={"content": text}, timeout=30)
            resp.raise_for_status()
            if len(resp.json()["tokens"]) >= tokens:
                return text


def test_h_models_shows_the_learned_window(lab: Lab) -> None:
    result = lab.cli("models", "--json")
    checks = {c["name"]: c for c in map(json.loads, result.stdout.splitlines()) if c}
    lab_check = checks["lab"]
    assert lab_check["configured"] and all(c["ok"] for c in lab_check["candidates"]), lab_check
    assert lab_check["candidates"][0].get("windows") == {ALIAS: WINDOW}, lab_check
    assert result.code == 0, result.explain()
    text = lab.cli("models")
    assert f"{ALIAS}: a {WINDOW:,}-token context window, as the server reports it" in text.stdout, text.explain()


def test_e_window_overflow_is_handled_with_the_learned_window(lab: Lab, server: Server) -> None:
    """Line 2 plus the history before it is more than the window; the config names no window for the model,
    so the room must go by the one the server reports."""
    first, second = (_passage(server, topic, LINE_TOKENS) for topic in ("harbour", "river"))
    result = lab.run(f"""\
        name: live-window
        description: A history larger than the model's window.
        team:
          agents:
            - name: helper
              description: Summarizes records.
              model: lab/smollm2
        turns:
          - user: {json.dumps("@helper " + first + " In one sentence, what is this record about?")}
          - user: {json.dumps("@helper " + second + " In one sentence, what is this record about?")}
          - user: "@helper What is the capital of France?"
        """, "window")
    assert result.code == 0, result.explain()
    assert not result.of("error"), f"a turn failed: {result.of('error')}"
    # Each line got its own answer from the model, the overflowing one included (a summary of the older history
    # may come between a line and its answer).
    answers: list[list[str]] = []
    for e in result.of("message"):
        if e["author"] == "user":
            answers.append([])
        elif e["author"] == "helper" and e["kind"] == "text" and e["text"].strip() and answers:
            answers[-1].append(e["text"])
    assert len(answers) == 3 and all(answers), f"answers per line: {answers}\n{result.explain()}"
    usages = result.of("usage", "helper")
    assert all(not u["estimated"] and u["input_tokens"] + u["output_tokens"] <= WINDOW for u in usages), usages

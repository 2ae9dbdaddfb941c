"""One real agent on llama-server through `orchestrator run`: streamed text and the server's own token counts,
over Chat Completions (a), with the config file's output cap (f), and over the Anthropic Messages route (g).
"""
from __future__ import annotations

import json

from tests.live.lab import Lab, Result

ONE_AGENT = """\
    name: live-{name}
    description: One real agent answers one line.
    team:
      agents:
        - name: helper
          description: Answers questions.
          model: {model}
    turns:
      - user: "@helper {line}"
    """


def _one(lab: Lab, name: str, model: str, line: str) -> Result:
    return lab.run(ONE_AGENT.format(name=name, model=model, line=line), name)


def _streamed_with_usage(result: Result) -> dict:
    """The one answer arrived in several deltas, was stored, and its counts are the server's (not estimated)."""
    assert result.code == 0, result.explain()
    assert not result.of("error"), result.of("error")
    deltas = result.of("text_delta", "helper")
    assert len(deltas) >= 2, f"the reply did not stream: {len(deltas)} text_delta event(s)\n{result.explain()}"
    said = result.said("helper")
    assert said and said[-1].strip(), result.explain()
    assert "".join(d["text"] for d in deltas).strip() == said[-1].strip(), "the stored reply is not what streamed"
    (usage,) = result.of("usage", "helper")
    assert usage["estimated"] is False, usage
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0, usage
    return usage


def test_a_one_agent_streams_with_real_usage(lab: Lab) -> None:
    result = _one(lab, "stream", "lab/smollm2", "Name three colours.")
    usage = _streamed_with_usage(result)
    assert usage["provider"] == "lab", usage
    # What the room stored, read back through the CLI: the server's counts, none of them an estimate.
    room = result.events[0]["room"]
    shown = lab.cli("show", room, "--db", str(lab.db("stream")), "--usage", "--json")
    assert shown.code == 0, shown.explain()
    total = json.loads(shown.stdout)["total"]
    assert total["calls"] == 1 and total["estimated_calls"] == 0, total
    assert total["input_tokens"] == usage["input_tokens"] > 0, total
    assert total["output_tokens"] == usage["output_tokens"] > 0, total


def test_f_output_cap_reaches_the_server(lab: Lab) -> None:
    """`[models."lab/capped"] max_output = 32` (lab.config): a reply asked to be long stops at 32 tokens."""
    result = _one(lab, "capped", "lab/capped", "Write a long story about a dragon, at least five hundred words.")
    assert result.code == 0, result.explain()
    (usage,) = result.of("usage", "helper")
    assert usage["estimated"] is False, usage
    assert 0 < usage["output_tokens"] <= 32, f"the cap of 32 output tokens was not honoured: {usage}"
    (done,) = result.of("done", "helper")
    # Cut by the cap, not finished early: otherwise the bound above would prove nothing.
    assert done["stop_reason"] == "max_tokens", done


def test_g_anthropic_messages_route(lab: Lab) -> None:
    """The same server through its /v1/messages route, as an endpoint of kind "anthropic"."""
    usage = _streamed_with_usage(_one(lab, "messages", "labmsg/smollm2", "Name three animals."))
    assert usage["provider"] == "labmsg", usage

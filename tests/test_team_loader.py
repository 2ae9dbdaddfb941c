"""Agent definition files: front matter plus body, and their one-line error messages.

Also the shipped default team (agents/*.md): four workers, the tutor interactive.
"""
from __future__ import annotations

import pytest

from orchestrator.team.loader import default_team, load_agent_file
from orchestrator.core.errors import InputError


def test_front_matter_and_body(tmp_path):
    path = tmp_path / "analyst.md"
    path.write_text("---\n"
                    "name: analyst\n"
                    "description: Crunches numbers.\n"
                    "model: openai/gpt-4.1-mini\n"
                    "tools: [read_file, bash]\n"
                    "interactive: true\n"
                    "context_window: 128000\n"
                    "request_budget: 100000\n"
                    "---\n"
                    "\n"
                    "You analyse data.\n\n---\n\nA rule inside the body stays in the body.\n")
    agent = load_agent_file(path)
    assert (agent.name, agent.description, agent.model, agent.tools) == (
        "analyst", "Crunches numbers.", "openai/gpt-4.1-mini", ["read_file", "bash"])
    assert (agent.interactive, agent.context_window, agent.request_budget) == (True, 128000, 100000)
    assert agent.instructions == "You analyse data.\n\n---\n\nA rule inside the body stays in the body."


def test_defaults_name_from_the_file_and_model_from_the_room(tmp_path):
    path = tmp_path / "helper.md"
    path.write_text("---\n---\nHelp.\n")
    agent = load_agent_file(path)
    assert (agent.name, agent.model, agent.tools, agent.interactive) == ("helper", "", [], False)
    assert agent.instructions == "Help."


@pytest.mark.parametrize("text, line, fragment", [
    ("---\nname: a\nmodle: x\n---\nbody\n", 3, "unknown key `modle`; did you mean `model`? (at modle)"),
    ("---\nname: a\ntools: read_file\n---\nbody\n", 3, "expected a list, got a string (at tools)"),
    ("---\nname: a\ninstructions: hi\n---\nbody\n", 3, "unknown key `instructions`: the instructions are"),
    ("---\nname: Bad Name\n---\nbody\n", 2, "bad agent name `Bad Name`"),
    ("---\nname: a\n  tools: [x\n---\nbody\n", 3, "invalid YAML"),
    ("no front matter here\n", 1, "missing front matter"),
    ("", 1, "missing front matter"),
    ("---\nname: a\nbody without a closing line\n", 1, "never closed"),
], ids=["unknown key", "wrong type", "instructions key", "bad name", "syntax", "no front matter", "empty",
        "unclosed"])
def test_bad_front_matter_message(tmp_path, text, line, fragment):
    path = tmp_path / "agent.md"
    path.write_text(text)
    with pytest.raises(InputError) as caught:
        load_agent_file(path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}:{line}: "), message
    assert fragment in message, message


def test_default_team_is_the_shipped_agents():
    team = default_team()
    assert team.commander.name == "commander"
    assert [a.name for a in team.agents] == ["coder", "researcher", "reviewer", "tutor"]
    by_name = {a.name: a for a in team.agents}
    assert by_name["tutor"].interactive is True and by_name["tutor"].tools == []
    assert "<handback />" in by_name["tutor"].instructions
    assert not any(by_name[n].interactive for n in ("coder", "researcher", "reviewer"))
    assert by_name["researcher"].tools == ["read_file", "grep_files", "search_files"]
    assert by_name["coder"].tools == ["read_file", "write_file", "edit_file", "bash"]
    assert by_name["reviewer"].tools == ["read_file", "grep_files"]
    assert all(a.model == "" and a.description and a.instructions for a in team.agents)

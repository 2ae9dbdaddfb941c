"""Agent definition files (agents/*.md): YAML front matter for the settings, the body for the instructions.

Also the default team: every shipped definition except the commander's, under the built-in commander.
"""
from __future__ import annotations

from pathlib import Path

import msgspec

from orchestrator.core.errors import InputError
from orchestrator.resources import data_dir
from orchestrator.scenario.loader import Document, read_text
from orchestrator.scenario.schema import AgentDef, Team, agent_name_problem

# Keys of AgentDef that a definition file cannot set: why, for the message.
_NOT_IN_FRONT_MATTER = {
    "instructions": "the instructions are the body after the closing `---`",
    "from": "only scenario and team files point at a definition file",
}


def load_agent_file(path: str | Path) -> AgentDef:
    """Parse one definition file. `name` defaults to the file's stem; `model` "" means the room default."""
    name = str(path)
    lines = read_text(path).splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise InputError(f"{name}:1: missing front matter: an agent file starts with a `---` line, then YAML "
                         "keys (name, description, model, tools, ...), then `---`, then the instructions")
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() == "---"), None)
    if end is None:
        raise InputError(f"{name}:1: the front matter opened here is never closed by a `---` line")
    doc = Document(name, "".join(lines[1:end]), first_line=2)
    keys = doc.keys(())
    for key, why in _NOT_IN_FRONT_MATTER.items():
        if key in keys:
            raise doc.error((key,), f"unknown key `{key}`: {why}", key=True)
    agent: AgentDef = AgentDef() if doc.node is None else doc.decode(AgentDef)
    agent = msgspec.structs.replace(agent, name=agent.name or Path(path).stem,
                                    instructions="".join(lines[end + 1:]).strip())
    # Reserved names are the team's concern: a commander.md may well be named `commander`.
    if problem := agent_name_problem(agent.name, allow_reserved=True):
        if "name" in keys:
            raise doc.error(("name",), problem)
        raise InputError(f"{name}:1: {problem} (from the file name)")
    return agent


def default_team() -> Team:
    """Every agents/*.md, sorted by name, under the commander of agents/commander.md (or the built-in one)."""
    agents: dict[str, AgentDef] = {}
    for path in sorted(data_dir("agents").glob("*.md")):
        if path.name == "commander.md":
            continue
        agent = load_agent_file(path)
        if problem := agent_name_problem(agent.name):
            raise InputError(f"{path}:1: {problem}")
        if agent.name in agents:
            raise InputError(f"{path}:1: duplicate agent name `{agent.name}` (also in {agents[agent.name].from_})")
        agents[agent.name] = msgspec.structs.replace(agent, from_=str(path))
    commander = data_dir("agents") / "commander.md"
    lead = load_agent_file(commander) if commander.is_file() else AgentDef()
    return Team(commander=msgspec.structs.replace(lead, name="commander"), agents=[agents[n] for n in sorted(agents)])

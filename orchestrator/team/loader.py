"""Loading teams: agent definition files (agents/*.md: YAML front matter, then the instructions), team
files, `from:` references, the checks a team needs before any room exists, and the default team.
"""
from __future__ import annotations

from pathlib import Path

import msgspec

from orchestrator.core.document import Document, Parts, read_text
from orchestrator.core.errors import InputError
from orchestrator.core.secrets import warn_literal
from orchestrator.mcplink import config as mcp_config
from orchestrator.core.resources import data_dir
from orchestrator.team.schema import AgentDef, Team, agent_name_problem

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


def default_team(folder: Path | None = None) -> Team:
    """Every *.md of `folder` (default: the shipped agents/), sorted by name, under the commander of its
    commander.md (else the shipped one, else the built-in one)."""
    folder = folder or data_dir("agents")
    agents: dict[str, AgentDef] = {}
    for path in sorted(folder.glob("*.md")):
        if path.name == "commander.md":
            continue
        agent = load_agent_file(path)
        if problem := agent_name_problem(agent.name):
            raise InputError(f"{path}:1: {problem}")
        if agent.name in agents:
            raise InputError(f"{path}:1: duplicate agent name `{agent.name}` (also in {agents[agent.name].from_})")
        agents[agent.name] = msgspec.structs.replace(agent, from_=str(path))
    commander = next((c for c in (folder / "commander.md", data_dir("agents") / "commander.md") if c.is_file()), None)
    lead = load_agent_file(commander) if commander else AgentDef()
    return Team(commander=msgspec.structs.replace(lead, name="commander"), agents=[agents[n] for n in sorted(agents)])


def _find_agent_file(ref: str, base: Path) -> Path | None:
    """`from:` resolves next to the scenario, else in the project's agents/ folder (`agents/x.md` or `x.md`)."""
    p = Path(ref).expanduser()
    if p.is_absolute():
        return p if p.is_file() else None
    agents = data_dir("agents")
    candidates = [base / p, agents / p]
    if p.parts[:1] == ("agents",):
        candidates.append(agents.joinpath(*p.parts[1:]))
    return next((c for c in candidates if c.is_file()), None)


def _with_file(doc: Document, at: Parts, entry: AgentDef, base: Path) -> AgentDef:
    """The entry merged over its `from:` file: keys written in the entry win."""
    if entry.from_ is None:
        return entry
    found = _find_agent_file(entry.from_, base)
    if found is None:
        raise doc.error(at + ("from",), f"agent file `{entry.from_}` not found next to the file or in "
                                        f"{data_dir('agents')}")
    try:
        defined = load_agent_file(found)
    except InputError as e:
        raise InputError(f"{e} (used by {doc.name}:{doc.line(at + ('from',))})") from None
    given = set(doc.keys(at))
    overrides = {f.name: getattr(entry, f.name)
                 for f in msgspec.structs.fields(AgentDef) if f.encode_name in given}
    return msgspec.structs.replace(defined, **{**overrides, "from_": str(found)})


def checked_team(doc: Document, at: Parts, team: Team, base: Path, default_model: str, *,
                 trusted: bool = False) -> Team:
    """`trusted`: the user named this file themselves (`--team`, `run FILE`), so its `py:` tools may be
    imported; an untrusted file naming one is refused at that line."""
    commander = _with_file(doc, at + ("commander",), team.commander, base)
    commander = msgspec.structs.replace(commander, name="commander", model=commander.model or default_model)
    _check_tools(doc, at + ("commander",), commander, trusted)
    if commander.acp is not None:
        raise doc.error(at + ("commander", "acp"), "the commander runs on a model of ours, it cannot be an external "
                                                   "agent: make this entry one of `agents:` instead", key=True)
    servers = {}
    for name, server in team.mcp_servers.items():
        if problem := mcp_config.check(name, server):
            raise doc.error(at + ("mcp_servers", name), problem, key=True)
        for parts, setting, value, secret in mcp_config.literals(name, server):
            warn_literal(f"{doc.name}:{doc.line(at + ('mcp_servers', name, *parts))}", setting, value, secret)
        # A relative `cwd` is the file's neighbour, wherever the orchestrator is started from.
        if server.cwd and not Path(server.cwd).expanduser().is_absolute() and "${" not in server.cwd:
            server = msgspec.structs.replace(server, cwd=str((base / server.cwd).resolve()))
        servers[name] = server
    _check_sandbox(doc, at + ("commander",), commander.sandbox)
    _check_sandbox(doc, at, team.sandbox)
    agents: list[AgentDef] = []
    first: dict[str, Parts] = {}
    for i, entry in enumerate(team.agents):
        where = at + ("agents", i)
        agent = _with_file(doc, where, entry, base)
        keys = doc.keys(where)
        name_at = where + ("name",) if "name" in keys else where + ("from",) if "from" in keys else where
        if problem := agent_name_problem(agent.name):
            raise doc.error(name_at, problem)
        if agent.name in first:
            raise doc.error(name_at, f"duplicate agent name `{agent.name}` "
                                     f"(also on line {doc.line(first[agent.name])})")
        first[agent.name] = name_at
        _check_tools(doc, where, agent, trusted)
        _check_sandbox(doc, where, agent.sandbox)
        if agent.acp is not None:
            _check_acp(doc, where, agent)
            agents.append(_acp_paths(agent, base))  # it brings its own model
            continue
        agents.append(msgspec.structs.replace(agent, model=agent.model or default_model))
    return msgspec.structs.replace(team, commander=commander, agents=agents, mcp_servers=servers)


def _check_tools(doc: Document, where: Parts, agent: AgentDef, trusted: bool) -> None:
    from orchestrator.tools.builtin import tool_names  # the tools package is heavier than the loader needs
    from orchestrator.tools.functions import ToolDefinitionError, imported, is_python_ref

    known = tool_names()
    for j, name in enumerate(agent.tools):
        if is_python_ref(name):
            problem = None
            if not trusted:
                problem = (f"`{name}` would import and run Python code, and this file is not one you named "
                           "yourself: pass it with --team (or trust the folder) to use Python tools")
            else:
                try:
                    imported(name)
                except ToolDefinitionError as exc:
                    problem = str(exc)
        elif mcp_config.is_grant(name):
            problem = mcp_config.grant_problem(name)
        elif name not in known:
            problem = f"unknown tool `{name}`; built-in tools: {', '.join(known)}; an MCP server's: `mcp:NAME`"
        else:
            problem = None
        if problem:
            at = where + ("tools", j) if "tools" in doc.keys(where) else where
            raise doc.error(at, problem)


def _check_acp(doc: Document, where: Parts, agent: AgentDef) -> None:
    """An external agent brings its own model and tools; what it runs is a command, and `${VAR}` in its command
    and env is left for the start (the value never lands in a stored team)."""
    assert agent.acp is not None
    keys = doc.keys(where)
    for key in ("model", "tools", "thinking", "context_window", "request_budget", "compact_at"):
        if key in keys and getattr(agent, key):
            raise doc.error(where + (key,), f"`{key}` is for members on a model of ours; `{agent.name}` is an "
                                            "external agent (`acp:`), which brings its own: remove one of the two",
                            key=True)
    acp_at = where + ("acp",)
    if not agent.acp.command or not all(part.strip() for part in agent.acp.command):
        raise doc.error(acp_at + ("command",) if "command" in doc.keys(acp_at) else acp_at,
                        "`command` is the agent's argv, e.g. [npx, -y, \"@zed-industries/claude-code-acp\"]")


def _acp_paths(agent: AgentDef, base: Path) -> AgentDef:
    """An argument of `acp.command` written `./x` or `../x` is the file's neighbour, as an MCP server's relative
    `cwd` is: the agent itself starts in the workspace, wherever that is."""
    assert agent.acp is not None
    argv = [str((base / a).resolve()) if a.startswith(("./", "../")) else a for a in agent.acp.command]
    return msgspec.structs.replace(agent, acp=msgspec.structs.replace(agent.acp, command=argv))


def _check_sandbox(doc: Document, where: Parts, raw: object) -> None:
    from orchestrator.tools.jail import Settings, SettingsError

    try:
        Settings.parse(raw)
    except SettingsError as exc:
        at = where + ("sandbox",) if "sandbox" in doc.keys(where) else where
        raise doc.error(at, str(exc)) from None


def load_team(path: str | Path, *, trusted: bool = False) -> Team:
    """Read and check a team file, a scenario's `team:` block on its own (a missing model stays "").
    `trusted`: the user chose this file, so it may name Python tools (`py:module:function`)."""
    doc = Document.read(path)
    if doc.node is None:
        raise doc.error((), "the file is empty: a team file holds `agents:` "
                            "(and optionally `commander:`, `limits:`)")
    scenario_keys = [k for k in ("team", "models", "turns", "expect", "name") if k in (doc.data or {})]
    if isinstance(doc.data, dict) and scenario_keys:
        raise doc.error((scenario_keys[0],), f"this is a scenario, not a team file: play it with `--scripted {path}`, "
                                   "or pass --team a file holding only its `team:` block's contents", key=True)
    return checked_team(doc, (), doc.decode(Team), Path(path).parent, default_model="", trusted=trusted)

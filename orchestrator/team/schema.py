"""A team as data: its members (AgentDef), its limits, and the rules for agent names.

Scenario files, team files and agents/*.md all decode into these Structs; the room runs them.
"""
from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from msgspec import Meta, Struct, field

from orchestrator.mcplink.config import ServerConfig

NonNegative = Annotated[float, Meta(ge=0)]
PositiveInt = Annotated[int, Meta(gt=0)]
Count = Annotated[int, Meta(ge=0)]

AGENT_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")
RESERVED_NAMES = frozenset({"commander", "user", "all", "worker", "room"})  # "room" authors notices
# Anonymous run_worker sub-agents are authored worker, worker-2, ...: an agent with such a name
# would be indistinguishable from them (and would be served the `worker` script queue).
WORKER_NAME = re.compile(r"worker(-\d+)?")


def agent_name_problem(name: str, *, allow_reserved: bool = False) -> str | None:
    """Why `name` cannot name a team agent, or None when it can."""
    if not name:
        return "an agent needs a `name`"
    if not allow_reserved and (name in RESERVED_NAMES or WORKER_NAME.fullmatch(name)):
        return f"`{name}` is a reserved name (commander, user, all, worker, worker-N); pick another"
    if not AGENT_NAME.fullmatch(name):
        return (f"bad agent name `{name}`: use 1-32 lowercase letters, digits, `-` or `_`, "
                "starting with a letter")
    return None


class Strict(Struct, forbid_unknown_fields=True, kw_only=True):
    pass


class Thinking(Strict):
    """Extended thinking for the agent's model (Anthropic): the reasoning budget, in tokens."""

    budget_tokens: Annotated[int, Meta(ge=1024)]  # Anthropic's floor


class AcpSpec(Strict):
    """An external agent spoken to over the Agent Client Protocol (its stdio) instead of a model: how to start it."""

    command: list[str]  # argv; `${VAR}` is filled in from the environment at start, like an MCP server's
    env: dict[str, str] = {}  # on top of the few variables it inherits; `${VAR}` here too
    # Files of the agent's own configuration (e.g. ~/.claude.json) copied into its private HOME at start: only
    # the paths the user names here leave the user's HOME.
    home_files: list[str] = []
    network: bool = True  # it needs its model's API
    start_timeout: Annotated[float, Meta(gt=0)] = 30


class AgentDef(Strict):
    """A team member, as written in a scenario, a team file or an agents/*.md front matter."""

    name: str = ""
    description: str = ""
    instructions: str = ""
    # "" = inherit the room's default model. A scenario turns "" into "scripted" (the contract's default);
    # agent files and team files keep "" so a real run picks its own model.
    model: str = ""
    tools: list[str] = []
    interactive: bool = False
    context_window: PositiveInt | None = None
    request_budget: PositiveInt | None = None
    # Our extension: the share of the window at which history is compacted; default 0.8.
    compact_at: Annotated[float, Meta(gt=0, le=1)] | None = None
    # Our extension: extended thinking on this agent's model; overrides the model's configuration.
    thinking: Thinking | None = None
    # Our extension: this agent's shell sandbox, on top of the team's (tools/jail.py Settings.parse).
    sandbox: bool | str | dict[str, Any] | None = None
    # Skills it may activate: names, or "all"; None = the team's `skills`.
    skills: list[str] | Literal["all"] | None = None
    # An agent definition file whose fields this entry overrides. After loading it holds the resolved path.
    from_: str | None = field(default=None, name="from")
    # Our extension: an external agent (Claude Code, Codex, Gemini CLI...) instead of a model; then it has no
    # `model` and no `tools` of ours (it brings its own).
    acp: AcpSpec | None = None

    def __post_init__(self) -> None:
        # From Python, `tools` may also hold functions and Tools: each function becomes its Tool once, here.
        if any(not isinstance(t, str) for t in self.tools):
            from orchestrator.tools.base import Tool
            from orchestrator.tools.functions import function_tool

            self.tools = [t if isinstance(t, (str, Tool)) else function_tool(t) for t in self.tools]


class Limits(Strict):
    """Our extension (`team: {limits: ...}`): caps for one run; None = no cap."""

    max_model_calls: PositiveInt | None = None
    max_tokens: PositiveInt | None = None
    max_turn_seconds: Annotated[float, Meta(gt=0)] | None = None
    max_workers: PositiveInt | None = None


class SignalWeights(Strict):
    """How much each signal adds toward the self-improvement pass (None: config.toml's, else the default)."""

    correction: NonNegative | None = None  # a user line correcting the previous answer
    skill_contradicted: NonNegative | None = None  # ...right after a skill was activated (on top of correction)
    recovery: NonNegative | None = None  # a line that recovered from a failed tool call or a retried model call
    long_task: NonNegative | None = None  # a line of many model calls
    weakness: NonNegative | None = None  # a line touching a known weakness written in the notes


class Evolve(Strict):
    """Our extension (`team: {evolve: {...}}`): the self-improvement pass's settings; a key left out takes
    config.toml's [evolve], else the default (room/evolution.py)."""

    threshold: NonNegative | None = None  # the weighted sum of signals that starts a pass; 0: after every line
    weights: SignalWeights | None = None
    long_task_calls: PositiveInt | None = None  # model calls in one line that make it a long task
    model: str | None = None  # the pass's model ("": the commander's)
    max_tokens_per_run: PositiveInt | None = None
    max_tokens_per_day: PositiveInt | None = None  # over every room of the store, the last 24 hours
    every_hours: Annotated[float, Meta(gt=0)] | None = None  # a host's scheduled pass
    cooldown_hours: NonNegative | None = None  # at least this long between two passes of a room
    fallback_days: Annotated[float, Meta(gt=0)] | None = None  # a pass anyway after this long without one


class Team(Strict):
    """A whole team as data: its commander, its agents, limits, MCP servers, sandbox, skills and self-improvement."""
    # The commander takes the same keys as an agent; the loader always names it "commander".
    commander: AgentDef = field(default_factory=lambda: AgentDef(name="commander"))
    agents: list[AgentDef] = []
    limits: Limits = field(default_factory=Limits)
    # Our extension: MCP servers whose tools agents are granted as `mcp:NAME` or `mcp:NAME/TOOL`.
    mcp_servers: dict[str, ServerConfig] = {}
    # Our extension: the shell sandbox for the whole team, on top of config.toml's [sandbox].
    sandbox: bool | str | dict[str, Any] | None = None
    skills: list[str] | Literal["all"] = []  # every member's skills unless it names its own
    # The self-improvement pass, started by signals (and a host's schedule); it only stages proposals. True: the
    # settings of config.toml's [evolve] and the defaults; a mapping (Evolve) sets some of them.
    evolve: bool | Evolve = False

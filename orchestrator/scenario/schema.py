"""The scenario file format (scenario-format.md) as msgspec Structs, plus the naming rules for agents.

Structs check shape and types; loader.py adds the checks that span keys (names, references, one-of rules).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from msgspec import Meta, Struct, field

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


class _Strict(Struct, forbid_unknown_fields=True, kw_only=True):
    pass


class AgentDef(_Strict):
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
    # Our extension: the share of the window at which history is compacted (E5); default 0.8.
    compact_at: Annotated[float, Meta(gt=0, le=1)] | None = None
    # An agent definition file whose fields this entry overrides. After loading it holds the resolved path.
    from_: str | None = field(default=None, name="from")


class Limits(_Strict):
    """Our extension (`team: {limits: ...}`): caps for one run; None = no cap."""

    max_model_calls: PositiveInt | None = None
    max_tokens: PositiveInt | None = None
    max_turn_seconds: Annotated[float, Meta(gt=0)] | None = None
    max_workers: PositiveInt | None = None


class Team(_Strict):
    # The commander takes the same keys as an agent; the loader always names it "commander".
    commander: AgentDef = field(default_factory=lambda: AgentDef(name="commander"))
    agents: list[AgentDef] = []
    limits: Limits = field(default_factory=Limits)


class ErrorSpec(_Strict):
    kind: str
    retry_after: NonNegative | None = None


class Usage(_Strict):
    input: Count = 0
    output: Count = 0


class ScriptItem(_Strict):
    """One scripted model response (one item of a `models` queue)."""

    say: str | None = None
    think: str | None = None
    call: dict[str, dict[str, Any]] | None = None
    calls: list[dict[str, dict[str, Any]]] | None = None
    delay: NonNegative = 0
    error: str | ErrorSpec | None = None
    sees: str | None = None
    not_sees: str | None = None
    usage: Usage | None = None

    def tool_calls(self) -> list[tuple[str, dict[str, Any]]]:
        """`call` and `calls` as one list of (tool name, arguments), in declared order."""
        maps = [self.call] if self.call is not None else self.calls or []
        return [(name, args) for m in maps for name, args in m.items()]

    def failure(self) -> ErrorSpec | None:
        """`error` in its long form, whichever form the file used."""
        return ErrorSpec(kind=self.error) if isinstance(self.error, str) else self.error


class Turn(_Strict):
    """One user-side step: exactly one of user / stop / restart / new_room / confirm (the loader checks)."""

    user: str | None = None
    after: NonNegative | None = None
    stop: bool = False
    restart: bool = False
    # Our extension: close this room and open a fresh one on the same database (memory carries over).
    new_room: bool = False
    # Reserved for answering the shell tool's confirmation prompt.
    confirm: Literal["once", "run", "deny"] | None = None


class TranscriptItem(_Strict):
    from_: str = field(name="from")
    contains: str
    to: str | None = None
    hidden_from: str | None = None


class AbsentItem(_Strict):
    from_: str = field(name="from")
    contains: str


class ContextItem(_Strict):
    agent: str
    text: str


class ToolCallItem(_Strict):
    agent: str
    name: str
    count: Count | None = None


class LedgerItem(_Strict):
    agent: str
    status: Literal["done", "failed", "cancelled"]


class ToolErrorItem(_Strict):
    agent: str
    name: str
    count: Count


class Expect(_Strict):
    floor: str | None = None
    transcript: list[TranscriptItem] = []
    absent: list[AbsentItem] = []
    not_in_context: list[ContextItem] = []
    tool_calls: list[ToolCallItem] = []
    ledger: list[LedgerItem] = []
    events: list[str] = []
    files: dict[str, str] = {}
    error: str | None = None
    no_files: list[str] = []
    tool_errors: list[ToolErrorItem] = []


class Scenario(_Strict):
    name: str
    description: str = ""
    team: Team = field(default_factory=Team)
    workspace: str | None = None
    files: dict[str, str] = {}
    models: dict[str, list[ScriptItem]] = {}
    turns: list[Turn] = []
    expect: Expect = field(default_factory=Expect)
    # Set by load_scenario to the file it read (relative paths such as `workspace` start from its folder).
    # A real field so that msgspec.structs.replace keeps it; the loader rejects a `path:` key in the file.
    path: Path | None = None

"""The scenario file format (scenario-format.md) as msgspec Structs; the team inside it is team/schema.py's.

Structs check shape and types; loader.py adds the checks that span keys (names, references, one-of rules).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from msgspec import field

from orchestrator.team.schema import Count, NonNegative, Team, Strict

class ErrorSpec(Strict):
    kind: str
    retry_after: NonNegative | None = None


class Usage(Strict):
    input: Count = 0
    output: Count = 0
    cached: Count = 0  # of `input`, the tokens read from the provider's prompt cache


class ScriptItem(Strict):
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
    # Our extension: the output limit cuts this response off (stop reason max_tokens), inside the
    # arguments of its last call when it has calls.
    cut: bool = False

    def tool_calls(self) -> list[tuple[str, dict[str, Any]]]:
        """`call` and `calls` as one list of (tool name, arguments), in declared order."""
        maps = [self.call] if self.call is not None else self.calls or []
        return [(name, args) for m in maps for name, args in m.items()]

    def failure(self) -> ErrorSpec | None:
        """`error` in its long form, whichever form the file used."""
        return ErrorSpec(kind=self.error) if isinstance(self.error, str) else self.error


class Turn(Strict):
    """One user-side step: exactly one of user / stop / restart / new_room / confirm / proposals
    (the loader checks)."""

    user: str | None = None
    after: NonNegative | None = None
    stop: bool = False
    restart: bool = False
    # Our extension: close this room and open a fresh one on the same database (memory carries over).
    new_room: bool = False
    # Reserved for answering the shell tool's confirmation prompt.
    confirm: Literal["once", "run", "deny"] | None = None
    # Our extension: the user's `/skill NAME` with this line (only with `user`).
    skill: str | None = None
    # Our extension: accept or reject every staged proposal of the self-improvement pass (`/proposals`).
    proposals: Literal["accept", "reject"] | None = None


class TranscriptItem(Strict):
    from_: str = field(name="from")
    contains: str
    to: str | None = None
    hidden_from: str | None = None


class AbsentItem(Strict):
    from_: str = field(name="from")
    contains: str


class ContextItem(Strict):
    agent: str
    text: str


class ToolCallItem(Strict):
    agent: str
    name: str
    count: Count | None = None


class LedgerItem(Strict):
    agent: str
    status: Literal["done", "failed", "cancelled"]


class ToolErrorItem(Strict):
    agent: str
    name: str
    count: Count


class UsageItem(Strict):
    """What one agent's model calls added up to (every call, summaries included); unset figures are not checked."""

    agent: str
    calls: Count | None = None
    input: Count | None = None
    output: Count | None = None
    cached: Count | None = None
    estimated: bool | None = None  # whether any call's counts were the engine's estimate


class Expect(Strict):
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
    usage: list[UsageItem] = []


class Scenario(Strict):
    name: str
    description: str = ""
    team: Team = field(default_factory=Team)
    workspace: str | None = None
    files: dict[str, str] = {}
    models: dict[str, list[ScriptItem]] = {}
    turns: list[Turn] = []
    expect: Expect = field(default_factory=Expect)
    # Our extension: folders (relative to this file) standing in for the skill roots user, home, shipped,
    # claude, codex. Unnamed ones are not read, so a run never depends on this machine's skills; the
    # workspace's .agents/skills and the package's own skills are always read.
    skill_roots: dict[str, str] = {}
    # Set by load_scenario to the file it read (relative paths such as `workspace` start from its folder).
    # A real field so that msgspec.structs.replace keeps it; the loader rejects a `path:` key in the file.
    path: Path | None = None

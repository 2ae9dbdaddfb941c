"""Loading scenario files: YAML into the schema's Structs, then the checks that span several keys.

Every problem is one InputError line, `file:line: what (at key.path)` (core/document.py).
"""
from __future__ import annotations

import difflib
from pathlib import Path, PurePosixPath
from typing import Sequence

import msgspec

from orchestrator.core.document import Document, Parts, alternatives
from orchestrator.core.errors import ERROR_KINDS
from orchestrator.scenario.schema import (
    ContextItem, ErrorSpec, Expect, LedgerItem, Scenario, ScriptItem, ToolCallItem, ToolErrorItem, Turn,
)
from orchestrator.skills.evolve import REVIEWER
from orchestrator.skills.library import LABELS
from orchestrator.team.loader import checked_team
from orchestrator.team.schema import WORKER_NAME, Team


def _check_files(doc: Document, files: dict[str, str]) -> None:
    for name in files:
        p = PurePosixPath(name)
        if not name or p.is_absolute() or ".." in p.parts:
            raise doc.error(("files", name), f"`{name}` must be a relative path inside the workspace (no `..`)",
                            key=True)


def _check_item(doc: Document, at: Parts, item: ScriptItem) -> None:
    if all(v is None for v in (item.say, item.think, item.call, item.calls, item.error)):
        raise doc.error(at, "an empty response: give `say`, `think`, `call`, `calls` or `error`")
    if item.call is not None and item.calls is not None:
        raise doc.error(at + ("calls",), "use `call` for one tool call or `calls` for several, not both", key=True)
    maps = ([(at + ("call",), "`call`", item.call)] if item.call is not None else
            [(at + ("calls", k), "each item of `calls`", c) for k, c in enumerate(item.calls or [])])
    for where, label, calls in maps:
        if len(calls) != 1:
            names = ", ".join(f"`{n}`" for n in calls) or "none"
            more = "; use `calls` for several" if label == "`call`" and calls else ""
            raise doc.error(where, f"{label} must name exactly one tool as {{TOOL: ARGS}}, got {names}{more}")
    if item.cut and item.say is None and not item.tool_calls():
        raise doc.error(at + ("cut",), "`cut: true` cuts off a reply: give it `say` or a call to cut", key=True)
    spec = item.failure()
    if spec is None:
        return
    if spec.kind not in ERROR_KINDS:
        where = at + ("error", "kind") if isinstance(item.error, ErrorSpec) else at + ("error",)
        raise doc.error(where, f"unknown error kind `{spec.kind}`; expected {alternatives(ERROR_KINDS)}")
    # The scripted model raises before streaming anything, so these would be silently ignored.
    if unused := [k for k in ("say", "think", "call", "calls") if getattr(item, k) is not None]:
        raise doc.error(at + ("error",), f"`error` makes this call fail, so `{unused[0]}` would never be used",
                        key=True)


def _check_models(doc: Document, models: dict[str, list[ScriptItem]], team: Team) -> None:
    # What each queue's model may call: an agent its tools, the commander also its three, and an
    # anonymous run_worker helper the commander's own tools (as the room gives them); a member with
    # skills also activate_skill. The self-improvement pass (`evolve`) calls nothing.
    from orchestrator.room.commander import ARGS as COMMANDER_TOOLS  # the loader needs only their arguments
    from orchestrator.skills.activation import NAME as ACTIVATE

    def own(tools: list[str], skills) -> list[str]:
        return [*tools, *([ACTIVATE] if (team.skills if skills is None else skills) else [])]

    tools = {"commander": [*own(team.commander.tools, team.commander.skills), *COMMANDER_TOOLS],
             "worker": own(team.commander.tools, None), **{a.name: own(a.tools, a.skills) for a in team.agents},
             **({REVIEWER: []} if team.evolve else {})}
    for name, items in models.items():
        if name not in tools:
            raise doc.error(("models", name), f"unknown member `{name}`: expected {alternatives(tools)}",
                            key=True)
        for j, item in enumerate(items):
            _check_item(doc, ("models", name, j), item)
            _check_calls(doc, ("models", name, j), item, name, tools[name])
            if name == "commander":
                _check_targets(doc, ("models", name, j), item, team)


def _check_calls(doc: Document, at: Parts, item: ScriptItem, queue: str, tools: list[str]) -> None:
    """Every scripted call names a tool its agent has, with arguments its schema accepts."""
    from orchestrator.mcplink.config import grants
    from orchestrator.mcplink.tools import FIND_TOOLS, tool_name
    from orchestrator.room.commander import ARGS as COMMANDER_TOOLS
    from orchestrator.tools.builtin import tool_args
    from orchestrator.tools.functions import imported, is_python_ref

    # Python tools were imported when the team was checked: their names and arguments are known here.
    python = {t.name: t.args for t in (imported(e) for e in tools if is_python_ref(e))}
    tools = [e for e in tools if not is_python_ref(e)] + list(python)
    # MCP grants name servers (`mcp:S`, every tool as mcp__S__*) or one tool (`mcp:S/T`); their schemas come
    # from the server when it runs, so only the names are checked here.
    mcp = grants(tools)
    callable_ = [t for t in tools if not t.startswith("mcp:")] + \
        [tool_name(s, t) if t else tool_name(s, "") + "*" for s, t in mcp] + ([FIND_TOOLS] if mcp else [])
    wheres = [at + ("call",)] if item.call is not None else [at + ("calls", k) for k in range(len(item.calls or []))]
    for where, (tool, _) in zip(wheres, item.tool_calls()):
        if not any(tool == c or (c.endswith("*") and tool.startswith(c[:-1])) for c in callable_):
            close = difflib.get_close_matches(tool, callable_, n=1)
            hint = f"; did you mean `{close[0]}`?" if close else ""
            has = f"it has {', '.join(callable_)}" if callable_ else "it has none (give it `tools: [...]`)"
            who = "an anonymous worker" if queue == "worker" else f"`{queue}`"
            raise doc.error(where + (tool,), f"{who} has no tool `{tool}`; {has}{hint}", key=True)
        args = COMMANDER_TOOLS.get(tool) if queue == "commander" and tool in COMMANDER_TOOLS else \
            python.get(tool) or tool_args(tool)
        if isinstance(args, type):  # a Struct; a JSON schema (dict) is the tool's own to check
            doc.decode(args, where + (tool,))


def _check_targets(doc: Document, at: Parts, item: ScriptItem, team: Team) -> None:
    """The member each scripted dispatch_to, run_worker and hand_off_to names exists (and, for a handoff, is
    interactive), as the room will require when it runs them."""
    members = [a.name for a in team.agents]
    interactive = [a.name for a in team.agents if a.interactive]
    wheres = [at + ("call",)] if item.call is not None else [at + ("calls", k) for k in range(len(item.calls or []))]
    for where, (tool, args) in zip(wheres, item.tool_calls()):
        name = args.get("agent") if isinstance(args, dict) and tool in ("dispatch_to", "run_worker", "hand_off_to") \
            else None
        if not isinstance(name, str):
            continue  # none given (run_worker's anonymous helper), or not a string: decoding said so already
        allowed = interactive if tool == "hand_off_to" else members
        if name in allowed:
            continue
        if tool == "hand_off_to" and name in members:
            raise doc.error(where + (tool, "agent"), f"`{name}` is not interactive, so it cannot hold the floor "
                                                     f"(give it `interactive: true`, or dispatch_to it)")
        close = difflib.get_close_matches(name, allowed, n=1)
        hint = f"; did you mean `{close[0]}`?" if close else ""
        which = "interactive members" if tool == "hand_off_to" else "members"
        listed = f"the {which}: {', '.join(allowed)}" if allowed else f"the team has no {which}"
        raise doc.error(where + (tool, "agent"), f"{tool} names no member `{name}`; {listed}{hint}")


def _check_turns(doc: Document, turns: list[Turn]) -> None:
    for i, turn in enumerate(turns):
        given = [k for k, on in (("user", turn.user is not None), ("stop", turn.stop), ("restart", turn.restart),
                                 ("new_room", turn.new_room), ("confirm", turn.confirm is not None),
                                 ("proposals", turn.proposals is not None)) if on]
        if len(given) != 1:
            got = " and ".join(f"`{k}`" for k in given) or "none"
            raise doc.error(("turns", i, *given[1:2]), "a turn takes exactly one of `user`, `stop`, `restart`, "
                                                       f"`new_room`, `confirm`, `proposals`; got {got}",
                            key=bool(given))
        if turn.skill is not None and turn.user is None:
            raise doc.error(("turns", i, "skill"), "`skill` invokes a skill with a user line: add `user`", key=True)
        if turn.stop and turn.after is None:
            raise doc.error(("turns", i, "stop"), "`stop: true` needs `after: SECONDS` (when to cancel)", key=True)


def _check_skill_roots(doc: Document, folders: dict[str, str], base: Path) -> None:
    labels = [label for label in LABELS if label != "project"]
    for label, folder in folders.items():
        if label not in labels:
            raise doc.error(("skill_roots", label), f"unknown root `{label}`: expected {alternatives(labels)} "
                                                    "(the project's roots are the workspace's .agents/skills)",
                            key=True)
        if not (base / folder).is_dir():
            raise doc.error(("skill_roots", label), f"`{folder}` is not a folder (relative to this file)")


def _check_expect(doc: Document, expect: Expect, agents: list[str]) -> None:
    authors = ["commander", "user", "worker", *agents]
    runners = ["commander", "worker", *agents]  # members with a model, a context and tools
    refs: list[tuple[Parts, str | None, list[str]]] = [(("floor",), expect.floor, ["commander", *agents])]
    writers = [*authors, "room"]  # the room itself authors notices (an unknown @name, a limit hit)
    for i, t in enumerate(expect.transcript):
        refs += [(("transcript", i, "from"), t.from_, writers), (("transcript", i, "to"), t.to, authors),
                 (("transcript", i, "hidden_from"), t.hidden_from, authors)]
    refs += [(("absent", i, "from"), a.from_, writers) for i, a in enumerate(expect.absent)]
    by_agent: list[tuple[str, Sequence[ContextItem | ToolCallItem | LedgerItem | ToolErrorItem]]] = [
        ("not_in_context", expect.not_in_context), ("tool_calls", expect.tool_calls),
        ("ledger", expect.ledger), ("tool_errors", expect.tool_errors)]
    for key, items in by_agent:
        refs += [((key, i, "agent"), item.agent, runners) for i, item in enumerate(items)]
    for at, name, allowed in refs:
        if name is None or name in allowed or ("worker" in allowed and WORKER_NAME.fullmatch(name)):
            continue
        raise doc.error(("expect", *at), f"unknown member `{name}`: expected {alternatives(allowed)}")


def load_scenario(path: str | Path, *, trusted: bool = False) -> Scenario:
    """Read and check a scenario file; the result's `path` is the file (absolute). `trusted`: the user chose
    this file, so its team may name Python tools (`py:module:function`)."""
    doc = Document.read(path)
    if doc.node is None:
        raise doc.error((), "the file is empty: a scenario needs at least a `name`")
    if isinstance(doc.data, dict) and "path" in doc.data:
        # `path` is the field the loader fills in, not a key of the format.
        raise doc.error(("path",), "unknown key `path`", key=True)
    scenario: Scenario = doc.decode(Scenario)
    if not scenario.name.strip():
        raise doc.error(("name",), "`name` must not be empty")
    team = checked_team(doc, ("team",), scenario.team, Path(path).parent, default_model="scripted",
                        trusted=trusted)
    agents = [a.name for a in team.agents]
    _check_files(doc, scenario.files)
    _check_models(doc, scenario.models, team)
    _check_skill_roots(doc, scenario.skill_roots, Path(path).parent)
    _check_turns(doc, scenario.turns)
    _check_expect(doc, scenario.expect, agents)
    return msgspec.structs.replace(scenario, team=team, path=Path(path).absolute())



"""Loading scenario and team files: YAML into the schema's Structs, then the checks that span several keys.

Every problem is one InputError line, `file:line: what (at key.path)`; agentdef.py reuses Document.
"""
from __future__ import annotations

import datetime
import difflib
import json
import re
import types
import typing
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal, Union

import msgspec
import yaml

from orchestrator.core.errors import ERROR_KINDS, InputError
from orchestrator.resources import data_dir
from orchestrator.scenario.schema import (
    WORKER_NAME, AgentDef, ErrorSpec, Expect, Scenario, ScriptItem, Team, Turn, agent_name_problem,
)

_YamlLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# What msgspec.yaml.decode passes: YAML timestamps stay dates, so a str field reports "got a date".
_BUILTIN_TYPES = (datetime.datetime, datetime.date)

Parts = tuple[Any, ...]  # a key path: str keys and int list indices

_EXPECTED = {"str": "a string", "int": "a whole number", "float": "a number", "bool": "true or false",
             "array": "a list", "object": "a mapping", "null": "nothing"}
_GOT = {"str": "a string", "int": "a number", "float": "a number", "bool": "true/false",
        "null": "an empty value", "array": "a list", "object": "a mapping", "date": "a date",
        "datetime": "a date and time"}
_TAG_READ_AS = {"int": "a number", "float": "a number", "bool": "true/false", "null": "an empty value",
                "timestamp": "a date"}


def read_text(path: str | Path) -> str:
    """The file's text, or an InputError naming the file."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise InputError(f"{path}: cannot read the file: {e.strerror or e}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise InputError(f"{path}:{line}: not UTF-8 text") from None


def keypath(parts: Parts) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z0-9_-]+", part):
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(part)}]"
    return out


def _alternatives(names: typing.Iterable[str]) -> str:
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


class Document:
    """One parsed YAML document: its values, its node tree (for line numbers) and the file name for messages.

    `first_line` is the file line the text starts on (front matter starts on line 2).
    """

    def __init__(self, name: str, text: str, *, first_line: int = 1):
        self.name = name
        self.first_line = first_line
        loader = _YamlLoader(text)
        try:
            self.node: yaml.Node | None = loader.get_single_node()
            self.data: Any = None if self.node is None else loader.construct_document(self.node)
        except yaml.MarkedYAMLError as e:
            raise self._syntax_error(e) from None
        except yaml.reader.ReaderError as e:
            line = text.count("\n", 0, e.position) + first_line
            raise InputError(f"{name}:{line}: invalid YAML: {str(e).splitlines()[0]}") from None
        finally:
            loader.dispose()

    @classmethod
    def read(cls, path: str | Path) -> Document:
        return cls(str(path), read_text(path))

    def _syntax_error(self, e: yaml.MarkedYAMLError) -> InputError:
        mark = e.problem_mark or e.context_mark
        line = (mark.line if mark else 0) + self.first_line
        what = e.problem or e.context or "unreadable YAML"
        if e.problem and e.context and e.context_mark:
            what += f" ({e.context} on line {e.context_mark.line + self.first_line})"
        return InputError(f"{self.name}:{line}: invalid YAML: {what}")

    def _node(self, parts: Parts, *, key: bool = False) -> yaml.Node | None:
        """The deepest node along `parts` (the key's own node when `key`), for its line."""
        node = self.node
        for i, part in enumerate(parts):
            if isinstance(node, yaml.MappingNode):
                pairs = [(k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == str(part)]
                if not pairs:
                    break
                k, v = pairs[-1]  # a repeated key: YAML keeps the last one
                node = k if key and i == len(parts) - 1 else v
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
                node = node.value[part]
            else:
                break
        return node

    def line(self, parts: Parts, *, key: bool = False) -> int:
        node = self._node(parts, key=key)
        return (node.start_mark.line if node is not None else 0) + self.first_line

    def error(self, parts: Parts, what: str, *, key: bool = False) -> InputError:
        """The one-line message for a problem at `parts` (on the key's line when `key`)."""
        return self._error_at(self.line(parts, key=key), parts, what)

    def _error_at(self, line: int, parts: Parts, what: str) -> InputError:
        where = f" (at {keypath(parts)})" if parts else ""
        return InputError(f"{self.name}:{line}: {what}{where}")

    def raw(self, parts: Parts) -> Any:
        """The plain YAML value at `parts`, None where the path does not exist."""
        value = self.data
        for part in parts:
            value = _get(value, part)
        return value

    def keys(self, parts: Parts) -> list[str]:
        value = self.raw(parts)
        return [k for k in value if isinstance(k, str)] if isinstance(value, dict) else []

    def decode(self, tp: type[Any]) -> Any:
        try:
            return msgspec.convert(self.data, tp, builtin_types=_BUILTIN_TYPES)
        except msgspec.ValidationError as e:
            raise self._explain(str(e), tp) from None

    def _explain(self, message: str, tp: Any) -> InputError:
        """Turn msgspec's `... - at `$.a[0].b`` into our wording, line and key path."""
        what, _, where = message.partition(" - at `")
        in_key = where.startswith("key` in `")
        parts: list[Any] = []
        value, t = self.data, tp
        for name, index in re.findall(r"\.(\w+)|\[(\d+|\.\.\.)\]", where.removeprefix("key` in `")):
            if name:
                part: Any = name
            elif index != "...":
                part = int(index)
            else:  # msgspec does not name dict keys: find the entry that fails on its own
                part = _failing_key(value, _child(t, value, None))
            t, value = _child(t, value, part), _get(value, part)
            parts.append(part)
        at = tuple(parts)
        shape = _unwrap(t, value)

        if m := re.fullmatch(r"Object contains unknown field `(.+)`", what):
            known = [f.encode_name for f in msgspec.structs.fields(shape)] if _is_struct(shape) else []
            close = difflib.get_close_matches(m[1], known, n=1)
            hint = f"; did you mean `{close[0]}`?" if close else ""
            return self.error(at + (m[1],), f"unknown key `{m[1]}`{hint}", key=True)
        if m := re.fullmatch(r"Object missing required field `(.+)`", what):
            return self.error(at + (m[1],), f"missing required key `{m[1]}`")
        if in_key:
            node = self._node(at)
            bad = next((k for k, _ in getattr(node, "value", []) if isinstance(k, yaml.ScalarNode)
                        and not k.tag.endswith(":str")), None)
            if bad is None:
                return self.error(at, "keys must be strings")
            read_as = _TAG_READ_AS.get(bad.tag.rpartition(":")[2], "something else")
            return self._error_at(bad.start_mark.line + self.first_line, at,
                                  f"key `{bad.value}` is read as {read_as}; put it in quotes")
        if re.match(r"Invalid enum value", what) and typing.get_origin(shape) is Literal:
            allowed = [str(a) for a in typing.get_args(shape)]
            return self.error(at, f"`{value}` is not one of {_alternatives(allowed)}")
        if m := re.fullmatch(r"Expected `(.+?)`(?:, got `(.+?)`)?(.*)", what):
            expected = [x for x in m[1].split(" | ") if x != "null"] or ["null"]
            want = _alternatives(_EXPECTED.get(x, f"`{x}`") for x in expected)
            node = self._node(at)
            scalar = node.value if isinstance(node, yaml.ScalarNode) else None
            if m[2] is None:  # a constraint such as `>= 1`
                bound = re.sub(r"(\d)\.0\b", r"\1", m[3])  # `>= 0.0` reads better as `>= 0`
                return self.error(at, f"expected {want}{bound}, got {scalar if scalar is not None else value}")
            tag = node.tag.rpartition(":")[2] if isinstance(node, yaml.ScalarNode) else ""
            if scalar and tag in _TAG_READ_AS and tag != "null":
                got = f"`{scalar}`, which YAML reads as {_TAG_READ_AS[tag]}"
                if "str" in expected:
                    got += "; put it in quotes"
            else:
                got = _GOT.get(m[2], f"`{m[2]}`")
            return self.error(at, f"expected {want}, got {got}")
        return self.error(at, what[:1].lower() + what[1:])


def _is_struct(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, msgspec.Struct)


def _shape(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Annotated:
        return _shape(typing.get_args(tp)[0])
    if _is_struct(tp) or tp is dict or origin is dict:
        return "map"
    return "seq" if tp is list or origin is list else "scalar"


def _shape_of(value: Any) -> str:
    return "map" if isinstance(value, dict) else "seq" if isinstance(value, list) else "scalar"


def _unwrap(tp: Any, value: Any) -> Any:
    """The concrete type msgspec checked `value` against: Annotated stripped, the fitting union member."""
    while True:
        origin = typing.get_origin(tp)
        if origin is Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (Union, types.UnionType):
            options = [a for a in typing.get_args(tp) if a is not type(None)]
            tp = next((a for a in options if _shape(a) == _shape_of(value)), options[0])
        else:
            return tp


def _child(tp: Any, value: Any, part: Any) -> Any:
    tp = _unwrap(tp, value)
    if _is_struct(tp):
        return next((f.type for f in msgspec.structs.fields(tp) if f.encode_name == part), Any)
    if typing.get_origin(tp) in (list, dict):
        return typing.get_args(tp)[-1]
    return Any


def _get(value: Any, part: Any) -> Any:
    if isinstance(value, dict):
        return value.get(part)
    if isinstance(value, list) and isinstance(part, int) and part < len(value):
        return value[part]
    return None


def _failing_key(value: Any, item_type: Any) -> Any:
    for key, item in value.items() if isinstance(value, dict) else ():
        try:
            msgspec.convert(item, item_type, builtin_types=_BUILTIN_TYPES)
        except msgspec.ValidationError:
            return key
    return "..."


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
    from orchestrator.agentdef import load_agent_file  # agentdef imports this module for Document

    try:
        defined = load_agent_file(found)
    except InputError as e:
        raise InputError(f"{e} (used by {doc.name}:{doc.line(at + ('from',))})") from None
    given = set(doc.keys(at))
    overrides = {f.name: getattr(entry, f.name)
                 for f in msgspec.structs.fields(AgentDef) if f.encode_name in given}
    return msgspec.structs.replace(defined, **{**overrides, "from_": str(found)})


def _checked_team(doc: Document, at: Parts, team: Team, base: Path, default_model: str) -> Team:
    commander = _with_file(doc, at + ("commander",), team.commander, base)
    commander = msgspec.structs.replace(commander, name="commander", model=commander.model or default_model)
    _check_tools(doc, at + ("commander",), commander)
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
        _check_tools(doc, where, agent)
        agents.append(msgspec.structs.replace(agent, model=agent.model or default_model))
    return msgspec.structs.replace(team, commander=commander, agents=agents)


def _check_tools(doc: Document, where: Parts, agent: AgentDef) -> None:
    from orchestrator.tools.builtin import tool_names  # the tools package is heavier than the loader needs

    known = tool_names()
    for j, name in enumerate(agent.tools):
        if name not in known:
            at = where + ("tools", j) if "tools" in doc.keys(where) else where
            raise doc.error(at, f"unknown tool `{name}`; built-in tools: {', '.join(known)}")


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
    spec = item.failure()
    if spec is None:
        return
    if spec.kind not in ERROR_KINDS:
        where = at + ("error", "kind") if isinstance(item.error, ErrorSpec) else at + ("error",)
        raise doc.error(where, f"unknown error kind `{spec.kind}`; expected {_alternatives(ERROR_KINDS)}")
    # The scripted model raises before streaming anything, so these would be silently ignored.
    if unused := [k for k in ("say", "think", "call", "calls") if getattr(item, k) is not None]:
        raise doc.error(at + ("error",), f"`error` makes this call fail, so `{unused[0]}` would never be used",
                        key=True)


def _check_models(doc: Document, models: dict[str, list[ScriptItem]], agents: list[str]) -> None:
    queues = ["commander", "worker", *agents]
    for name, items in models.items():
        if name not in queues:
            raise doc.error(("models", name), f"unknown member `{name}`: expected {_alternatives(queues)}",
                            key=True)
        for j, item in enumerate(items):
            _check_item(doc, ("models", name, j), item)


def _check_turns(doc: Document, turns: list[Turn]) -> None:
    for i, turn in enumerate(turns):
        given = [k for k, on in (("user", turn.user is not None), ("stop", turn.stop), ("restart", turn.restart),
                                 ("new_room", turn.new_room), ("confirm", turn.confirm is not None)) if on]
        if len(given) != 1:
            got = " and ".join(f"`{k}`" for k in given) or "none"
            raise doc.error(("turns", i, *given[1:2]), "a turn takes exactly one of `user`, `stop`, `restart`, "
                                                       f"`new_room`, `confirm`; got {got}", key=bool(given))
        if turn.stop and turn.after is None:
            raise doc.error(("turns", i, "stop"), "`stop: true` needs `after: SECONDS` (when to cancel)", key=True)


def _check_expect(doc: Document, expect: Expect, agents: list[str]) -> None:
    authors = ["commander", "user", "worker", *agents]
    runners = ["commander", "worker", *agents]  # members with a model, a context and tools
    refs: list[tuple[Parts, str | None, list[str]]] = [(("floor",), expect.floor, ["commander", *agents])]
    writers = [*authors, "room"]  # the room itself authors notices (an unknown @name, a limit hit)
    for i, t in enumerate(expect.transcript):
        refs += [(("transcript", i, "from"), t.from_, writers), (("transcript", i, "to"), t.to, authors),
                 (("transcript", i, "hidden_from"), t.hidden_from, authors)]
    refs += [(("absent", i, "from"), a.from_, writers) for i, a in enumerate(expect.absent)]
    for key, items in (("not_in_context", expect.not_in_context), ("tool_calls", expect.tool_calls),
                       ("ledger", expect.ledger), ("tool_errors", expect.tool_errors)):
        refs += [((key, i, "agent"), item.agent, runners) for i, item in enumerate(items)]
    for at, name, allowed in refs:
        if name is None or name in allowed or ("worker" in allowed and WORKER_NAME.fullmatch(name)):
            continue
        raise doc.error(("expect", *at), f"unknown member `{name}`: expected {_alternatives(allowed)}")


def load_scenario(path: str | Path) -> Scenario:
    """Read and check a scenario file; the result's `path` is the file (absolute)."""
    doc = Document.read(path)
    if doc.node is None:
        raise doc.error((), "the file is empty: a scenario needs at least a `name`")
    if isinstance(doc.data, dict) and "path" in doc.data:
        # `path` is the field the loader fills in, not a key of the format.
        raise doc.error(("path",), "unknown key `path`", key=True)
    scenario: Scenario = doc.decode(Scenario)
    if not scenario.name.strip():
        raise doc.error(("name",), "`name` must not be empty")
    team = _checked_team(doc, ("team",), scenario.team, Path(path).parent, default_model="scripted")
    agents = [a.name for a in team.agents]
    _check_files(doc, scenario.files)
    _check_models(doc, scenario.models, agents)
    _check_turns(doc, scenario.turns)
    _check_expect(doc, scenario.expect, agents)
    return msgspec.structs.replace(scenario, team=team, path=Path(path).absolute())


def load_team(path: str | Path) -> Team:
    """Read and check a team file, a scenario's `team:` block on its own (a missing model stays "")."""
    doc = Document.read(path)
    if doc.node is None:
        raise doc.error((), "the file is empty: a team file holds `agents:` "
                            "(and optionally `commander:`, `limits:`)")
    return _checked_team(doc, (), doc.decode(Team), Path(path).parent, default_model="")

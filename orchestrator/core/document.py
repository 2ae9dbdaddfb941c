"""YAML documents that remember where every key came from: reading, decoding into Structs, and errors.

Every problem is one InputError line, `file:line: what (at key.path)`; scenario, team and agent files share it.
"""
from __future__ import annotations

import datetime
import difflib
import json
import re
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import msgspec
import yaml

from orchestrator.core.errors import InputError

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


def alternatives(names: typing.Iterable[str]) -> str:
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


class Document:
    """One parsed YAML document: its values, its node tree (for line numbers) and the file name for messages.

    `first_line` is the file line the text starts on (front matter starts on line 2).
    """

    def __init__(self, name: str, text: str, *, first_line: int = 1):
        self.name = name
        self.first_line = first_line
        try:
            # Refused while only events exist: an alias bomb is never expanded, so it costs what its text does.
            self._no_anchors(text)
            loader = _YamlLoader(text)
            try:
                self.node: yaml.Node | None = loader.get_single_node()
                self._unique_keys()
                self.data: Any = None if self.node is None else loader.construct_document(self.node)
            finally:
                loader.dispose()
        except yaml.MarkedYAMLError as e:
            raise self._syntax_error(e) from None
        except yaml.reader.ReaderError as e:
            line = text.count("\n", 0, e.position) + first_line
            raise InputError(f"{name}:{line}: invalid YAML: {str(e).splitlines()[0]}") from None
        except RecursionError:
            raise InputError(f"{name}:{first_line}: the YAML is nested too deeply to read") from None

    def _no_anchors(self, text: str) -> None:
        """Refuse the first anchor or alias, naming its key path (followed through the event stream)."""
        frames: list[list[Any]] = []  # per open collection: [is_mapping, current key or index, at_a_key]
        for event in yaml.parse(text, Loader=_YamlLoader):
            if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                frames.pop()
                _node_done(frames)
                continue
            if not isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent, yaml.CollectionStartEvent)):
                continue
            on_key = bool(frames) and frames[-1][0] and frames[-1][2]
            if frames and not frames[-1][0]:
                frames[-1][1] += 1
            if isinstance(event, yaml.AliasEvent) or event.anchor:
                sign = "*" if isinstance(event, yaml.AliasEvent) else "&"
                parts = tuple(f[1] for f in frames if not (f[0] and f[2]))
                raise self._error_at(event.start_mark.line + self.first_line, parts,
                                     f"YAML anchors and aliases ({sign}{event.anchor}) are not accepted: "
                                     "write the value out where it is used")
            if on_key:
                frames[-1][1] = event.value if isinstance(event, yaml.ScalarEvent) else "?"
            if isinstance(event, yaml.CollectionStartEvent):
                frames.append([isinstance(event, yaml.MappingStartEvent), -1, True])
            else:
                _node_done(frames)

    def _unique_keys(self) -> None:
        """A key given twice in one mapping is an error naming both lines (YAML would keep the last silently)."""
        todo: list[tuple[yaml.Node, Parts]] = [(self.node, ())] if self.node is not None else []
        while todo:  # iterative: a deeply nested file must not exhaust the stack here
            node, parts = todo.pop()
            if isinstance(node, yaml.SequenceNode):
                todo += [(child, parts + (i,)) for i, child in enumerate(node.value)]
            elif isinstance(node, yaml.MappingNode):
                seen: dict[str, yaml.Node] = {}
                for key, value in node.value:
                    name = key.value if isinstance(key, yaml.ScalarNode) else None
                    if name is not None and name in seen:
                        first = seen[name].start_mark.line + self.first_line
                        raise self._error_at(key.start_mark.line + self.first_line, parts + (name,),
                                             f"duplicate key `{name}` (also on line {first})")
                    if name is not None:
                        seen[name] = key
                    todo.append((value, parts + (name if name is not None else "?",)))

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

    def decode(self, tp: type[Any], at: Parts = ()) -> Any:
        """The value at `at` (the whole document by default) as `tp`, or an InputError at the bad key."""
        try:
            return msgspec.convert(self.raw(at), tp, builtin_types=_BUILTIN_TYPES)
        except msgspec.ValidationError as e:
            raise self._explain(str(e), tp, at) from None
        except RecursionError:
            raise self.error(at, "nested too deeply to read") from None

    def _explain(self, message: str, tp: Any, root: Parts = ()) -> InputError:
        """Turn msgspec's `... - at `$.a[0].b`` into our wording, line and key path."""
        what, _, where = message.partition(" - at `")
        in_key = where.startswith("key` in `")
        parts: list[Any] = list(root)
        value, t = self.raw(root), tp
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
            hint = f"; did you mean `{close[0]}`?" if close else f"; expected {alternatives(known)}" if known else ""
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
            return self.error(at, f"`{value}` is not one of {alternatives(allowed)}")
        if m := re.fullmatch(r"Expected `(.+?)`(?:, got `(.+?)`)?(.*)", what):
            expected = [x for x in m[1].split(" | ") if x != "null"] or ["null"]
            want = alternatives(_EXPECTED.get(x, f"`{x}`") for x in expected)
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


def _node_done(frames: list[list[Any]]) -> None:
    """A whole node was read: in a mapping, a key is followed by its value and a value by the next key."""
    if frames and frames[-1][0]:
        frames[-1][2] = not frames[-1][2]


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

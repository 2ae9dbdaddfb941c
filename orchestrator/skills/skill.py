"""One skill folder in the open SKILL.md format (agentskills.io): reading it, and every way it can be wrong.

`read_skill` parses leniently, as the specification's integration guide advises, and reports each problem
with file:line; the injection scanner reads SKILL.md and every file it bundles (bundle.py) before
anything may show them to a model, and the risk classifier the commands they would run.
"""
from __future__ import annotations

import os
import re
import unicodedata
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from orchestrator.skills import bundle
from orchestrator.skills.problems import Problem, Severity
from orchestrator.tools.base import ToolError
from orchestrator.tools.sandbox import confined, open_own, still_single
from orchestrator.tools.session import ToolSession

if TYPE_CHECKING:
    import yaml

MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
MAX_BODY_LINES = 500  # the specification's advice for SKILL.md
MAX_SKILL_BYTES = bundle.MAX_TEXT_BYTES  # far above the advised 500 lines
NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")

SPEC_KEYS = frozenset({"name", "description", "license", "compatibility", "metadata", "allowed-tools"})
# Keys other clients define (Claude Code, Codex); a skill written for them loads unchanged.
CLIENT_KEYS = frozenset({"disable-model-invocation", "user-invocable", "argument-hint", "model", "context",
                         "agent", "hooks", "when_to_use", "version", "mode"})


class Skill(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    description: str
    folder: str  # absolute, links resolved: what read_file is allowed to read after activation
    body: str  # the instructions: SKILL.md after the front matter
    license: str = ""
    compatibility: str = ""
    metadata: dict[str, str] = {}
    allowed_tools: list[str] | None = None  # None: the field is absent, nothing is narrowed
    model_invocable: bool = True  # Claude Code's disable-model-invocation: false
    user_invocable: bool = True

    @property
    def file(self) -> Path:
        return Path(self.folder) / "SKILL.md"

    @property
    def created_by(self) -> str:
        return self.metadata.get("created_by", "")


def skill_file(folder: Path) -> Path | None:
    for name in ("SKILL.md", "skill.md"):
        if (folder / name).is_file():
            return folder / name
    return None


def read_skill(folder: Path, *, within: Path | None = None) -> tuple[Skill | None, list[Problem]]:
    """The skill in `folder` (None when it cannot be loaded) and every problem found, in file order.
    `within`: a folder agents can write (a project's), read as the tools read it, so that a link leading out
    of it, or a hard-linked SKILL.md, makes the skill invalid instead of being read."""
    if within is None:
        return _read_skill(Path(os.path.realpath(folder)), _read_plain)
    session = ToolSession(within)
    try:
        folder = confined(session, str(folder))
    except ToolError as exc:
        return None, [Problem(Path(folder) / "SKILL.md", 1, "error", str(exc))]
    return _read_skill(folder, partial(_read_checked, session))


def _read_plain(path: Path, cap: int) -> bytes:
    with open(path, "rb") as f:
        return f.read(cap + 1)


def _read_checked(session: ToolSession, path: Path, cap: int) -> bytes:
    """At most `cap` + 1 bytes, through the checked open: no link out of the folder, no hard link, not even
    one given to the file and taken away again while it was read."""
    chunks, left = [], cap + 1
    with open_own(session, str(path), "file") as f:
        fd, st = f.fd, f.st
        if fd is None or st is None:  # mode "file" opens an existing file: never the case
            raise ToolError(f"{path}: not opened")
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        if not still_single(f.folder, f.name, fd, st):
            raise ToolError(f"{path}: changed while being read (renamed, replaced or given another name)")
    return b"".join(chunks)


def _read_skill(folder: Path, read: bundle.Read) -> tuple[Skill | None, list[Problem]]:
    found = skill_file(folder)
    if found is None:
        return None, [Problem(folder / "SKILL.md", 1, "error", "no SKILL.md: a skill folder holds a SKILL.md "
                              "with YAML front matter (name, description) and the instructions")]
    r = _Reader(found, read)
    skill = r.read(folder)
    return skill, sorted(r.problems, key=lambda p: (str(p.file), p.line))


class _Reader:
    def __init__(self, path: Path, read: bundle.Read):
        self.path = path
        self._bytes = read
        self.problems: list[Problem] = []

    def add(self, line: int, severity: Severity, message: str) -> None:
        self.problems.append(Problem(self.path, line, severity, message))

    def read(self, folder: Path) -> Skill | None:
        if self.path.name != "SKILL.md":
            self.add(1, "spec", f"the file is named {self.path.name}; the specification names it SKILL.md")
        try:
            data = self._bytes(self.path, MAX_SKILL_BYTES)
            if len(data) > MAX_SKILL_BYTES:
                self.add(1, "error", f"larger than {MAX_SKILL_BYTES >> 20} MiB; keep SKILL.md short and move "
                                     "details to references/")
                return None
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            self.add(1, "error", f"not UTF-8 text (byte {e.start})")
            return None
        except OSError as e:
            self.add(1, "error", f"cannot read the file: {e.strerror or e}")
            return None
        except ToolError as e:  # refused by the checked open: the message names the link
            self.add(1, "error", str(e))
            return None
        lines = text.splitlines(keepends=True)
        if not lines or lines[0].strip() != "---":
            self.add(1, "error", "missing front matter: SKILL.md starts with a `---` line, then YAML keys "
                                 "(name, description), then `---`, then the instructions")
            return None
        end = next((i for i in range(1, len(lines)) if lines[i].rstrip() == "---"), None)
        if end is None:
            self.add(1, "error", "the front matter opened here is never closed by a `---` line")
            return None
        front = self._front_matter("".join(lines[1:end]))
        if front is None:
            return None
        fields, keylines = front
        body = "".join(lines[end + 1:]).strip("\n")
        body_line = end + 2
        skill = self._fields(folder, fields, keylines, body)
        self._check_body(folder, body, body_line)
        self.problems += bundle.scanned(self.path, text)
        if not any(p.severity == "error" for p in self.problems):
            self.problems += bundle.check(folder, self.path, text, self._bytes)
        return None if any(p.severity == "error" for p in self.problems) else skill

    def _front_matter(self, source: str) -> tuple[dict[str, Any], dict[str, int]] | None:
        import yaml  # with the first SKILL.md read, not with every import of the room

        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C parser when PyYAML has it: marks all the same
        try:
            node = yaml.compose(source, Loader=loader)
        except yaml.MarkedYAMLError:
            fixed = _quote_colons(source)
            try:
                if fixed == source:
                    raise
                node = yaml.compose(fixed, Loader=loader)
            except yaml.MarkedYAMLError as e2:
                self._yaml_error(e2)
                return None
            for n, (a, b) in enumerate(zip(source.splitlines(), fixed.splitlines())):
                if a != b:
                    self.add(n + 2, "spec", "a value holding `: ` must be quoted in YAML; read as if it were")
        if not isinstance(node, yaml.MappingNode):
            self.add(2, "error", "the front matter must be YAML keys and values (a mapping)")
            return None
        data: dict[str, Any] = {}
        keylines: dict[str, int] = {}
        constructor = loader("")
        for k, v in node.value:
            key = k.value if isinstance(k, yaml.ScalarNode) else str(k.value)
            if key in keylines:
                self.add(k.start_mark.line + 2, "spec", f"`{key}` is given twice; the last one counts")
            keylines[key] = k.start_mark.line + 2
            try:
                data[key] = constructor.construct_object(v, deep=True)
            except yaml.YAMLError as e:
                self.add(k.start_mark.line + 2, "error", f"`{key}`: unreadable value ({e})")
                return None
        return data, keylines

    def _yaml_error(self, e: yaml.MarkedYAMLError) -> None:
        mark = e.problem_mark or e.context_mark
        what = e.problem or e.context or "unreadable YAML"
        if e.problem and e.context and e.context_mark:  # where the unfinished thing began
            what += f" ({e.context} on line {e.context_mark.line + 2})"
        self.add((mark.line if mark else 0) + 2, "error", f"invalid YAML: {what}")

    def _fields(self, folder: Path, data: dict[str, Any], lines: dict[str, int], body: str) -> Skill | None:
        at = lambda key: lines.get(key, 2)  # noqa: E731 - a lookup, named for reading
        for key in data:
            if key not in SPEC_KEYS and key not in CLIENT_KEYS:
                self.add(at(key), "note", f"unknown key `{key}`: kept, but nothing reads it")
        name = data.get("name")
        if name is None:
            self.add(2, "error", "missing required key `name` (1-64 characters: a-z, 0-9 and `-`; "
                                 f"the folder's name, here `{folder.name}`)")
        elif not isinstance(name, str) or not name.strip():
            self.add(at("name"), "error", "`name` must be a non-empty string")
            name = None
        else:
            name = unicodedata.normalize("NFKC", name.strip())
            if len(name) > MAX_NAME:
                self.add(at("name"), "spec", f"`name` is {len(name)} characters long; at most {MAX_NAME}")
            if not NAME.fullmatch(name):
                self.add(at("name"), "error", _name_problem(name))
            if name != unicodedata.normalize("NFKC", folder.name):
                self.add(at("name"), "spec", f"`name` is `{name}` but the folder is `{folder.name}`; "
                                             "they must be the same")
        description = data.get("description")
        if description is None:
            self.add(2, "error", "missing required key `description`: what the skill does and when to use it "
                                 f"(at most {MAX_DESCRIPTION} characters)")
        elif not isinstance(description, str) or not description.strip():
            self.add(at("description"), "error", "`description` must be a non-empty string")
            description = None
        elif len(description) > MAX_DESCRIPTION:
            self.add(at("description"), "spec",
                     f"`description` is {len(description)} characters long; at most {MAX_DESCRIPTION}")
        license_ = self._string(data, "license", at)
        compatibility = self._string(data, "compatibility", at)
        if len(compatibility) > MAX_COMPATIBILITY:
            self.add(at("compatibility"), "spec",
                     f"`compatibility` is {len(compatibility)} characters long; at most {MAX_COMPATIBILITY}")
        metadata = self._metadata(data.get("metadata"), at("metadata"))
        allowed = self._allowed_tools(data.get("allowed-tools"), at("allowed-tools"))
        flags = {key: self._flag(data, key, at, default) for key, default in
                 (("disable-model-invocation", False), ("user-invocable", True))}
        if not body.strip():
            self.add(max(lines.values(), default=2) + 1, "note", "the skill has no instructions after the front matter")
        if name is None or description is None:
            return None
        return Skill(name=name, description=" ".join(description.split()), folder=str(folder), body=body,
                     license=license_, compatibility=compatibility, metadata=metadata, allowed_tools=allowed,
                     model_invocable=not flags["disable-model-invocation"],
                     user_invocable=flags["user-invocable"])

    def _string(self, data: dict[str, Any], key: str, at) -> str:
        value = data.get(key)
        if value is None:
            return ""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            self.add(at(key), "spec", f"`{key}` must be a string; put {value} in quotes")
            return str(value)
        if not isinstance(value, str):
            self.add(at(key), "spec", f"`{key}` must be a string")
            return ""
        if not value.strip():
            self.add(at(key), "spec", f"`{key}` is empty; leave the key out instead")
        return value.strip()

    def _flag(self, data: dict[str, Any], key: str, at, default: bool) -> bool:
        value = data.get(key, default)
        if not isinstance(value, bool):
            self.add(at(key), "spec", f"`{key}` must be true or false, not {value!r}; read as {default}")
            return default
        return value

    def _metadata(self, value: Any, line: int) -> dict[str, str]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.add(line, "spec", "`metadata` must be a mapping of string keys to string values")
            return {}
        out: dict[str, str] = {}
        for k, v in value.items():
            if isinstance(v, (dict, list)):
                self.add(line, "spec", f"`metadata.{k}` must be a string, not a nested "
                                       f"{'mapping' if isinstance(v, dict) else 'list'}")
                continue
            if not isinstance(v, str):
                self.add(line, "note", f"`metadata.{k}` is read as the string {str(v)!r}; quote it to be sure")
            out[str(k)] = str(v)
        return out

    def _allowed_tools(self, value: Any, line: int) -> list[str] | None:
        if value is None:
            return None
        if isinstance(value, str):
            return tool_patterns(value)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return [t for v in value for t in tool_patterns(v)]
        self.add(line, "spec", "`allowed-tools` must be a space-separated string (or a list of tool names); "
                               "ignored")
        return None

    def _check_body(self, folder: Path, body: str, first: int) -> None:
        lines = body.split("\n")
        if len(lines) > MAX_BODY_LINES:
            self.add(first, "note", f"the instructions are {len(lines)} lines long; the specification advises "
                                    f"under {MAX_BODY_LINES}, with details moved to references/")
        for n, line in enumerate(lines, first):
            for ref in _references(line):
                target = Path(os.path.normpath(folder / ref))
                if not target.is_relative_to(folder):
                    self.add(n, "spec", f"`{ref}` points outside the skill folder; bundle the file instead")
                elif not target.exists():
                    self.add(n, "note", f"`{ref}` is referenced but not in the skill folder")


def _name_problem(name: str) -> str:
    if name != name.lower():
        why = "uppercase letters are not allowed"
    elif name.startswith("-") or name.endswith("-"):
        why = "it may not start or end with `-`"
    elif "--" in name:
        why = "`--` (two hyphens in a row) is not allowed"
    else:
        why = "only a-z, 0-9 and `-` are allowed"
    return f"bad `name` `{name}`: {why}"


_TOOL = re.compile(r"[^\s(]+(?:\([^)]*\))?")


def tool_patterns(text: str) -> list[str]:
    """`Bash(git add:*) Read` -> ["Bash(git add:*)", "Read"]: spaces inside parentheses belong to the pattern."""
    return _TOOL.findall(text.replace(",", " "))


_LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_BARE = re.compile(r"(?<![\w./-])((?:scripts|references|assets)/[\w./-]+\w)")


def _references(line: str) -> list[str]:
    """Relative file references in one line of instructions: Markdown links and bare bundled paths."""
    refs = [m for m in _LINK.findall(line)
            if not re.match(r"[a-z][a-z0-9+.-]*:|#|/", m, re.I)]
    refs = [r.split("#", 1)[0] for r in refs if r.split("#", 1)[0]]
    refs += [m for m in _BARE.findall(line) if m not in refs]
    return refs


def _quote_colons(source: str) -> str:
    """The guide's leniency: `description: Use it: when X` is retried as a quoted string."""
    out = []
    for line in source.split("\n"):
        m = re.fullmatch(r"([A-Za-z][\w-]*):[ \t]+(.*)", line)
        if m and ": " in m[2] and m[2][0] not in "'\"[{|>&*!":
            line = f"{m[1]}: " + '"' + m[2].replace("\\", "\\\\").replace('"', '\\"') + '"'
        out.append(line)
    return "\n".join(out)

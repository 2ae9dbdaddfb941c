"""What a tool is and the one name-to-tool registry the engine reads every turn.

A tool's input is a msgspec Struct: its JSON schema is what the model is told, and decoding
the model's arguments into it is the validation, so a bad call becomes a readable error result.
A tool from elsewhere (an MCP server) brings a JSON schema instead, checked with jsonschema.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable

import msgspec

from orchestrator.core.tokens import estimate
from orchestrator.core.types import ImageBlock, ToolCallBlock, ToolSpec
from orchestrator.tools.errors import ToolError
from orchestrator.tools.session import ToolSession

__all__ = ["Registry", "Tool", "ToolContext", "ToolError", "ToolOutput", "schema_of"]


@dataclass(frozen=True)
class ToolOutput:
    text: str
    is_error: bool = False
    images: list[ImageBlock] = field(default_factory=list)
    end_turn: str | None = None  # a stop reason: the turn ends after this tool round (a handoff)


@dataclass(frozen=True)
class ToolContext:
    agent: str
    call_id: str
    session: ToolSession
    siblings: tuple[ToolCallBlock, ...] = ()  # every call of the same response, in declared order

    @property
    def workspace(self) -> Path:
        """The folder the tool works in."""
        return self.session.workspace


Runner = Callable[[Any, ToolContext], Awaitable["str | ToolOutput"]]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    args: type[msgspec.Struct] | dict[str, Any]  # a Struct, or a JSON schema taken as given
    run: Runner
    read_only: bool = False
    parallel: bool | None = None  # may run beside adjacent calls; defaults to read_only
    kept: bool = False  # its results survive compaction verbatim (an activated skill's instructions)

    @property
    def concurrent(self) -> bool:
        """Whether this tool may run beside adjacent calls in the same response."""
        return self.read_only if self.parallel is None else self.parallel

    def spec(self) -> ToolSpec:
        """The tool as the model is told of it: name, description and JSON schema."""
        if isinstance(self.args, dict):  # a JSON schema the tool brought (MCP): not hashable, not cached
            return ToolSpec(self.name, self.description, self.args)
        return _spec(self.name, self.description, self.args)

    def spec_tokens(self) -> int:
        """What the tool's schema and description cost in a request, estimated once per tool."""
        if isinstance(self.args, dict):
            return estimate(str(self.args)) + estimate(self.description)
        return _spec_tokens(self.name, self.description, self.args)

    def parse(self, raw: dict[str, Any]) -> Any:
        """Validate the model's arguments; raises ToolError naming the offending field."""
        if isinstance(self.args, dict):
            return _check_json(self.name, self.args, raw)
        try:
            return msgspec.convert(raw, self.args)
        except msgspec.ValidationError as exc:
            raise ToolError(f"invalid arguments for {self.name}: {exc}") from None


def _check_json(name: str, schema: dict[str, Any], raw: dict[str, Any]) -> dict[str, Any]:
    from jsonschema.validators import validator_for  # present with the tools that bring JSON schemas

    error = next(iter(validator_for(schema)(schema).iter_errors(raw)), None)
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path)
        raise ToolError(f"invalid arguments for {name}: {error.message}" + (f" at `{where}`" if where else ""))
    return raw


@cache
def _spec(name: str, description: str, args: type[msgspec.Struct]) -> ToolSpec:
    return ToolSpec(name, description, schema_of(args))


@cache
def _spec_tokens(name: str, description: str, args: type[msgspec.Struct]) -> int:
    return estimate(str(schema_of(args))) + estimate(description)


@cache
def schema_of(args: type[msgspec.Struct]) -> dict[str, Any]:
    schema = msgspec.json.schema(args)
    ref = schema.pop("$ref", None)
    defs = schema.pop("$defs", {})
    if ref:  # msgspec puts the top-level struct in $defs; models want it inline
        top = dict(defs.pop(ref.rsplit("/", 1)[1]))
        top.pop("title", None)
        if defs:
            top["$defs"] = defs
        return top
    return schema


class Registry:
    """Name-to-tool map; built-in, room-made and user tools all live here alike.

    `narrow` hides tools for the rest of the registry's life (one turn): it can only ever take tools away.
    """

    def __init__(self, tools: Iterable[Tool] = ()):
        self._tools: dict[str, Tool] = {}
        self._hidden: dict[str, str] = {}  # name -> why it is not available now
        self._narrowed: list[tuple[set[str], str]] = []  # what narrow() kept, so a later add cannot widen
        for t in tools:
            self.add(t)

    def add(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is registered twice")
        self._tools[tool.name] = tool
        for keep, why in self._narrowed:
            if tool.name not in keep:
                self._hidden.setdefault(tool.name, why)

    def narrow(self, keep: set[str], why: str) -> list[str]:
        """Hide every tool not in `keep`, now and when added later; returns the names hidden by this call."""
        self._narrowed.append((set(keep), why))
        hidden = [n for n in self._tools if n not in keep and n not in self._hidden]
        for name in hidden:
            self._hidden[name] = why
        return hidden

    def get(self, name: str) -> Tool | None:
        return None if name in self._hidden else self._tools.get(name)

    def missing(self, name: str) -> str:
        """What to tell a model that called a tool it does not have."""
        if name in self._hidden:
            return f"{name} is not available now: {self._hidden[name]}"
        return f"unknown tool {name!r}; available tools: {', '.join(self.names()) or 'none'}"

    def kept(self) -> set[str]:
        """Tools whose results compaction keeps, hidden ones included (their earlier results still count)."""
        return {n for n, t in self._tools.items() if t.kept}

    def specs(self) -> list[ToolSpec]:
        return [t.spec() for n, t in self._tools.items() if n not in self._hidden]

    def spec_tokens(self) -> int:
        """What the specs add to every request, estimated once per tool (not once per turn)."""
        return sum(t.spec_tokens() for n, t in self._tools.items() if n not in self._hidden)

    def names(self) -> list[str]:
        return [n for n in self._tools if n not in self._hidden]

    def __len__(self) -> int:
        return len(self._tools) - len(self._hidden)

"""Python functions as tools: `@tool` or a plain function, its name, its description from the docstring and its
arguments' JSON schema from the type hints; `py:package.module:function` names one in a trusted team file.

A sync function runs in a worker thread (one limiter for all of them), an async one on the loop; a parameter
typed `ToolContext` receives the call's context and is not shown to the model; what it returns becomes the
result's text (a string as it is, anything else as JSON), and what it raises becomes an error result.
"""
from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable
from functools import cache, partial
from typing import Annotated, Any, get_type_hints, overload

import msgspec
import trio

from orchestrator.tools.base import Runner, Tool, ToolContext, ToolOutput

__all__ = ["PY", "function_tool", "imported", "is_python_ref", "tool"]

PY = "py:"  # `py:package.module:function`, as a team or agent file names a Python tool
THREADS = trio.CapacityLimiter(8)  # sync tools at once, so a burst of slow ones cannot take every thread
_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9_-]{0,63}$")


class ToolDefinitionError(ValueError):
    """A function that cannot be a tool as written: why, said for the person who wrote it."""


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(*, name: str | None = None, description: str | None = None,
         read_only: bool = False) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(fn: Callable[..., Any] | None = None, /, *, name: str | None = None, description: str | None = None,
         read_only: bool = False) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """`@tool` or `@tool(read_only=True, ...)` over a function: the Tool an agent is given (`tools=[fn]`).

    `read_only=True` says it changes nothing, so its calls run beside the others of the same reply."""
    if fn is not None:
        return function_tool(fn)
    return lambda f: function_tool(f, name=name, description=description, read_only=read_only)


def function_tool(fn: Callable[..., Any], *, name: str | None = None, description: str | None = None,
                  read_only: bool = False) -> Tool:
    """The Tool for `fn` (a Tool is returned as it is)."""
    if isinstance(fn, Tool):
        return fn
    if not callable(fn):
        raise ToolDefinitionError(f"{fn!r} is not a function: an agent's tools are names, `mcp:` grants, "
                                  "Python functions or Tools")
    name = name or str(getattr(fn, "__name__", ""))
    if not _NAME.match(name):
        raise ToolDefinitionError(f"{name!r} cannot be a tool's name: letters, digits, _ and -, starting with a "
                                  "letter; pass name=")
    summary, params = _docstring(inspect.getdoc(fn) or "")
    args, context = _arguments(fn, name, params)
    run = _async_runner(fn, context) if _is_async(fn) else _thread_runner(fn, context)
    return Tool(name=name, description=description or summary or name.replace("_", " "), args=args, run=run,
                read_only=read_only)


def is_python_ref(entry: object) -> bool:
    return isinstance(entry, str) and entry.startswith(PY)


@cache
def imported(ref: str) -> Tool:
    """The tool a `py:package.module:function` names, imported from the user's environment."""
    path = ref[len(PY):]
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise ToolDefinitionError(f"`{ref}`: a Python tool is named `py:package.module:function`")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ToolDefinitionError(f"`{ref}`: cannot import {module_name} ({exc}); it must be importable from the "
                                  "environment the orchestrator runs in") from None
    for part in attr.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise ToolDefinitionError(f"`{ref}`: {module_name} has no `{attr}`")
    try:
        return function_tool(target)
    except ToolDefinitionError as exc:
        raise ToolDefinitionError(f"`{ref}`: {exc}") from None


def ref_of(t: Tool) -> str:
    """How a room's stored team names a Python tool: its import path when it has one, else its name."""
    fn = getattr(t.run, "function", None)
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if module and module != "__main__" and "<locals>" not in qualname:
        return f"{PY}{module}:{qualname}"
    return f"{PY}{t.name}"  # not importable: a room reopened from the store needs the team given again


def _is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)  # or an object's


def _docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The text before an `Args:` (or `Parameters`) section, and that section's `name: what it is` lines."""
    lines = doc.splitlines()
    head = next((i for i, ln in enumerate(lines) if ln.strip().rstrip(":").lower() in ("args", "arguments",
                                                                                     "parameters")), None)
    if head is None:
        return doc.strip(), {}
    params: dict[str, str] = {}
    current = None
    for ln in lines[head + 1:]:
        if not ln.strip() or set(ln.strip()) <= {"-"}:
            continue
        if not ln.startswith((" ", "\t")) and ln.strip().endswith(":"):  # the next section
            break
        m = re.match(r"^\s*\*{0,2}(\w+)\*{0,2}\s*(?:\([^)]*\))?\s*:\s*(.*)$", ln)
        if m:
            current = m.group(1)
            params[current] = m.group(2).strip()
        elif current:
            params[current] = f"{params[current]} {ln.strip()}".strip()
    return "\n".join(lines[:head]).strip(), params


def _arguments(fn: Callable[..., Any], name: str, described: dict[str, str]) -> tuple[type[msgspec.Struct], str | None]:
    """The Struct of `fn`'s parameters, and the one that takes the ToolContext, if any."""
    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception as exc:  # noqa: BLE001 - a hint that does not resolve, said as such
        raise ToolDefinitionError(f"{name}: its type hints do not resolve ({exc})") from None
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    context = None
    for p in inspect.signature(fn).parameters.values():
        hint = hints.get(p.name, inspect.Parameter.empty)
        if hint is ToolContext:
            context = p.name
            continue
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise ToolDefinitionError(f"{name}: *{p.name} cannot be told to a model: name each parameter")
        if p.kind is p.POSITIONAL_ONLY:
            raise ToolDefinitionError(f"{name}: {p.name} is positional-only; a model passes arguments by name")
        if hint is inspect.Parameter.empty:
            raise ToolDefinitionError(f"{name}: parameter {p.name} has no type hint, so its schema is unknown")
        if p.name in described:
            hint = Annotated[hint, msgspec.Meta(description=described[p.name])]
        fields.append((p.name, hint) if p.default is p.empty else (p.name, hint, p.default))
    struct = msgspec.defstruct(f"{name}_args", fields, kw_only=True, forbid_unknown_fields=True)
    try:
        msgspec.json.schema(struct)
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(f"{name}: a parameter's type has no JSON schema ({exc})") from None
    return struct, context


def _call_args(args: msgspec.Struct, ctx: ToolContext, context: str | None) -> dict[str, Any]:
    kwargs = {f: getattr(args, f) for f in args.__struct_fields__}
    if context is not None:
        kwargs[context] = ctx
    return kwargs


def _async_runner(fn: Callable[..., Any], context: str | None) -> Runner:
    async def run(args: msgspec.Struct, ctx: ToolContext) -> str | ToolOutput:
        return _text(await fn(**_call_args(args, ctx, context)))

    run.function = fn  # type: ignore[attr-defined]  # what ref_of names
    return run


def _thread_runner(fn: Callable[..., Any], context: str | None) -> Runner:
    async def run(args: msgspec.Struct, ctx: ToolContext) -> str | ToolOutput:
        call = partial(fn, **_call_args(args, ctx, context))
        return _text(await trio.to_thread.run_sync(call, limiter=THREADS, abandon_on_cancel=True))

    run.function = fn  # type: ignore[attr-defined]
    return run


def _text(value: Any) -> str | ToolOutput:
    if isinstance(value, (str, ToolOutput)):
        return value
    if value is None:
        return "done"
    try:
        return msgspec.json.encode(value).decode()
    except TypeError:
        return str(value)

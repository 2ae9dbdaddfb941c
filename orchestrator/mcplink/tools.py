"""MCP tools as ordinary tools: `mcp:NAME` / `mcp:NAME/TOOL` grants become `mcp__NAME__TOOL` entries of
the agent's registry, asked for through the room's confirmation path, and `find_tools` when they are many.

A server that cannot start or a tool whose schema is broken is left out with one line saying why;
the agent keeps every other tool.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

import msgspec
import trio

from orchestrator.core.tokens import estimate
from orchestrator.mcplink.config import PREFIX, ServerConfig, grants
from orchestrator.mcplink.results import to_output
from orchestrator.mcplink.servers import CallFailed, Connection, Hub, RemoteTool, ServerUnavailable
from orchestrator.tools.base import Tool, ToolContext, ToolError

MAX_NAME = 64  # what OpenAI and Anthropic accept for a tool name
SCHEMA_SHARE = 0.10  # above this share of the window, schemas are loaded on demand
FIND_TOOLS = "find_tools"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, tool: str) -> str:
    """`mcp__server__tool`, made safe for every provider; a long one keeps a hash of the full name."""
    name = f"{PREFIX}{server}__{_UNSAFE.sub('_', tool)}"
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha1(f"{server}/{tool}".encode()).hexdigest()[:8]
    return f"{name[:MAX_NAME - 9]}_{digest}"


@dataclass
class Toolset:
    """An agent's MCP tools for one turn: those sent with every request, and those found on demand."""

    tools: list[Tool] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # one line each: a server down, a tool left out
    deferred: dict[str, Tool] = field(default_factory=dict)  # by name, when schemas would crowd the window


async def toolset(hub: Hub, servers: dict[str, ServerConfig], granted: list[str], window: int,
                  loaded: set[str]) -> Toolset:
    """Start (at first use) every server the grants name and build their tools.

    `loaded` holds the names this agent already pulled in with find_tools; they stay sent."""
    out = Toolset()
    wanted: dict[str, set[str] | None] = {}
    for server, tool in grants(granted):
        if server not in servers:
            out.problems.append(f"no MCP server named '{server}' is configured (granted as `mcp:{server}`)")
            continue
        named = wanted.get(server, set())
        if tool is None or named is None:
            wanted[server] = None
        else:
            named.add(tool)
            wanted[server] = named
    listings: dict[str, list[RemoteTool] | ServerUnavailable] = {}

    async def listing(server: str) -> None:
        try:
            listings[server] = await hub.connection(server, servers[server]).tools()
        except ServerUnavailable as exc:
            listings[server] = exc

    async with trio.open_nursery() as nursery:  # servers start side by side: one slow start delays no other
        for server in wanted:
            nursery.start_soon(listing, server)
    for server, names in wanted.items():
        conn, remote = hub.connection(server, servers[server]), listings[server]
        if isinstance(remote, ServerUnavailable):
            out.problems.append(str(remote))
            continue
        listed = {t.name for t in remote}
        for missing in sorted((names or set()) - listed):
            out.problems.append(f"MCP server '{server}' has no tool '{missing}'; it has: {', '.join(sorted(listed))}")
        for t in remote:
            if names is not None and t.name not in names:
                continue
            if problem := schema_problem(t.schema):
                out.problems.append(f"MCP server '{server}': tool '{t.name}' left out: its input schema is not "
                                    f"valid JSON Schema ({problem})")
                continue
            out.tools.append(adapt(conn, t))
    if sum(_cost(t) for t in out.tools) > SCHEMA_SHARE * window:
        out.deferred = {t.name: t for t in out.tools if t.name not in loaded}
        out.tools = [t for t in out.tools if t.name in loaded]
    return out


def adapt(conn: Connection, remote: RemoteTool) -> Tool:
    name = tool_name(conn.name, remote.name)
    policy = conn.config.policy(remote.name)

    async def run(args: dict[str, Any], ctx: ToolContext):
        if policy == "deny":
            raise ToolError(f"{name} is denied by the `approval` setting of MCP server '{conn.name}'")
        if policy == "ask":
            shown = json.dumps(args, ensure_ascii=False)
            summary = (f"{ctx.agent} wants to call {remote.name} on MCP server '{conn.name}' "
                       f"({conn.config.shown()}) with {shown[:500]}")
            if not await ctx.session.confirm(ctx.agent, f"mcp:{conn.name}/{remote.name}", summary):
                raise ToolError(f"The user did not allow {name}; it was not called. Do not retry it unasked.")
        try:
            return to_output(await conn.call(remote.name, args))
        except (ServerUnavailable, CallFailed) as exc:
            raise ToolError(str(exc)) from None

    description = remote.description or f"{remote.name} (from MCP server '{conn.name}')"
    return Tool(name, description, dict(remote.schema), run, read_only=remote.read_only)


class FindArgs(msgspec.Struct, forbid_unknown_fields=True):
    query: str
    load: list[str] = []


def find_tools(deferred: dict[str, Tool], on_load) -> Tool:
    """Search the tools whose schemas were held back, and load the ones named in `load`:
    `on_load(tools)` adds them to the agent's registry for its next request."""

    async def run(args: FindArgs, ctx: ToolContext) -> str:
        unknown = [n for n in args.load if n not in deferred]
        if unknown:
            raise ToolError(f"no such tool to load: {', '.join(unknown)}; search first, then load by exact name")
        if args.load:
            on_load([deferred[n] for n in args.load])
            return f"Loaded {', '.join(args.load)}: call them from your next step on."
        words = [w for w in re.findall(r"\w+", args.query.lower()) if w]
        scored = sorted(((sum(w in f"{t.name} {t.description}".lower() for w in words), n)
                         for n, t in deferred.items()), key=lambda s: (-s[0], s[1]))
        hits = [n for score, n in scored if score][:15]
        if not hits:
            return f"No tool matches {args.query!r}. {len(deferred)} tools can be searched; try other words."
        return "\n".join(f"{n}: {deferred[n].description.splitlines()[0][:200] if deferred[n].description else ''}"
                         for n in hits) + "\nLoad with find_tools(query, load=[names])."

    return Tool(FIND_TOOLS, "Search the MCP tools that are available but not loaded (their schemas are held "
                            "back to save context), then load the ones you need by name.", FindArgs, run,
                read_only=True)


def schema_problem(schema: dict[str, Any]) -> str | None:
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    if not isinstance(schema, dict):
        return "it is not an object"
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        return f"{exc.message}" + (f" at `{where}`" if where else "")
    if schema.get("type", "object") != "object":
        return f"a tool's input must be an object, not {schema.get('type')!r}"
    return None


def _cost(tool: Tool) -> int:
    spec = tool.spec()
    return estimate(json.dumps(spec.input_schema)) + estimate(spec.description) + estimate(spec.name)

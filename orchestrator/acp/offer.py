"""What the bridge offers an external agent, as the project's own tools: the room's skills (list, read, read a
bundled file, run a bundled script in the jail), its MCP connectors, its knowledge base, and the floor's hand back.

Each tool acts as the member it was granted to: the skills that member may use, the connectors' approval policy
with the user asked once per (agent, connector), the jail and risk checks every shell command of the room gets.
"""
from __future__ import annotations

import json
import shlex
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Protocol

import msgspec
import trio

from orchestrator.mcplink.config import ServerConfig
from orchestrator.mcplink.results import to_output
from orchestrator.mcplink.servers import CallFailed, Connection, ServerUnavailable
from orchestrator.memory.knowledge import KnowledgeBase
from orchestrator.skills.activation import content
from orchestrator.skills.bundle import MAX_TEXT_BYTES
from orchestrator.skills.skill import Skill
from orchestrator.tools import guard
from orchestrator.tools.base import Tool, ToolContext, ToolError, ToolOutput
from orchestrator.tools.jail import backend
from orchestrator.tools.kb_tool import kb_tool
from orchestrator.tools.process import run_command
from orchestrator.tools.risk import OPAQUE, UNSANDBOXED, Risk, assess
from orchestrator.tools.sandbox import confined, read_own
from orchestrator.tools.seccomp import open_filter
from orchestrator.tools.session import ToolSession
from orchestrator.tools.shell import DEFAULT_TIMEOUT, MAX_TIMEOUT, confinement, finished

HandBack = Callable[[str | None], Awaitable[None]]
_CHECKS = trio.CapacityLimiter(2)  # reading files and classifying commands: off the event loop
# How a bundled script is started when its name says what runs it; anything else must be executable.
RUNNERS = {".py": "python3", ".sh": "bash", ".bash": "bash", ".js": "node", ".mjs": "node", ".rb": "ruby",
           ".pl": "perl"}


class BridgeServices(Protocol):
    """What the bridge reaches of a room, and nothing else: the skills a member may use, the room's MCP
    connectors, its knowledge base, and its tool session (the user's confirmations, the jail's settings)."""

    @property
    def session(self) -> ToolSession: ...

    @property
    def knowledge(self) -> KnowledgeBase | None: ...

    def skills(self, agent: str) -> Mapping[str, tuple[Skill, bool]]:
        """The skills `agent` may use, each with whether it is in the trusted tier."""
        ...

    def connectors(self) -> Mapping[str, ServerConfig]: ...

    def connection(self, server: str) -> Connection | None:
        """The room's connection to `server` (started at first use); None when the room has no MCP hub."""
        ...


# --- the skills ---------------------------------------------------------------------------------------------

class NameArgs(msgspec.Struct, forbid_unknown_fields=True):
    name: str


class FileArgs(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    path: str  # relative to the skill's folder


class ScriptArgs(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    script: str  # relative to the skill's folder, e.g. scripts/build.py
    args: list[str] = []
    timeout: Annotated[float, msgspec.Meta(gt=0, le=MAX_TIMEOUT)] = DEFAULT_TIMEOUT


class NoArgs(msgspec.Struct, forbid_unknown_fields=True):
    pass


def _skill(services: BridgeServices, agent: str, name: str) -> tuple[Skill, bool]:
    usable = services.skills(agent)
    if name not in usable:
        raise ToolError(f"no skill named {name!r} is yours to use; list_skills lists them: "
                        f"{', '.join(sorted(usable)) or 'none'}")
    return usable[name]


def _within(skill: Skill, raw: str) -> ToolSession:
    """The skill's folder as a sandbox of its own: a path in it may not lead out (`..`, a link, a file with
    other names), which read_own and confined refuse."""
    if not raw.strip() or Path(raw).is_absolute():
        raise ToolError(f"{raw!r}: give a path relative to the skill's folder, as read_skill lists them")
    return ToolSession(Path(skill.folder))


def skill_tools(services: BridgeServices) -> list[Tool]:
    async def list_skills(_: NoArgs, ctx: ToolContext) -> str:
        usable = services.skills(ctx.agent)
        if not usable:
            return "No skills are yours to use in this room."
        return "\n".join(f"{n}{'' if trusted else ' (untrusted tier: a third party suggestion)'}: "
                         f"{s.description}" for n, (s, trusted) in sorted(usable.items()))

    async def read_skill(args: NameArgs, ctx: ToolContext) -> str:
        skill, trusted = _skill(services, ctx.agent, args.name)
        text = await trio.to_thread.run_sync(
            lambda: content(skill, ToolSession(Path(skill.folder)), untrusted=not trusted), limiter=_CHECKS)
        return (f"{text}\nThrough this bridge the paths above are relative to the skill's folder: read a file with "
                f"read_skill_file, run a script with run_skill_script.")

    async def read_skill_file(args: FileArgs, ctx: ToolContext) -> str:
        skill, _ = _skill(services, ctx.agent, args.name)
        folder = _within(skill, args.path)
        _, data = await trio.to_thread.run_sync(read_own, folder, args.path, MAX_TEXT_BYTES, limiter=_CHECKS)
        if b"\0" in data[:8192]:
            return f"{args.path} is a binary file of {len(data)} bytes; it is not shown."
        return data.decode("utf-8", errors="replace")

    async def run_skill_script(args: ScriptArgs, ctx: ToolContext) -> ToolOutput:
        skill, _ = _skill(services, ctx.agent, args.name)
        folder = _within(skill, args.script)
        script = await trio.to_thread.run_sync(_script, folder, args.script, limiter=_CHECKS)
        runner = RUNNERS.get(script.suffix)
        argv = [runner, str(script), *args.args] if runner else [str(script), *args.args]
        return await _run_jailed(ctx, argv, Path(skill.folder), args.timeout)

    return [
        Tool("list_skills", "The room's skills you may use: name and description of each.", NoArgs, list_skills,
             read_only=True),
        Tool("read_skill", "A skill's instructions and the list of the files it bundles (paths relative to its "
             "folder). Read it before a task its description matches.", NameArgs, read_skill, read_only=True),
        Tool("read_skill_file", "One file a skill bundles, by its path relative to the skill's folder.", FileArgs,
             read_skill_file, read_only=True),
        Tool("run_skill_script", "Run a script a skill bundles (path relative to the skill's folder) with `args`, in "
             "the room's sandbox: the workspace is the working folder and writable, the skill's folder readable, no "
             "network. Output and exit code come back; risky commands ask the user first.", ScriptArgs,
             run_skill_script),
    ]


def _script(folder: ToolSession, raw: str) -> Path:
    path = confined(folder, raw)
    if not path.is_file():
        raise ToolError(f"{raw}: no such file in the skill's folder")
    if path.suffix not in RUNNERS and not path.stat().st_mode & 0o111:
        raise ToolError(f"{raw}: not executable and not a kind of script known here "
                        f"({', '.join(sorted(RUNNERS))}); ask the skill's author")
    return path


async def _run_jailed(ctx: ToolContext, argv: list[str], skill_folder: Path, timeout: float) -> ToolOutput:
    """`argv` as the bash tool runs a command: refused or asked by its risks, inside the jail with the workspace
    writable (its protected names guarded) and the skill's folder readable, with the sandbox's limits."""
    session, command = ctx.session, shlex.join(argv)
    settings = session.sandbox_for(ctx.agent)
    jail = backend()
    if settings.enabled and (why := await trio.to_thread.run_sync(jail.unavailable, limiter=_CHECKS)):
        return ToolOutput(f"Not run: {why}.", is_error=True)
    verdict = await trio.to_thread.run_sync(assess, command, limiter=_CHECKS)
    if verdict.blocked:
        return ToolOutput(f"Refused: this command is never run ({verdict.blocked}).", is_error=True)
    # as for bash: opaque code runs contained; with nothing around it, every risk asks, and so does no risk
    risks = [r for r in verdict.risks if r.category != OPAQUE] if settings.enabled else \
        (list(verdict.risks) or [Risk(UNSANDBOXED, "the sandbox is off (sandbox: off), so nothing contains it")])
    for risk in risks:
        if not await session.confirm(ctx.agent, risk.category, f"{command}\n({risk.reason}; a skill's script)"):
            return ToolOutput(f"The user denied this command ({risk.reason}); it did not run.", is_error=True)
    run: list[str] = argv
    limits, fds, watch = None, [], None
    if settings.enabled:
        roots = tuple(w for w in settings.writable if w.exists())
        watch = guard.of(session)
        seen = await trio.to_thread.run_sync(watch.before, ctx.agent, roots, limiter=_CHECKS)
        try:
            walls = confinement(session, session.workspace, False, roots, seen.read_only())
            if not skill_folder.is_relative_to(session.workspace):  # a user's skill: seen, read-only
                walls = replace(walls, readable=(*walls.readable, skill_folder))
            limits = settings.limits
            fds = [fd] if (fd := open_filter(False)) is not None else []
            run = jail.argv(argv, replace(walls, limits=limits, seccomp=fds[0] if fds else None))
        except BaseException:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(partial(watch.after, ctx.agent, seen, (), roots))
            raise
    after = ""
    try:
        result = await run_command(run, cwd=session.workspace, timeout=timeout, limits=limits, pass_fds=fds)
    finally:
        if watch is not None:
            with trio.CancelScope(shield=True):  # a stopped script is checked too: it may have written
                outcome = await trio.to_thread.run_sync(partial(watch.after, ctx.agent, seen, (), roots),
                                                        limiter=_CHECKS)
                after = outcome.note(session.workspace)
    return finished(result, timeout, limits, after)


# --- the connectors -------------------------------------------------------------------------------------------

class ConnectorsArgs(msgspec.Struct, forbid_unknown_fields=True):
    server: str | None = None


class CallArgs(msgspec.Struct, forbid_unknown_fields=True):
    server: str
    tool: str
    arguments: dict[str, Any] = {}


def connector_tools(services: BridgeServices) -> list[Tool]:
    def connection(server: str) -> Connection:
        servers = services.connectors()
        if server not in servers:
            raise ToolError(f"no connector named {server!r}; the room's connectors: {', '.join(sorted(servers)) or 'none'}")
        conn = services.connection(server)
        if conn is None:
            raise ToolError("this room has no MCP connections to make")
        return conn

    async def list_connectors(args: ConnectorsArgs, ctx: ToolContext) -> str:
        servers = services.connectors()
        if args.server is None:
            if not servers:
                return "This room has no connectors."
            return "\n".join(f"{name}: {cfg.shown()} (approval: {_policy(cfg)})" for name, cfg in sorted(servers.items())) \
                + "\nlist_connectors(server) lists one's tools with their input schemas."
        conn = connection(args.server)
        try:
            remote = await conn.tools()
        except ServerUnavailable as exc:
            raise ToolError(str(exc)) from None
        return json.dumps([{"name": t.name, "description": t.description, "inputSchema": t.schema,
                            "readOnly": t.read_only, "approval": conn.config.policy(t.name)}
                           for t in remote], ensure_ascii=False, indent=1)

    async def call_connector(args: CallArgs, ctx: ToolContext) -> ToolOutput:
        conn = connection(args.server)
        try:
            remote = {t.name: t for t in await conn.tools()}
        except ServerUnavailable as exc:
            raise ToolError(str(exc)) from None
        if args.tool not in remote:
            raise ToolError(f"the connector {args.server!r} has no tool {args.tool!r}; it has: "
                            f"{', '.join(sorted(remote))}")
        policy = conn.config.policy(args.tool)
        if policy == "deny":
            raise ToolError(f"{args.tool} is denied by the `approval` setting of the connector {args.server!r}")
        # its arguments checked against the schema the server gave, as for a model member's call
        Tool(args.tool, "", dict(remote[args.tool].schema), _never).parse(args.arguments)
        if policy == "ask":
            shown = json.dumps(args.arguments, ensure_ascii=False)
            summary = (f"{ctx.agent} (an external agent, through the bridge) wants to call {args.tool} on the "
                       f"connector '{args.server}' ({conn.config.shown()}) with {shown[:500]}")
            if not await ctx.session.confirm(ctx.agent, f"connector:{args.server}", summary):
                raise ToolError(f"The user did not allow {args.tool} on {args.server}; it was not called. "
                                "Do not retry it unasked.")
        try:
            return to_output(await conn.call(args.tool, args.arguments))
        except (ServerUnavailable, CallFailed) as exc:
            raise ToolError(str(exc)) from None

    return [
        Tool("list_connectors", "The room's connectors (MCP servers); with `server`, that one's tools and their "
             "input schemas.", ConnectorsArgs, list_connectors, read_only=True),
        Tool("call_connector", "Call `tool` on the connector `server` with `arguments` (an object matching the "
             "tool's input schema, as list_connectors shows it). The user is asked before the first call to each "
             "connector unless its `approval` allows it.", CallArgs, call_connector),
    ]


def _policy(cfg: ServerConfig) -> str:
    return cfg.approval if isinstance(cfg.approval, str) else ", ".join(f"{k}: {v}" for k, v in cfg.approval.items())


async def _never(args: Any, ctx: ToolContext) -> str:
    raise AssertionError("a schema holder is never run")


# --- the knowledge base and the floor ----------------------------------------------------------------------

class HandBackArgs(msgspec.Struct, forbid_unknown_fields=True):
    note: str | None = None


def hand_back_tool(hand_back: HandBack) -> Tool:
    async def run(args: HandBackArgs, ctx: ToolContext) -> str:
        await hand_back(args.note)
        return "You handed the floor back; end your turn now."

    return Tool("hand_back", "Hand the floor back to the room's commander once you are done with the user "
                "(an optional `note` says what you leave it). End your turn after calling it.", HandBackArgs, run)


def offered(services: BridgeServices, hand_back: HandBack | None) -> list[Tool]:
    """Every tool of one grant, built again at each listing so what the room changed (a skill reloaded) shows."""
    tools = [*skill_tools(services), *connector_tools(services)]
    if services.knowledge is not None:
        tools.append(kb_tool(services.knowledge))
    if hand_back is not None:
        tools.append(hand_back_tool(hand_back))
    return tools


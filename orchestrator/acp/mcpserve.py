"""The small MCP server the bridge speaks on one authenticated connection: the initialize handshake, ping,
tools/list and tools/call over the project's own `Tool`s, on a jsonrpc.Peer, and the client's cancellations.

Only the handshake era of the protocol is spoken (the SDK's clients probe `server/discover` first and fall back
to `initialize` when it is unknown, as it is here); nothing of the `mcp` SDK is imported into the room's process.
"""
from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from itertools import count
from typing import Any

import trio

from orchestrator.acp.jsonrpc import INVALID_PARAMS, OnRequest, Peer, RpcError
from orchestrator.core.log import logger
from orchestrator.tools.base import Tool, ToolContext, ToolError, ToolOutput
from orchestrator.tools.session import ToolSession

log = logger(__name__)

# Oldest to newest; an unknown version asked for is answered with the newest, as the protocol says.
VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
SERVER_INFO = {"name": "orchestrator", "title": "The orchestrator's room", "version": "1"}
INSTRUCTIONS = ("Tools of the room you work in: its skills (list_skills, read_skill, read_skill_file, "
                "run_skill_script), its MCP connectors (list_connectors, call_connector) and its knowledge base "
                "(search_knowledge).")


# The id of the request the current task answers: each request is served in a task of its own.
_ANSWERING: ContextVar[object] = ContextVar("mcp_request_id")


class _Withdrawn(Exception):
    """The client cancelled the request: its handler stopped and it gets no answer."""


class _Peer(Peer):
    """A Peer that honours MCP's `notifications/cancelled`: the request it names is stopped (a script it runs is
    ended, as a timeout ends one) and is never answered, as the protocol says; the other requests go on. The
    answer is written outside the cancel, so a cancel arriving as it goes out never cuts a line in two."""

    def __init__(self, stream: trio.abc.Stream, on_request: OnRequest):
        super().__init__(stream, stream, on_request=self._handled, on_notify=self._notified)
        self._handler = on_request
        self._running: dict[int | str, trio.CancelScope] = {}

    async def _serve_request(self, ident: Any, method: str, params: Any) -> None:
        _ANSWERING.set(ident)
        try:
            await super()._serve_request(ident, method, params)
        except _Withdrawn:
            pass

    async def _handled(self, method: str, params: Any) -> Any:
        key = _key(_ANSWERING.get(None))
        # initialize may not be cancelled (the protocol says so); an id in use already names the first request
        if method == "initialize" or key is None or key in self._running:
            return await self._handler(method, params)
        with trio.CancelScope() as scope:
            self._running[key] = scope
            try:
                return await self._handler(method, params)
            finally:
                del self._running[key]
        raise _Withdrawn  # the scope caught its cancel: the handler did not finish

    async def _notified(self, method: str, params: Any) -> None:
        if method != "notifications/cancelled" or not isinstance(params, dict):
            return
        key = _key(params.get("requestId"))
        scope = self._running.get(key) if key is not None else None  # an unknown or finished one is ignored
        if scope is not None:
            log.info("bridge request cancelled by the client", request=params.get("requestId"),
                     reason=str(params.get("reason", ""))[:200])
            scope.cancel()


def _key(ident: object) -> int | str | None:
    """A request id as the cancellations name it; a float or a bool (which would equal an int) names none."""
    return ident if type(ident) is int or type(ident) is str else None


def negotiate(asked: object) -> str:
    return asked if isinstance(asked, str) and asked in VERSIONS else VERSIONS[-1]


def listed(tool: Tool) -> dict[str, Any]:
    """A tool as tools/list shows it."""
    spec = tool.spec()
    out: dict[str, Any] = {"name": spec.name, "description": spec.description, "inputSchema": spec.input_schema}
    if tool.read_only:
        out["annotations"] = {"readOnlyHint": True}
    return out


def result(output: str | ToolOutput) -> dict[str, Any]:
    """A tool's output as tools/call answers it: text and images as content, an error as isError."""
    if isinstance(output, str):
        output = ToolOutput(output)
    content: list[dict[str, Any]] = [{"type": "text", "text": output.text}]
    content += [{"type": "image", "data": i.data, "mimeType": i.media_type} for i in output.images]
    return {"content": content, "isError": output.is_error}


class ToolServer:
    """What one connection is served: the tools `offered()` gives at each listing and call (so a skill reloaded
    or a grant revoked is seen at once), each run as `agent` in the room's tool session."""

    def __init__(self, agent: str, session: ToolSession, offered: Callable[[], list[Tool]]):
        self.agent, self.session, self.offered = agent, session, offered
        self._calls = count(1)

    async def serve(self, stream: trio.abc.Stream) -> str:
        """Answer on `stream` until the other side closes it; returns why the connection ended."""
        peer = _Peer(stream, self.request)
        await peer.serve()
        return peer.why_closed

    async def request(self, method: str, params: Any) -> Any:
        params = params if isinstance(params, dict) else {}
        if method == "initialize":
            return {"protocolVersion": negotiate(params.get("protocolVersion")),
                    "capabilities": {"tools": {"listChanged": False}},
                    "serverInfo": SERVER_INFO, "instructions": INSTRUCTIONS}
        if method == "ping":
            return {}
        if method == "tools/list":
            return {"tools": [listed(t) for t in self.offered()]}
        if method == "tools/call":
            return await self.call(params)
        raise RpcError(-32601, f"method not found: {method}")

    async def call(self, params: dict[str, Any]) -> dict[str, Any]:
        name, arguments = params.get("name"), params.get("arguments") or {}
        tool = next((t for t in self.offered() if t.name == name), None)
        if tool is None:
            raise RpcError(INVALID_PARAMS, f"unknown tool: {name!r}")
        if not isinstance(arguments, dict):
            raise RpcError(INVALID_PARAMS, "arguments must be an object")
        ctx = ToolContext(agent=self.agent, call_id=f"bridge-{next(self._calls)}", session=self.session)
        try:
            return result(await tool.run(tool.parse(arguments), ctx))
        except ToolError as exc:
            return result(ToolOutput(str(exc), is_error=True))
        except Exception as exc:  # a broken tool fails its call, never the room the bridge serves
            log.warning("bridge tool failed", tool=tool.name, agent=self.agent, exc_info=True)
            return result(ToolOutput(f"{tool.name} failed: {type(exc).__name__}: {exc}", is_error=True))

"""The Agent Client Protocol's client side on trio: start an external agent (launch.py), `initialize` it, open
or load sessions, send prompts and stream their updates, cancel; and answer what the agent asks of the room.

The room stays in charge: file requests go through the file tools (fs.py), terminals through the bash tool
(terminal.py), permission questions to the host; the agent is an external program, so what it sends is checked
and cut to size, and one that stops talking is ended.
"""
from __future__ import annotations

import importlib.metadata
import os
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, Protocol, Sequence

import trio

from orchestrator.acp import fs, launch
from orchestrator.acp.jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND, Closed, Peer, RpcError
from orchestrator.acp.launch import AcpStartError, AgentProcess
from orchestrator.acp.terminal import Terminals
from orchestrator.acp.updates import Reader, Update
from orchestrator.core.errors import OrchestratorError
from orchestrator.core.log import logger
from orchestrator.tools.base import ToolContext, ToolError
from orchestrator.tools.jail import Settings
from orchestrator.tools.session import ToolSession

if TYPE_CHECKING:
    from orchestrator.team.schema import AcpSpec

__all__ = ["AcpError", "AcpStartError", "AgentInfo", "ClientHost", "Connection", "Update", "connect"]

log = logger(__name__)

PROTOCOL_VERSION = 1
AUTH_REQUIRED = -32000  # ACP's error code for "log in first"
STOP_REASONS = frozenset({"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"})
MAX_REQUESTS = 64  # of the agent's requests being answered at once; more is a flood
PEEK = 200  # bytes of the agent's first line shown when it is not JSON-RPC
CANCEL_SEND = 0.5  # seconds to get session/cancel out when the caller itself was cancelled
WHY_WAIT = 0.5  # after the pipe closed, for the process's exit status, which says more than "closed"
PERMISSION_KINDS = frozenset({"allow_once", "allow_always", "reject_once", "reject_always"})
# Sent with every session/new and session/load (`_meta` is ACP's extension point: an agent ignores what it does
# not know). Claude Code's adapter otherwise reads the workspace's .claude/settings.json, whose hooks run shell
# commands unasked and whose env replaces the agent's; the workspace may be an attacker's, so only the agent's
# own settings count: those in its private HOME, which hold what the user copied there.
SESSION_META: dict[str, Any] = {"claudeCode": {"options": {"settingSources": ["user"]}}}


class AcpError(OrchestratorError):
    """The agent broke off: it exited or broke the protocol mid-session, or refused a request; one line."""


class AuthRequired(AcpStartError):
    """The agent wants to be logged in first (ACP's auth_required); the message says how."""


class ClientHost(Protocol):
    """What the client needs of the room: the member's name, its tool session, and someone to ask."""
    agent: str
    session: ToolSession

    async def permission(self, title: str, kind: str, options: list[dict[str, Any]]) -> str | None:
        """The optionId chosen among `options` ({optionId, name, kind}); None: cancelled."""
        ...


@dataclass(frozen=True)
class AgentInfo:
    name: str
    version: str
    protocol_version: int
    load_session: bool
    capabilities: dict[str, Any]


class _Tap(trio.abc.ReceiveStream):
    """The agent's stdout, with its first line peeked at: a program that prints anything but a JSON object
    there does not speak ACP, and saying so at once beats waiting out the start timeout."""

    def __init__(self, inner: trio.abc.ReceiveStream):
        self._inner = inner
        self._head = bytearray()
        self.garbage = trio.Event()

    @property
    def first_line(self) -> str:
        return bytes(self._head).split(b"\n", 1)[0].decode("utf-8", errors="replace").strip()[:PEEK]

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        data = await self._inner.receive_some(max_bytes)
        if len(self._head) < PEEK and not self.garbage.is_set():
            self._head += data[:PEEK]
            start = bytes(self._head).lstrip()
            if start and not start.startswith(b"{"):
                self.garbage.set()
        return bytes(data)

    async def aclose(self) -> None:
        await self._inner.aclose()


class Connection:
    """One started agent. `closed` is set once it exited or stopped talking; `why` says which in one line."""

    def __init__(self, spec: AcpSpec, host: ClientHost, process: AgentProcess, tap: _Tap):
        assert process.proc.stdin is not None  # opened with pipes
        self._spec, self._host, self._process, self._tap = spec, host, process, tap
        self._peer = Peer(process.proc.stdin, tap, on_request=self._on_request, on_notify=self._on_notify)
        self._ctx = ToolContext(host.agent, "acp", host.session)
        self._terminals = Terminals(self._ctx)
        self._sessions: set[str] = set()
        self._listening: dict[str, tuple[Reader, Callable[[Update], Awaitable[None]]]] = {}
        self._asking: dict[str, set[trio.CancelScope]] = {}
        self._busy = 0
        self._logins: list[str] = []  # the names of the ways to log in the agent offered
        self._keyed: list[tuple[str, list[str]]] = []  # its env_var ways: (method id, the variables each needs)
        self.closed = trio.Event()
        self.why = ""
        self.info = AgentInfo(os.path.basename(spec.command[0]) if spec.command else "agent", "", 0, False, {})

    @property
    def pid(self) -> int:
        return self._process.proc.pid

    @property
    def home(self) -> Path:
        return self._process.home

    # --- what the room asks of the agent ---

    async def new_session(self, cwd: Path, mcp_servers: list[dict[str, Any]]) -> str:
        params = {"cwd": str(cwd), "mcpServers": mcp_servers, "_meta": SESSION_META}
        answer = await self._session_ask("session/new", params)
        session = answer.get("sessionId") if isinstance(answer, dict) else None
        if not isinstance(session, str) or not session or len(session) > 200:
            raise AcpError(f"agent {self._host.agent}: session/new answered without a session id")
        self._sessions.add(session)
        return session

    async def load_session(self, session_id: str, cwd: Path, mcp_servers: list[dict[str, Any]]) -> bool:
        """Reopen a session the agent kept (its history replayed to it, not to the room); False when the
        agent cannot load sessions or no longer has this one."""
        if not self.info.load_session:
            return False
        self._sessions.add(session_id)
        try:
            await self._session_ask("session/load", {"sessionId": session_id, "cwd": str(cwd),
                                                     "mcpServers": mcp_servers, "_meta": SESSION_META})
        except AcpError:
            if self.closed.is_set():
                raise
            self._sessions.discard(session_id)
            return False
        return True

    async def prompt(self, session_id: str, text: str, on_update: Callable[[Update], Awaitable[None]]) -> str:
        """Send `text`; each update reaches `on_update` in the order sent, all before this returns the stop
        reason. Cancelling the caller sends session/cancel first, so the agent stops its work too."""
        reader = Reader()
        self._listening[session_id] = (reader, on_update)
        try:
            answer = await self._ask("session/prompt",
                                     {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]})
        except trio.Cancelled:
            with trio.CancelScope(shield=True), trio.move_on_after(CANCEL_SEND):
                await self.cancel(session_id)
            raise
        finally:
            self._listening.pop(session_id, None)
        if note := await self._process.look(self._host.agent, final=False):
            await on_update(Update("other", note, None, {"sessionUpdate": "protected_names_set_aside"}))
        stop = answer.get("stopReason") if isinstance(answer, dict) else None
        if not isinstance(stop, str) or stop not in STOP_REASONS:
            raise AcpError(f"agent {self._host.agent}: answered the prompt with no known stopReason "
                           f"({str(stop)[:40]!r})")
        return stop

    async def cancel(self, session_id: str) -> None:
        """session/cancel: the agent ends the prompt with "cancelled"; questions it is waiting on are dropped."""
        for scope in self._asking.get(session_id, ()):
            scope.cancel()
        try:
            await self._peer.notify("session/cancel", {"sessionId": session_id})
        except Closed:
            pass  # gone already: nothing to stop

    async def _session_ask(self, method: str, params: dict[str, Any]) -> Any:
        """session/new or session/load; an agent that wants a login first, and offers one by an API key that
        `acp.env` gives it, is sent `authenticate` with that way, and asked once more."""
        try:
            return await self._ask(method, params, timeout=self._spec.start_timeout)
        except AuthRequired:
            method_id = next((m for m, needed in self._keyed if needed and all(v in self._spec.env for v in needed)),
                             None)
            if method_id is None:
                raise
            await self._ask("authenticate", {"methodId": method_id}, timeout=self._spec.start_timeout)
            return await self._ask(method, params, timeout=self._spec.start_timeout)

    async def _ask(self, method: str, params: dict[str, Any], *, timeout: float = float("inf")) -> Any:
        if self.closed.is_set():
            raise AcpError(f"agent {self._host.agent} {self.why}")
        try:
            return await self._peer.request(method, params, timeout=timeout)
        except Closed:
            with trio.move_on_after(WHY_WAIT):
                await self.closed.wait()
            raise AcpError(f"agent {self._host.agent} {self.why or 'closed the connection'}") from None
        except trio.TooSlowError:
            raise AcpError(f"agent {self._host.agent}: no answer to {method} within {timeout:g} s") from None
        except RpcError as exc:
            if exc.code == AUTH_REQUIRED:
                raise AuthRequired(self._auth_line()) from None
            raise AcpError(f"agent {self._host.agent} refused {method}: {exc.message[:300]}") from None

    def _auth_line(self) -> str:
        offers = f" (it offers: {', '.join(self._logins)})" if self._logins else ""
        keys = sorted({v for _, needed in self._keyed for v in needed})
        key = f"set {' or '.join(keys[:4])} in `acp.env`" if keys else "set its API key in `acp.env`"
        return (f"agent {self._host.agent}: authentication required{offers}: {key}, or log in once with the "
                f"agent's own command and list its login file in `acp.home_files`")

    # --- what the agent asks of the room ---

    async def _on_request(self, method: str, params: Any) -> Any:
        if self._busy >= MAX_REQUESTS:
            raise RpcError(INVALID_PARAMS, f"over {MAX_REQUESTS} requests at once; wait for the answers")
        handler = _HANDLERS.get(method)
        if handler is None:
            raise RpcError(METHOD_NOT_FOUND, f"method not found: {method}")
        session = params.get("sessionId") if isinstance(params, dict) else None
        if session not in self._sessions:
            raise RpcError(INVALID_PARAMS, f"unknown sessionId {str(session)[:80]!r}")
        self._busy += 1
        try:
            return await handler(self, params)
        except ToolError as exc:
            raise RpcError(INVALID_PARAMS, str(exc)) from None
        except OSError as exc:
            raise RpcError(INVALID_PARAMS, f"{method}: {exc.strerror or exc}") from None
        finally:
            self._busy -= 1

    async def _on_notify(self, method: str, params: Any) -> None:
        if method != "session/update" or not isinstance(params, dict):
            return
        listening = self._listening.get(params.get("sessionId"))  # type: ignore[arg-type]
        if listening is not None:  # updates outside a prompt (a loaded session's history) are the agent's own
            reader, deliver = listening
            await deliver(reader.read(params.get("update")))

    async def _permission(self, params: dict[str, Any]) -> dict[str, Any]:
        call = _object(params.get("toolCall"))
        title = " ".join(str(call.get("title") or "a tool call").split())[:300]
        kind = str(call.get("kind") or "other")[:40]
        offered = [{"optionId": o["optionId"][:200], "name": str(o.get("name") or o["optionId"])[:200],
                    "kind": o["kind"]}
                   for o in (params.get("options") or [])[:20]
                   if isinstance(o, dict) and isinstance(o.get("optionId"), str) and o.get("kind") in PERMISSION_KINDS]
        if not offered:
            raise RpcError(INVALID_PARAMS, "session/request_permission offered no options to choose from")
        session = params["sessionId"]
        scope = trio.CancelScope()
        self._asking.setdefault(session, set()).add(scope)
        chosen = None
        try:
            with scope:
                chosen = await self._host.permission(title, kind, offered)
        finally:
            self._asking[session].discard(scope)
        # the host names an option by id, or by kind; anything else the agent did not offer counts as no answer
        pick = next((o["optionId"] for o in offered if chosen in (o["optionId"], o["kind"])), None)
        if pick is None or scope.cancelled_caught:
            return {"outcome": {"outcome": "cancelled"}}
        return {"outcome": {"outcome": "selected", "optionId": pick}}

    # --- start and end ---

    async def _initialize(self) -> None:
        params = {"protocolVersion": PROTOCOL_VERSION,
                  "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True},
                  "clientInfo": {"name": "orchestrator", "title": "orchestrator", "version": _version()}}
        answer: list[Any] = []
        failed: list[BaseException] = []
        timeout = self._spec.start_timeout
        with trio.move_on_after(timeout) as waited:
            async with trio.open_nursery() as race:
                async def ask() -> None:
                    try:
                        answer.append(await self._peer.request("initialize", params))
                    except RpcError as exc:
                        failed.append(exc)
                    except Closed as exc:
                        failed.append(exc)
                        await self.closed.wait()  # set once the exit status is known, which says more
                    race.cancel_scope.cancel()

                async def until(event: trio.Event) -> None:
                    await event.wait()
                    race.cancel_scope.cancel()
                race.start_soon(ask)
                race.start_soon(until, self._tap.garbage)
                race.start_soon(until, self.closed)
        who, shown = f"agent {self._host.agent}", launch.shown(self._spec)
        if self._tap.garbage.is_set():
            raise AcpStartError(f"{who}: {shown} does not speak ACP: it printed {self._tap.first_line!r} where a "
                                f"JSON-RPC message belongs; check `acp.command` (some agents need a flag such as "
                                f"--acp or --experimental-acp)")
        if self.closed.is_set() and not answer:
            raise AcpStartError(f"{who}: {shown} {self.why.replace('exited', 'exited at start', 1)}")
        if failed and isinstance(failed[0], RpcError):
            if failed[0].code == AUTH_REQUIRED:
                raise AuthRequired(self._auth_line())
            raise AcpStartError(f"{who}: {shown} refused `initialize`: {failed[0].message[:300]}")
        if waited.cancelled_caught or not answer:
            raise AcpStartError(f"{who}: {shown} did not answer `initialize` within {timeout:g} s: it does not "
                                f"speak ACP, or starts slowly (raise `acp.start_timeout`)")
        self.info = self._read_info(answer[0])

    def _read_info(self, answer: Any) -> AgentInfo:
        who = f"agent {self._host.agent}"
        if not isinstance(answer, dict):
            raise AcpStartError(f"{who}: answered `initialize` with {type(answer).__name__}, not an object")
        version = answer.get("protocolVersion")
        if version != PROTOCOL_VERSION:
            raise AcpStartError(f"{who}: speaks ACP version {str(version)[:20]}; this client speaks version "
                                f"{PROTOCOL_VERSION}: use a version of the agent that does")
        given = answer.get("authMethods")
        methods: list[Any] = given if isinstance(given, list) else []
        self._logins = [" ".join(str(m.get("name"))[:60].split()) for m in methods[:5]
                        if isinstance(m, dict) and m.get("name")]
        self._keyed = [(m["id"][:100], _needed(m["vars"])) for m in methods[:20] if isinstance(m, dict)
                       and m.get("type") == "env_var" and isinstance(m.get("id"), str) and isinstance(m.get("vars"), list)]
        caps, about = _object(answer.get("agentCapabilities")), _object(answer.get("agentInfo"))
        name, release = about.get("name"), about.get("version")
        name = name if isinstance(name, str) and name else self.info.name
        release = release if isinstance(release, str) else ""
        return AgentInfo(name[:100], release[:100], PROTOCOL_VERSION, caps.get("loadSession") is True, caps)

    async def _watch(self) -> None:
        """Set `closed` when the process exits or its pipe closes, with the best reason known."""
        async def exited() -> None:
            await self._process.watch()
            self._end(self._process.exit_line())

        async def hung_up() -> None:
            await self._peer.closed.wait()
            with trio.move_on_after(WHY_WAIT):
                await self._process.exited.wait()
            if not self._process.exited.is_set():
                self._end(f"stopped talking: {self._peer.why_closed}")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(exited)
            nursery.start_soon(hung_up)

    def _end(self, why: str) -> None:
        if not self.closed.is_set():
            self.why = why
            self.closed.set()

    async def _close(self) -> None:
        with trio.CancelScope(shield=True):
            for session in list(self._listening):
                await self.cancel(session)
            await self._terminals.close()
            await self._peer.aclose()  # its stdin ends: the polite way to say goodbye
            await self._process.end()
            self._end("was closed")
            if note := await self._process.look(self._host.agent, final=True):
                log.warning("external agent left protected names", agent=self._host.agent, note=note)


@cache
def _version() -> str:
    try:
        return importlib.metadata.version("groupchat-orchestrator")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _needed(given: list[Any]) -> list[str]:
    """The variables an env_var login needs set (its optional ones left out), by name."""
    return [v["name"][:100] for v in given[:20] if isinstance(v, dict) and isinstance(v.get("name"), str)
            and v.get("optional") is not True]


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


async def _read(conn: Connection, params: Any) -> Any:
    return await fs.read_text_file(conn._ctx, params)


async def _write(conn: Connection, params: Any) -> Any:
    return await fs.write_text_file(conn._ctx, params)


async def _permission(conn: Connection, params: Any) -> Any:
    return await conn._permission(params)


def _terminal(name: str) -> Callable[[Connection, Any], Awaitable[Any]]:
    async def run(conn: Connection, params: Any) -> Any:
        return await getattr(conn._terminals, name)(params)
    return run


_HANDLERS: dict[str, Callable[[Connection, Any], Awaitable[Any]]] = {
    "session/request_permission": _permission,
    "fs/read_text_file": _read,
    "fs/write_text_file": _write,
    "terminal/create": _terminal("create"),
    "terminal/output": _terminal("output"),
    "terminal/wait_for_exit": _terminal("wait_for_exit"),
    "terminal/kill": _terminal("kill"),
    "terminal/release": _terminal("release"),
}


@asynccontextmanager
async def _unwrapped() -> AsyncIterator[None]:
    """The caller's own error out of the connection's nursery as itself, not in a group: the tasks beside
    the caller (the pipes' readers, the watch) end quietly, so a group of one is only ever the caller's."""
    try:
        yield
    except BaseExceptionGroup as group:
        inner: BaseException = group
        while isinstance(inner, BaseExceptionGroup) and len(inner.exceptions) == 1:
            inner = inner.exceptions[0]
        if inner is group:
            raise
        raise inner from None


@asynccontextmanager
async def connect(spec: AcpSpec, host: ClientHost, *, cwd: Path, sandbox: Settings | None = None,
                  home: Path | None = None, reach: Sequence[Path] = ()) -> AsyncIterator[Connection]:
    """Start the agent (in the sandbox `sandbox`, by default the member's), `initialize` it, and end it on exit.

    `home` is its private HOME, kept by the caller so its own state (its sessions) survives a restart; None
    makes a fresh one, removed at the end. `reach` are paths it may see read-only besides the workspace (the
    bridge's socket folder); it may then open unix sockets. AcpStartError says in one line why it did not start.
    """
    settings = host.session.sandbox_for(host.agent) if sandbox is None else sandbox
    process = await launch.start(spec, host.session, host.agent, cwd=Path(cwd), sandbox=settings, home=home,
                                 reach=reach)
    assert process.proc.stdout is not None and process.proc.stderr is not None  # opened with pipes
    conn = Connection(spec, host, process, _Tap(process.proc.stdout))
    try:
        async with _unwrapped(), trio.open_nursery() as nursery:
            nursery.start_soon(process.stderr.drain, process.proc.stderr)
            await nursery.start(conn._peer.serve)
            nursery.start_soon(conn._watch)
            try:
                await conn._initialize()
                yield conn
            finally:
                await conn._close()
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await process.end()  # a second time is a no-op; here for a start that failed midway

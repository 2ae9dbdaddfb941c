"""The connections to the user's MCP servers: one owner task per server for the whole process.

The owners live in the hub's nursery, never in a room's: the SDK tears a stdio server down inside a
shield (close stdin, 2 s, SIGTERM, 2 s, SIGKILL), so a stop that waited for it would take seconds.
A stop cancels only the call; the server stays up for the next one.
"""
from __future__ import annotations

import contextvars
import logging
import os
import sys
import time
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Mapping

import msgspec
import trio

from orchestrator.core.errors import InputError
from orchestrator.core.log import logger
from orchestrator.core.resources import state_dir
from orchestrator.core.secrets import fetched
from orchestrator.mcplink.config import ServerConfig, expand, secrets_of
from orchestrator.core.extras import install_hint

log = logger(__name__)

MAX_BACKOFF = 60.0
_MAX_PAGES = 100
_serving: contextvars.ContextVar[_Attempt | None] = contextvars.ContextVar("mcp_serving", default=None)


class ServerUnavailable(Exception):
    """A server could not be started or died: one line naming it, for the agent and the user."""


class CallFailed(Exception):
    """A call did not produce a result (timeout, protocol error); the server itself is fine."""


class RemoteTool(msgspec.Struct, frozen=True):
    """A tool as a server lists it, in our own types so nothing above touches the SDK's models."""

    name: str
    description: str
    schema: dict[str, Any]
    read_only: bool = False
    annotations: dict[str, Any] = {}


@dataclass
class _Attempt:
    """One run of a server process (or one HTTP session), from start to death."""

    started: float = field(default_factory=trio.current_time)
    ready: trio.Event = field(default_factory=trio.Event)
    closed: trio.Event = field(default_factory=trio.Event)  # set to end the owner
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    client: Any = None
    tools: list[RemoteTool] = field(default_factory=list)
    error: str | None = None
    dead: bool = False
    garbage: str | None = None  # the first stdout line that was not JSON-RPC
    stale: bool = False  # the server said its tool list changed
    errlog: Any = None

    def end(self) -> None:
        self.dead = True
        self.closed.set()


class Connection:
    """One configured server: started at first use, restarted with backoff after it dies."""

    def __init__(self, hub: Hub, name: str, config: ServerConfig):
        self.hub, self.name, self.config = hub, name, config
        self.log_path = hub.log_dir / f"{name}.log"
        self._lock = trio.Lock()
        self._live: _Attempt | None = None
        self.failures = 0
        self._retry_at = 0.0
        self.last_error = ""

    # --- starting ---------------------------------------------------------------------------

    async def _ready(self) -> _Attempt:
        async with self._lock:
            live = self._live
            if live is None or live.dead:
                wait = self._retry_at - trio.current_time()
                if wait > 0:
                    raise ServerUnavailable(f"{self.last_error}; next start attempt in {wait:.0f} s")
                live = self._live = _Attempt()
                self.hub.nursery.start_soon(self._own, live)
            with trio.move_on_at(live.started + self.config.start_timeout):
                await live.ready.wait()
            if not live.ready.is_set():
                live.error = (f"did not answer within {self.config.start_timeout:g} s of starting "
                              f"(start_timeout){self._stdout_note(live)}")
                live.end()
                live.scope.cancel()  # the owner tears the process down on its own time
            if live.error:
                self._failed(live.error)
            return live

    def _failed(self, error: str) -> None:
        self.failures += 1
        # Unlike a crash after good service, a failed start is not retried at once: it would fail the same way.
        self._retry_at = trio.current_time() + backoff(self.failures + 1)
        self.last_error = f"MCP server '{self.name}' {error} (log: {self.log_path})"
        log.info("mcp server unavailable", server=self.name, error=error)
        raise ServerUnavailable(self.last_error)

    async def _own(self, attempt: _Attempt) -> None:
        _serving.set(attempt)  # this task's context: the SDK's tasks inherit it, so its log lines land here
        try:
            with attempt.scope, open(self.log_path, "a", buffering=1, encoding="utf-8") as errlog:
                attempt.errlog = errlog
                errlog.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting {self.config.shown()}\n")
                # Fetched from the keyring off the event loop, and held only until the transport has them.
                secrets = await fetched(secrets_of(self.config), self.hub.env)
                async with AsyncExitStack() as stack:
                    transport = self._transport(errlog, stack, secrets)
                    client = await stack.enter_async_context(
                        self.hub.client(_watched(transport, attempt), _on_message(attempt)))
                    attempt.client = client
                    attempt.tools = await _list_tools(client)
                    attempt.ready.set()
                    async with trio.open_nursery() as watch:
                        watch.start_soon(_watch_tool_list, client, attempt)
                        await attempt.closed.wait()
                        watch.cancel_scope.cancel()
        except Exception as exc:
            if not attempt.error:
                attempt.error = self._explain(exc, attempt)
        finally:
            attempt.end()
            attempt.ready.set()

    def _transport(self, errlog, stack: AsyncExitStack, secrets: Mapping[str, str]):
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        env, cfg = self.hub.env, self.config
        where = f"MCP server '{self.name}'"
        if cfg.url is not None:
            headers = {k: expand(v, env, f"{where}: headers.{k}", secrets) for k, v in cfg.headers.items()}
            # Our own HTTP client, closed by us: the SDK's default one leaves a pooled socket open at exit.
            http = create_mcp_http_client(headers=headers)
            stack.push_async_callback(http.aclose)
            return streamable_http_client(expand(cfg.url, env, f"{where}: url", secrets), http_client=http)
        argv = [expand(a, env, f"{where}: command", secrets) for a in cfg.argv()]
        params = StdioServerParameters(
            command=argv[0], args=argv[1:], cwd=expand(cfg.cwd, env, f"{where}: cwd", secrets) if cfg.cwd else None,
            env={k: expand(v, env, f"{where}: env.{k}", secrets) for k, v in cfg.env.items()})
        return stdio_client(params, errlog=errlog)

    def _explain(self, exc: BaseException, attempt: _Attempt) -> str:
        exc = _leaf(exc)
        if isinstance(exc, InputError):
            return str(exc).removeprefix(f"MCP server '{self.name}'").lstrip(": ")
        if isinstance(exc, ImportError) and exc.name and exc.name.split(".")[0] in ("mcp", "mcp_types"):
            return f"needs the `mcp` extra: {install_hint('mcp')}"
        if isinstance(exc, (FileNotFoundError, PermissionError, NotADirectoryError)) and self.config.url is None:
            return f"cannot start `{self.config.argv()[0]}`: {exc.strerror or exc}"
        if attempt.garbage is not None:
            return f"does not speak MCP on stdout{self._stdout_note(attempt)}"
        if _closed(exc):
            where = "exited before it was ready" if not attempt.ready.is_set() else "closed the connection"
            return where + self._stderr_note()
        name = type(exc).__name__
        if "httpx" in type(exc).__module__ or isinstance(exc, ConnectionError):
            return f"cannot be reached at {self.config.url}: {name}: {exc}"
        return f"failed: {name}: {exc}"

    @staticmethod
    def _stdout_note(attempt: _Attempt) -> str:
        if attempt.garbage is None:
            return ""
        return f"; it printed {attempt.garbage[:80]!r} on stdout, which is not MCP"

    def _stderr_note(self) -> str:
        line = last_line(self.log_path)
        return f"; its last stderr line: {line[:160]!r}" if line else ""

    # --- using ------------------------------------------------------------------------------

    async def tools(self) -> list[RemoteTool]:
        attempt = await self._ready()
        if attempt.stale:  # listed again on the next use after `notifications/tools/list_changed`
            attempt.stale = False
            attempt.tools = await _list_tools(attempt.client)
        return attempt.tools

    async def call(self, tool: str, args: dict[str, Any]):
        """The SDK's CallToolResult. A server that dies under the call raises ServerUnavailable;
        the next call starts it again."""
        from mcp.shared.exceptions import MCPError

        attempt = await self._ready()
        with trio.move_on_after(self.config.timeout) as timer:
            try:
                result = await attempt.client.call_tool(tool, args)
            except MCPError as exc:
                if exc.code != -32000 and not attempt.dead:  # -32000: the connection closed
                    raise CallFailed(f"MCP server '{self.name}' refused the call to {tool}: "
                                     f"{exc.error.message}") from None
                self._crashed(attempt)
            except Exception as exc:
                if not (_closed(exc) or "httpx" in type(_leaf(exc)).__module__):
                    raise
                self._crashed(attempt)
            else:
                self.failures = 0
                return result
        assert timer.cancelled_caught
        raise CallFailed(f"{tool} on MCP server '{self.name}' did not answer within "
                         f"{self.config.timeout:g} s (the server's `timeout`)")

    def _crashed(self, attempt: _Attempt) -> None:
        attempt.end()
        self.failures += 1
        self._retry_at = trio.current_time() + backoff(self.failures)
        self.last_error = (f"MCP server '{self.name}' stopped during the call{self._stderr_note()}; "
                           f"it is started again on the next call (log: {self.log_path})")
        log.info("mcp server died during a call", server=self.name)
        raise ServerUnavailable(self.last_error)


def default_log_dir() -> Path:
    """Where each server's stderr goes, one file per server: the XDG state folder."""
    return state_dir() / "mcp"


def backoff(failures: int) -> float:
    """Seconds before the next start: the first restart is immediate, then 1, 2, 4 ... up to a minute."""
    return 0.0 if failures <= 1 else min(MAX_BACKOFF, 2.0 ** (failures - 2))


class Hub:
    """Every MCP connection of this process, keyed by server name and configuration.
    `servers` are the ones every room may use (config.toml's); a team adds its own."""

    def __init__(self, nursery: trio.Nursery, log_dir: Path, env: Mapping[str, str],
                 servers: Mapping[str, ServerConfig]):
        self.nursery, self.log_dir, self.servers = nursery, log_dir, dict(servers)
        # ${ORCHESTRATOR_PYTHON}: the interpreter running us, for servers installed beside the orchestrator
        self.env = {"ORCHESTRATOR_PYTHON": sys.executable, **env}
        self._connections: dict[tuple[str, bytes], Connection] = {}

    def connection(self, name: str, config: ServerConfig) -> Connection:
        key = (name, msgspec.json.encode(config))
        if key not in self._connections:
            self._connections[key] = Connection(self, name, config)
        return self._connections[key]

    @staticmethod
    def client(transport, on_message):
        from mcp import Client
        return Client(transport, message_handler=on_message)


@asynccontextmanager
async def open_hub(log_dir: Path, env: Mapping[str, str] | None = None,
                   servers: Mapping[str, ServerConfig] | None = None) -> AsyncIterator[Hub]:
    """The app-lifetime home of the owners; leaving it stops every server (a stubborn one takes ~4 s)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    sdk = logging.getLogger("mcp")
    # One router however many hubs are open (a scenario run inside a chat): records find their server
    # through the context, not through the hub.
    handler = next((h for h in sdk.handlers if isinstance(h, _SdkLogs)), None)
    added, propagate = handler is None, sdk.propagate
    if handler is None:
        handler = _SdkLogs()
        sdk.addHandler(handler)
        sdk.propagate = False
    try:
        async with trio.open_nursery() as nursery:
            hub = Hub(nursery, log_dir, os.environ if env is None else env, servers or {})
            try:
                yield hub
            finally:
                nursery.cancel_scope.cancel()
    finally:
        if added:
            sdk.removeHandler(handler)
            sdk.propagate = propagate


# --- watching the stdout stream and the SDK's own logging ---------------------------------------

class _Watched:
    """The transport's read stream, noting a non-JSON line and the end of the stream."""

    def __init__(self, inner, attempt: _Attempt):
        self._inner, self._attempt = inner, attempt

    async def receive(self):
        import anyio
        try:
            item = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._attempt.end()
            raise
        if isinstance(item, Exception) and self._attempt.garbage is None:
            errors = getattr(item, "errors", None)
            found = errors()[0].get("input") if callable(errors) and errors() else None
            self._attempt.garbage = found if isinstance(found, str) else str(item).splitlines()[0]
        return item

    def __aiter__(self):
        return self

    async def __anext__(self):
        import anyio
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    def __getattr__(self, name):
        return getattr(self._inner, name)


async def _watch_tool_list(client, attempt: _Attempt) -> None:
    """Protocol 2026-07-28 announces a changed tool list only to a `subscriptions/listen` stream
    (older servers send `notifications/tools/list_changed`, seen by `_on_message`)."""
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    tools = client.server_capabilities.tools
    if client.protocol_version not in MODERN_PROTOCOL_VERSIONS or not (tools and tools.list_changed):
        return
    try:
        async with client.listen(tools_list_changed=True) as changes:
            async for _ in changes:
                attempt.stale = True
    except Exception as exc:  # without the stream the list is read once per start, as before
        attempt.errlog.write(f"[orchestrator] no tool-list updates from this server: {type(exc).__name__}: {exc}\n")


def _on_message(attempt: _Attempt):
    from mcp_types import ToolListChangedNotification

    async def on_message(message) -> None:
        if isinstance(message, ToolListChangedNotification):
            attempt.stale = True

    return on_message


@asynccontextmanager
async def _watched(transport, attempt: _Attempt):
    async with transport as (read, write):
        yield _Watched(read, attempt), write


class _SdkLogs(logging.Handler):
    """The SDK logs through `logging` (a bad stdout line comes with a traceback): each record goes,
    as one line, to the log file of the server whose task wrote it, never onto the user's terminal."""

    def emit(self, record: logging.LogRecord) -> None:
        attempt = _serving.get()
        line = record.getMessage().splitlines()[0] if record.getMessage() else ""
        if record.exc_info and record.exc_info[1] is not None:
            line += f": {type(record.exc_info[1]).__name__}"
        if attempt is not None and attempt.errlog is not None and not attempt.errlog.closed:
            attempt.errlog.write(f"[orchestrator: mcp sdk {record.levelname.lower()}] {line}\n")
        else:
            log.debug("mcp sdk", level=record.levelname, message=line)


async def _list_tools(client) -> list[RemoteTool]:
    out: list[RemoteTool] = []
    cursor = None
    for _ in range(_MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        for t in page.tools:
            notes = t.annotations.model_dump(exclude_none=True, by_alias=True) if t.annotations else {}
            out.append(RemoteTool(t.name, t.description or "", dict(t.input_schema),
                                  bool(notes.get("readOnlyHint")), notes))
        cursor = page.next_cursor
        if not cursor:
            break
    return out


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside nested exception groups (the SDK's task groups wrap them)."""
    while isinstance(exc, BaseExceptionGroup):
        inner = [e for e in exc.exceptions if not isinstance(e, trio.Cancelled)]
        exc = (inner or exc.exceptions)[0]
    return exc


def _closed(exc: BaseException) -> bool:
    import anyio
    from mcp.shared.exceptions import MCPError

    exc = _leaf(exc)
    return (isinstance(exc, MCPError) and exc.code == -32000) or isinstance(
        exc, (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, BrokenPipeError))


def last_line(path: Path) -> str:
    """The last line the server wrote to its log (a small tail read: the file is ours and local)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))
            lines = [ln for ln in f.read().decode("utf-8", "replace").splitlines()
                     if ln.strip() and not ln.startswith(("--- ", "[orchestrator"))]
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""

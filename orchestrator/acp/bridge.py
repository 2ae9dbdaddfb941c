"""The reverse bridge: a unix socket in a private folder through which an external agent's MCP client (the
`orchestrator bridge` relay it starts) reaches what the room offers it (offer.py), and the grants that admit it.

Each grant is a one-time credential for one ACP session: a connection presents it as its first line, from a
process of this user (the kernel says so, SO_PEERCRED), or is refused and closed. Revoking a grant, or closing the
bridge, forgets the credential and ends its open connections. No network port is ever opened.
"""
from __future__ import annotations

import os
import secrets
import shutil
import socket
import stat
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import trio

from orchestrator.acp.mcpserve import ToolServer
from orchestrator.acp.offer import BridgeServices, HandBack, offered
from orchestrator.acp.relay import AUTH_SECONDS, TOKEN_ENV, peer_uid
from orchestrator.core.log import logger
from orchestrator.mcplink.config import ServerConfig
from orchestrator.mcplink.servers import Connection, Hub
from orchestrator.memory.knowledge import KnowledgeBase
from orchestrator.skills.library import Library
from orchestrator.skills.skill import Skill
from orchestrator.team.schema import AgentDef, Team
from orchestrator.tools.session import ToolSession

__all__ = ["AUTH_SECONDS", "TOKEN_ENV", "Bridge", "BridgeServices", "Grant", "RoomBridgeServices"]

log = logger(__name__)

SERVER_NAME = "orchestrator"  # the name the external agent knows the bridge's MCP server by
MAX_TOKEN_LINE = 256
_SOCKET = "bridge.sock"
_MAX_SOCKET_PATH = 107  # sun_path holds 108 bytes, the last a NUL


@dataclass(eq=False)
class Grant:
    """One ACP session's admission: `server` is the mcpServers entry to pass in session/new."""

    agent: str
    token: str
    server: dict[str, Any]
    hand_back: HandBack | None
    _bridge: Bridge
    _open: set[trio.CancelScope] = field(default_factory=set)
    revoked: bool = False

    def revoke(self) -> None:
        """Forget the credential and end every connection made with it; the relay then exits."""
        if self.revoked:
            return
        self.revoked = True
        self._bridge._grants.discard(self)
        for scope in self._open:
            scope.cancel()


class Bridge:
    """One room's bridge. Open it with `Bridge.open(services)`; grant one admission per ACP session."""

    def __init__(self, services: BridgeServices, folder: Path, nursery: trio.Nursery):
        self.services, self.folder, self._nursery = services, folder, nursery
        self.socket_path = folder / _SOCKET
        self._grants: set[Grant] = set()

    @classmethod
    @asynccontextmanager
    async def open(cls, services: BridgeServices) -> AsyncIterator[Bridge]:
        """The private folder (mode 0700) and its listening socket, served until the block ends; then every
        grant is revoked and the folder removed."""
        folder = await trio.to_thread.run_sync(runtime_folder)
        bridge = None
        try:
            listener = await _listen(folder / _SOCKET)
            async with trio.open_nursery() as nursery:
                bridge = cls(services, folder, nursery)
                nursery.start_soon(bridge._accept, listener)
                try:
                    yield bridge
                finally:
                    for grant in list(bridge._grants):
                        grant.revoke()
                    nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(shutil.rmtree, folder, True)

    def grant(self, agent: str, *, hand_back: HandBack | None = None) -> Grant:
        """A fresh credential for `agent`'s session; `hand_back` (for a member holding the floor) adds the
        hand_back tool, which calls it."""
        token = secrets.token_urlsafe(32)
        server = {"name": SERVER_NAME, "command": sys.executable,
                  "args": ["-m", "orchestrator", "bridge", str(self.socket_path)],
                  "env": [{"name": TOKEN_ENV, "value": token}]}
        made = Grant(agent, token, server, hand_back, self)
        self._grants.add(made)
        return made

    async def _accept(self, listener: trio.SocketListener) -> None:
        async with listener:
            while True:
                try:
                    stream = await listener.accept()
                except OSError as exc:  # out of descriptors, say: the next connection may fare better
                    log.warning("bridge accept failed", error=str(exc))
                    await trio.sleep(0.1)
                    continue
                self._nursery.start_soon(self._connection, stream)

    async def _connection(self, stream: trio.SocketStream) -> None:
        try:
            async with stream:
                grant = await self._admit(stream)
                if grant is None:
                    return
                with trio.CancelScope() as scope:
                    grant._open.add(scope)
                    try:
                        if grant.revoked:  # revoked while it was admitted
                            return
                        server = ToolServer(grant.agent, self.services.session,
                                            lambda: offered(self.services, grant.hand_back))
                        why = await server.serve(stream)
                        log.info("bridge connection ended", agent=grant.agent, why=why)
                    finally:
                        grant._open.discard(scope)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            log.info("bridge connection broke", error=str(exc))

    async def _admit(self, stream: trio.SocketStream) -> Grant | None:
        """The grant whose credential the connection's first line holds, told "ok"; else None, told why."""
        uid = peer_uid(stream)
        if uid != os.getuid():
            log.warning("bridge connection from another user refused", uid=uid)
            await _say(stream, "refused: the connection is not from this user")
            return None
        line = b""
        with trio.move_on_after(AUTH_SECONDS):  # one that says nothing is not kept waiting
            while b"\n" not in line and len(line) <= MAX_TOKEN_LINE:
                chunk = await stream.receive_some(MAX_TOKEN_LINE + 1 - len(line))
                if not chunk:
                    break
                line += chunk
        token, newline, rest = line.partition(b"\n")
        if not newline or rest:  # the relay waits for "ok" before it sends anything else
            await _say(stream, "refused: the first line must be the credential alone")
            return None
        presented = token.strip()  # bytes: whatever the other side sent, compared in constant time
        grant = next((g for g in list(self._grants) if secrets.compare_digest(g.token.encode(), presented)), None)
        if grant is None:
            log.warning("bridge connection with an unknown or revoked credential refused")
            await _say(stream, "refused: the credential is unknown or was revoked (each is valid for one session)")
            return None
        await _say(stream, "ok")
        return grant


async def _say(stream: trio.SocketStream, line: str) -> None:
    with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        await stream.send_all(line.encode() + b"\n")


async def _listen(path: Path) -> trio.SocketListener:
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        await sock.bind(str(path))
        sock.listen(64)
    except BaseException:
        sock.close()
        raise
    return trio.SocketListener(sock)


def runtime_folder() -> Path:
    """A fresh folder only this user may enter: under $XDG_RUNTIME_DIR when it is this user's alone (it is
    private to the login and emptied at logout), else the temporary folder; the socket's path must stay short."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base and _safe(Path(base)):
        made = Path(tempfile.mkdtemp(prefix="orchestrator-bridge-", dir=base))
        if len(str(made / _SOCKET)) <= _MAX_SOCKET_PATH:
            return made
        made.rmdir()
    return Path(tempfile.mkdtemp(prefix="orchestrator-bridge-"))  # mkdtemp makes it mode 0700


def _safe(folder: Path) -> bool:
    try:
        st = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


class MemberSkills(Protocol):
    """What the bridge reads of a room's skills (room/skills.py's RoomSkills, which lies above this layer)."""

    team: Team
    library: Library
    granted: dict[str, set[str]]

    def usable(self, spec: AgentDef, commander: bool) -> dict[str, Skill]: ...


class RoomBridgeServices:
    """BridgeServices from a room's parts: its skills (the member's own `skills` setting applies; the untrusted
    tier is the commander's only, as in the room), its MCP hub and servers, its knowledge base, its tool session."""

    def __init__(self, skills: MemberSkills, hub: Hub | None, servers: Mapping[str, ServerConfig],
                 knowledge: KnowledgeBase | None, session: ToolSession, *, commander: str = "commander"):
        self._skills, self._hub, self._servers = skills, hub, dict(servers)
        self._knowledge, self._session, self._commander = knowledge, session, commander

    @property
    def session(self) -> ToolSession:
        return self._session

    @property
    def knowledge(self) -> KnowledgeBase | None:
        return self._knowledge

    def skills(self, agent: str) -> Mapping[str, tuple[Skill, bool]]:
        team = self._skills.team
        commander = agent == self._commander
        spec = team.commander if commander else next((a for a in team.agents if a.name == agent), None)
        if spec is None:
            return {}
        library = self._skills.library
        usable = {n: s for n, s in self._skills.usable(spec, commander).items() if s.model_invocable}
        for name in self._skills.granted.get(agent, ()):  # what the user invoked for it stays usable
            if (skill := library.get(name)) is not None:
                usable[name] = skill
        return {n: (s, library.trusted(n)) for n, s in usable.items()}

    def connectors(self) -> Mapping[str, ServerConfig]:
        return self._servers

    def connection(self, server: str) -> Connection | None:
        if self._hub is None or server not in self._servers:
            return None
        return self._hub.connection(server, self._servers[server])

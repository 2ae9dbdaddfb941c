"""The other worker processes of one `orchestrator serve --workers N`, and the private socket each listens on so
that what only the worker running a room can answer (its agents' view, whether it is busy, its every event) is
asked of that worker, whichever worker the browser's connection landed on.

Each worker listens on `FOLDER/PID.sock`, a Unix socket (never a TCP port: nothing on the network, another user
or another server on this machine can reach it or take its place) in a folder the supervisor made for this one
server (mode 0700; each worker refuses a folder that is not this user's alone). What comes through it is served
by the same app behind the same guard as the shared port, so it grants nothing without the token. A worker
passes on only a GET that already carried the token, as the browser sent it, and sends it only to the process
the room's lease names: the kernel (SO_PEERCRED) must say the socket's other end is that very pid, run by this
user. The agents' commands never see the folder (their jail has a /tmp of its own and no /run), and the token
still never touches a disk, an environment or a command line.
"""
from __future__ import annotations

import os
import socket
import stat
import struct
from contextlib import suppress
from pathlib import Path
from typing import Any

import msgspec
import trio
from starlette.requests import Request
from starlette.responses import Response

from orchestrator.core.errors import InputError
from orchestrator.core.log import logger
from orchestrator.web.host import Host, RoomSummary
from orchestrator.web.relay import Errors, ask, passed_on

log = logger(__name__)

PEER = "orchestrator.peer"  # in a request's ASGI scope: it came from another worker, through the private socket
ASK_SECONDS = 30.0  # for another worker's answer to begin (a whole answer, but for an event stream)
LIST_SECONDS = 5.0  # for another worker's rooms, in the room list: past it, they are listed from the store
_CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid


class Peers:
    """This worker among its siblings: `me` is its name in the leases (`hostname:pid`)."""

    def __init__(self, folder: Path, me: str):
        self.folder, self.me = folder, me
        self._machine = me.rpartition(":")[0]

    @classmethod
    def joined(cls, folder: Path, me: str) -> Peers:
        """The siblings of the folder the supervisor made; InputError unless it is a folder of this user's
        that nobody else may enter (a worker would otherwise hand the token to whoever made the socket)."""
        try:
            st = os.lstat(folder)
        except OSError as exc:
            raise InputError(f"--peers {folder}: {exc.strerror}") from None
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise InputError(f"--peers {folder}: not a folder of this user's that only this user may enter "
                             "(`orchestrator serve` makes it for its workers)")
        if not hasattr(socket, "SO_PEERCRED"):
            raise InputError("--peers needs a system that names a Unix socket's peer (SO_PEERCRED): Linux")
        return cls(folder, me)

    def listen(self) -> socket.socket:
        """This worker's private socket, listening (connections wait in its backlog until the server runs)."""
        path = self._path(os.getpid())
        with suppress(FileNotFoundError):
            path.unlink()  # a socket left by a killed process of the same pid
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(str(path))
            path.chmod(0o600)
            sock.listen(128)
        except OSError:
            sock.close()
            raise
        return sock

    def close(self) -> None:
        with suppress(FileNotFoundError):
            self._path(os.getpid()).unlink()

    def private(self, app: Any) -> Any:
        """`app` as served on the private socket: each request marked as another worker's, which this worker
        answers itself and never passes on again."""
        async def marked(scope: dict, receive: Any, send: Any) -> None:
            await app({**scope, PEER: True}, receive, send)

        return marked

    def sibling(self, holder: str | None) -> int | None:
        """The pid of the worker of this server that `holder` (a lease's host) names; None for this worker, a
        host on another machine or a name no worker gives."""
        if not holder or holder == self.me:
            return None
        machine, _, pid = holder.rpartition(":")
        return int(pid) if machine == self._machine and pid.isdigit() else None

    async def forward(self, request: Request, host: Host, ref: str) -> Response | None:
        """The answer of the worker that runs room `ref`, for `request` (a GET); None when this worker should
        answer: it runs the room, nobody does, or the one that does cannot be reached (it died, and its rooms
        move once its lease runs out)."""
        here = host.leased.rooms.rooms
        if request.method != "GET" or ref in here:  # by its id, as pages name it: no store read for a room here
            return None
        record = await host.store.room(ref)
        if record is None or record.id in here:
            return None
        if (pid := self.sibling(await host.holder(record.id))) is None:
            return None
        stream = None
        with trio.move_on_after(ASK_SECONDS):
            if (stream := await self._connect(pid)) is None:
                return None
            try:
                return await passed_on(await ask(stream, request), pid)
            except Errors as exc:
                log.info("worker did not answer", worker=pid, room=record.id, error=repr(exc))
        if stream is not None:
            await stream.aclose()
        return None

    async def listed(self, request: Request, host: Host, summaries: list[RoomSummary]) -> list[RoomSummary]:
        """The room list with each room another worker runs as that worker lists it (busy, running tasks,
        floor), asked of each such worker at once; a worker that does not answer leaves its rooms as the store
        has them."""
        here = {s.id for s in summaries if s.open}
        pids = {pid for lease in await host.store.leases()
                if lease.room not in here and lease.expires > 0 and (pid := self.sibling(lease.host)) is not None}
        theirs: dict[str, RoomSummary] = {}

        async def one(pid: int) -> None:
            stream = None
            with trio.move_on_after(LIST_SECONDS):
                if (stream := await self._connect(pid)) is None:
                    return
                try:
                    answer = await ask(stream, request, b"/rooms")
                    if answer.status == 200:
                        for s in msgspec.json.decode(await answer.body(), type=list[RoomSummary]):
                            if s.open and s.id not in here:
                                theirs[s.id] = s
                except (*Errors, msgspec.DecodeError, msgspec.ValidationError) as exc:
                    log.info("worker did not list its rooms", worker=pid, error=repr(exc))
            if stream is not None:
                await stream.aclose()  # closed already when its answer was read whole

        async with trio.open_nursery() as nursery:
            for pid in pids:
                nursery.start_soon(one, pid)
        return [theirs.get(s.id, s) for s in summaries]

    async def _connect(self, pid: int) -> trio.SocketStream | None:
        """A connection to worker `pid`'s socket, once the kernel says that pid of this user listens there."""
        try:
            stream = await trio.open_unix_socket(str(self._path(pid)))
        except OSError:
            return None  # gone (its socket removed), or dead (nobody listens on it)
        try:
            peer, uid, _ = _CREDENTIALS.unpack(stream.socket.getsockopt(
                socket.SOL_SOCKET, socket.SO_PEERCRED, _CREDENTIALS.size))
        except OSError:
            peer = uid = -1
        if peer != pid or uid != os.getuid():
            log.warning("a socket of the workers' folder is not its worker's", worker=pid, peer=peer, uid=uid)
            await stream.aclose()
            return None
        return stream

    def _path(self, pid: int) -> Path:
        return self.folder / f"{pid}.sock"

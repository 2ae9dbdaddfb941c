"""The external agent's end of the reverse bridge: `orchestrator bridge SOCKET` connects to the room's socket,
presents the credential from its environment, then copies bytes both ways between its stdio and the socket.

It holds no MCP logic and imports nothing of the room, so that an agent starting it per session waits little.
"""
from __future__ import annotations

import os
import socket
import struct
import sys
from collections.abc import Awaitable, Callable

import trio

TOKEN_ENV = "ORCHESTRATOR_BRIDGE_TOKEN"  # never an argument: other users can read a process's command line
AUTH_SECONDS = 10.0  # for the room's answer to the credential
_CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid
_CHUNK = 65536


class Refused(Exception):
    """The relay could not be admitted: one line saying why, for the agent's log of its MCP server."""


async def relay(path: str, token: str | None) -> int:
    """Admit, then relay until either side ends; 1 with one line on stderr when not admitted."""
    try:
        stream = await admitted(path, token)
    except Refused as exc:
        print(f"orchestrator bridge: {exc}", file=sys.stderr, flush=True)
        return 1
    async with stream:
        await pump(stream, trio.lowlevel.FdStream(os.dup(0)), trio.lowlevel.FdStream(os.dup(1)))
    return 0


async def admitted(path: str, token: str | None) -> trio.SocketStream:
    if not token:
        raise Refused(f"{TOKEN_ENV} is not set: the external agent starts this command with the credential "
                      "the room granted it")
    try:
        stream = await trio.open_unix_socket(path)
    except OSError as exc:
        raise Refused(f"cannot reach the room's bridge at {path}: {exc.strerror or exc} (the room or the session "
                      "has ended)") from None
    try:
        if peer_uid(stream) != os.getuid():  # the credential goes only to a room of this user's
            raise Refused(f"{path} is not served by this user's room; the credential was not sent")
        await stream.send_all(token.encode() + b"\n")
        answer = b""
        with trio.move_on_after(AUTH_SECONDS):
            while b"\n" not in answer and len(answer) < 512:
                chunk = await stream.receive_some(512)
                if not chunk:
                    break
                answer += chunk
        said = answer.partition(b"\n")[0].decode(errors="replace").strip()
        if said != "ok":
            raise Refused(f"the room's bridge {said or 'did not answer the credential'}")
    except BaseException:
        await stream.aclose()
        raise
    return stream


async def pump(stream: trio.SocketStream, stdin: trio.lowlevel.FdStream, stdout: trio.lowlevel.FdStream) -> None:
    """stdin to the socket and the socket to stdout. The end of stdin is passed on (the room then ends its
    side); the end of the socket, or stdout gone, ends both."""
    async with stdin, stdout, trio.open_nursery() as nursery:
        async def upward() -> None:
            while chunk := await stdin.receive_some(_CHUNK):
                await stream.send_all(chunk)
            await stream.send_eof()

        async def downward() -> None:
            try:
                while chunk := await stream.receive_some(_CHUNK):
                    await stdout.send_all(chunk)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            nursery.cancel_scope.cancel()

        async def guarded(fn: Callable[[], Awaitable[None]]) -> None:
            try:
                await fn()
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                nursery.cancel_scope.cancel()

        nursery.start_soon(guarded, upward)
        nursery.start_soon(guarded, downward)


def peer_uid(stream: trio.SocketStream) -> int:
    """The uid of the process at the socket's other end, as the kernel tells it (-1 when it cannot)."""
    try:
        _, uid, _ = _CREDENTIALS.unpack(stream.socket.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                                 _CREDENTIALS.size))
    except OSError:
        return -1
    return int(uid)

"""One request passed on to another worker of this server over its private socket (web/peers.py), and that
worker's answer passed back as it arrives: HTTP/1.1 (h11, which hypercorn itself is built on), one connection
per request, so an event stream is piped through byte for byte for as long as the browser reads it.

The request goes as the browser sent it (its path, its Host, Origin, Sec-Fetch-* and Authorization), so the
worker answering checks it exactly as it checks its own: nothing is added to it that it did not carry.
"""
from __future__ import annotations

from collections.abc import AsyncIterator

import h11
import trio
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

RECEIVE = 64 * 1024
MAX_BODY = 64 * 1024 * 1024  # a whole answer held before it is passed on (an agent view of a long room is MBs)
# Framing belongs to each connection, not to the request or the answer; and what the answering server stamps
# on its own answers (its date, its name, its pid) the passing worker stamps again.
HOP = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer", b"transfer-encoding",
                 b"upgrade", b"content-length"})
RESTAMPED = HOP | {b"date", b"server", b"x-orchestrator-worker"}
# The worker that answered, when another passed its answer on (a script or a test can tell who ran the room).
ROOM_WORKER = b"x-orchestrator-room-worker"

Errors = (OSError, trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError)


class Answer:
    """The answer's status and headers, read; its body to read, once, then the connection is closed."""

    def __init__(self, stream: trio.SocketStream, conn: h11.Connection, head: h11.Response):
        self._stream, self._conn = stream, conn
        self.status = head.status_code
        self.headers: list[tuple[bytes, bytes]] = list(head.headers)

    def header(self, name: bytes) -> bytes:
        return next((v for k, v in self.headers if k == name), b"")

    async def body(self) -> bytes:
        """The whole body (an error past MAX_BODY), the connection closed after it."""
        chunks, size = [], 0
        async for chunk in self.chunks(strict=True):
            size += len(chunk)
            if size > MAX_BODY:
                raise h11.RemoteProtocolError(f"an answer over {MAX_BODY} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    async def chunks(self, *, strict: bool = False) -> AsyncIterator[bytes]:
        """The body as it arrives. A connection that breaks first ends it (`strict`: raises): an event stream
        cut so ends for the browser, which resumes by Last-Event-ID."""
        try:
            while True:
                event = await _next(self._conn, self._stream)
                if isinstance(event, h11.Data):
                    yield bytes(event.data)
                elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                    return
        except Errors:
            if strict:
                raise
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        await self._stream.aclose()


async def ask(stream: trio.SocketStream, request: Request, target: bytes | None = None) -> Answer:
    """Send `request` (a GET, bodiless) down `stream` for `target` (default: its own path and query), and read
    the answer's head. Raises one of `Errors` when the other end does not answer with HTTP."""
    conn = h11.Connection(h11.CLIENT)
    if target is None:
        path = request.scope.get("raw_path") or request.url.path.encode()
        query = request.scope.get("query_string", b"")
        target = path + (b"?" + query if query else b"")
    headers = [(k, v) for k, v in request.headers.raw if k.lower() not in HOP] + [(b"connection", b"close")]
    sent = conn.send(h11.Request(method=request.method, target=target, headers=headers)) or b""
    await stream.send_all(sent + (conn.send(h11.EndOfMessage()) or b""))
    while True:
        event = await _next(conn, stream)
        if isinstance(event, h11.Response):
            return Answer(stream, conn, event)
        if not isinstance(event, h11.InformationalResponse):
            raise h11.RemoteProtocolError(f"no answer, but {type(event).__name__}")


async def passed_on(answer: Answer, worker: int) -> Response:
    """The answer as this worker's own: an event stream piped through as it comes, anything else read whole."""
    headers = [(k, v) for k, v in answer.headers if k not in RESTAMPED] + [(ROOM_WORKER, str(worker).encode())]
    if answer.header(b"content-type").startswith(b"text/event-stream"):
        streamed = StreamingResponse(answer.chunks(), answer.status)
        streamed.raw_headers = headers
        return streamed
    body = await answer.body()
    whole = Response(body, answer.status)
    whole.raw_headers = [*headers, (b"content-length", str(len(body)).encode())]
    return whole


async def _next(conn: h11.Connection, stream: trio.SocketStream) -> object:
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await stream.receive_some(RECEIVE))
            continue
        return event

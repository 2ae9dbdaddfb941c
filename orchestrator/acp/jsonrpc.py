"""JSON-RPC 2.0 between two peers over a byte stream, one JSON object per line, on trio: what ACP (an
agent's stdio) and the reverse bridge's MCP (a unix socket) both speak.

Either side may ask: a `Peer` sends requests and notifications and answers the other side's. The other side
is an external program, so nothing it sends is trusted: a line over the size limit ends the connection,
malformed lines are answered with the protocol's error, and a reply to no pending request is dropped.
"""
from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import msgspec
import trio

from orchestrator.core.errors import OrchestratorError

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603
# A line carries a whole file for fs/write_text_file; beyond this the peer is flooding, not talking.
MAX_LINE = 32 * 1024 * 1024

OnRequest = Callable[[str, Any], Awaitable[Any]]
OnNotify = Callable[[str, Any], Awaitable[None]]

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


class RpcError(OrchestratorError):
    """An error answer: raised by a handler to answer with it, and by `request` when the other side did."""

    def __init__(self, code: int, message: str, data: Any = None):
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


class Closed(OrchestratorError):
    """The connection ended (the other side exited or closed it) before the answer came."""


async def _no_requests(method: str, params: Any) -> Any:
    raise RpcError(METHOD_NOT_FOUND, f"method not found: {method}")


async def _no_notifications(method: str, params: Any) -> None:
    return None


class Peer:
    """One side of a connection. `serve` reads until the other side closes; run it in a nursery before the first
    `request`. Requests from the other side are answered concurrently (one may wait on the user while updates
    keep streaming); notifications are handled one at a time in arrival order, so a stream of them stays ordered."""

    def __init__(self, send: trio.abc.SendStream, receive: trio.abc.ReceiveStream, *,
                 on_request: OnRequest = _no_requests, on_notify: OnNotify = _no_notifications,
                 max_line: int = MAX_LINE):
        self._send, self._receive = send, receive
        self._on_request, self._on_notify = on_request, on_notify
        self._max_line = max_line
        self._write = trio.Lock()
        self._next_id = 0
        self._pending: dict[int, trio.MemorySendChannel[Any]] = {}
        self.closed = trio.Event()
        self.why_closed = ""

    async def request(self, method: str, params: Any = None, *, timeout: float = math.inf) -> Any:
        """Ask and wait for the answer: its `result`, or RpcError with the error it gave, or Closed."""
        if self.closed.is_set():
            raise Closed(self.why_closed or "the connection is closed")
        self._next_id += 1
        ident = self._next_id
        send, receive = trio.open_memory_channel[Any](1)
        self._pending[ident] = send
        try:
            await self._put({"jsonrpc": "2.0", "id": ident, "method": method,
                             **({"params": params} if params is not None else {})})
            with trio.fail_after(timeout):
                try:
                    answer = await receive.receive()
                except trio.EndOfChannel:
                    raise Closed(self.why_closed or "the connection closed before the answer") from None
        finally:
            self._pending.pop(ident, None)
        if "error" in answer:
            err = answer["error"] if isinstance(answer["error"], dict) else {}
            raise RpcError(int(err.get("code", INTERNAL_ERROR)), str(err.get("message", "error")), err.get("data"))
        return answer.get("result")

    async def notify(self, method: str, params: Any = None) -> None:
        await self._put({"jsonrpc": "2.0", "method": method, **({"params": params} if params is not None else {})})

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Read and dispatch until the other side closes or breaks the protocol; then every pending request
        fails with Closed."""
        try:
            async with trio.open_nursery() as nursery:
                task_status.started()
                async for line in self._lines():
                    await self._dispatch(line, nursery)
                nursery.cancel_scope.cancel()  # the other side is gone: nobody reads what handlers would answer
        finally:
            self._close(self.why_closed or "the other side closed the connection")

    async def aclose(self) -> None:
        self._close("closed by us")
        with trio.CancelScope(shield=True):
            await self._send.aclose()

    def _close(self, why: str) -> None:
        if not self.closed.is_set():
            self.why_closed = why
            self.closed.set()
        for channel in self._pending.values():
            channel.close()
        self._pending.clear()

    async def _put(self, message: dict[str, Any]) -> None:
        data = _encode(message) + b"\n"
        async with self._write:
            try:
                await self._send.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                self._close("the other side stopped reading")
                raise Closed(self.why_closed) from exc

    async def _lines(self) -> AsyncIterator[bytes]:
        buffer = bytearray()
        while True:
            try:
                chunk = await self._receive.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            if not chunk:
                if buffer.strip():
                    yield bytes(buffer)
                return
            buffer += chunk
            while (end := buffer.find(b"\n")) >= 0:
                line = bytes(buffer[:end])
                del buffer[:end + 1]
                if line.strip():
                    yield line
            if len(buffer) > self._max_line:
                self.why_closed = f"the other side sent a line over {self._max_line} bytes"
                return

    async def _dispatch(self, line: bytes, nursery: trio.Nursery) -> None:
        try:
            message = _decode(line)
        except msgspec.DecodeError:
            await self._answer(None, error=RpcError(PARSE_ERROR, "parse error"))
            return
        if not isinstance(message, dict):
            await self._answer(None, error=RpcError(INVALID_REQUEST, "invalid request"))
            return
        method = message.get("method")
        if isinstance(method, str):
            if "id" in message:
                nursery.start_soon(self._serve_request, message["id"], method, message.get("params"))
            else:
                try:
                    await self._on_notify(method, message.get("params"))
                except RpcError:
                    pass  # a notification has no one to answer
        elif "id" in message and ("result" in message or "error" in message):
            channel = self._pending.get(message["id"]) if isinstance(message["id"], int) else None
            if channel is not None:
                try:
                    channel.send_nowait(message)
                except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
                    pass  # a second answer to one request: the first one counts
        else:
            await self._answer(message.get("id"), error=RpcError(INVALID_REQUEST, "invalid request"))

    async def _serve_request(self, ident: Any, method: str, params: Any) -> None:
        try:
            result = await self._on_request(method, params)
        except RpcError as exc:
            await self._answer(ident, error=exc)
        except OrchestratorError as exc:
            await self._answer(ident, error=RpcError(INTERNAL_ERROR, str(exc)))
        else:
            await self._answer(ident, result=result)

    async def _answer(self, ident: Any, *, result: Any = None, error: RpcError | None = None) -> None:
        if error is None:
            message: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "result": result}
        else:
            body: dict[str, Any] = {"code": error.code, "message": error.message}
            if error.data is not None:
                body["data"] = error.data
            message = {"jsonrpc": "2.0", "id": ident, "error": body}
        try:
            await self._put(message)
        except Closed:
            pass  # the asker is gone; its answer has nowhere to go

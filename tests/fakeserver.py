"""A loopback HTTP server for provider tests: real sockets, real chunked SSE, scripted faults.

Each queued Reply is served to the next request: a status, headers, body chunks written one by
one, and faults (stall, drop mid-stream, reset before the first byte). Requests are recorded.
"""
from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    status: int = 200
    chunks: list[bytes] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "text/event-stream"
    stall: float = 0.0  # seconds of silence before the chunk at `stall_at`
    stall_at: int = 0
    drop_after: int | None = None  # close the socket after this many chunks, without the final 0-chunk
    reset: bool = False  # RST before sending anything


def sse(*events: dict | str, event_names: bool = False, done: bool = False) -> list[bytes]:
    """Chunks for an SSE stream: dicts become `data: {json}` (with `event: type` if asked)."""
    out = []
    for ev in events:
        if isinstance(ev, str):
            out.append(ev.encode())
            continue
        head = f"event: {ev['type']}\n" if event_names else ""
        out.append(f"{head}data: {json.dumps(ev)}\n\n".encode())
    if done:
        out.append(b"data: [DONE]\n\n")
    return out


def json_body(status: int, body: dict, headers: dict[str, str] | None = None) -> Reply:
    return Reply(status=status, chunks=[json.dumps(body).encode()], headers=headers or {},
                 content_type="application/json")


class _Reset(Exception):
    """Unwinds the handler after a deliberate connection reset."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        pass  # resets and drops are the point of this server


class FakeServer:
    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                server.requests.append({"path": self.path, "headers": dict(self.headers),
                                        "json": json.loads(body) if body else None})
                reply = server.replies.popleft() if server.replies else Reply(status=500, chunks=[b"no reply queued"])
                if reply.reset:
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.close_connection = True
                    self.connection.close()  # with linger 0 the kernel answers with RST, not FIN
                    self.connection = self.rfile = None
                    raise _Reset

                self.send_response(reply.status)
                self.send_header("content-type", reply.content_type)
                self.send_header("transfer-encoding", "chunked")
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    for i, chunk in enumerate(reply.chunks):
                        if reply.drop_after is not None and i >= reply.drop_after:
                            self.wfile.flush()
                            self.close_connection = True
                            return
                        if reply.stall and i == reply.stall_at:
                            time.sleep(reply.stall)
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                    if reply.drop_after is not None and reply.drop_after >= len(reply.chunks):
                        self.close_connection = True
                        return
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            do_GET = do_POST  # GET (validate_auth's /models) is answered from the same queue

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

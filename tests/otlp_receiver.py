"""A minimal OTLP/HTTP trace receiver on 127.0.0.1 for tests: keeps each decoded ExportTraceServiceRequest."""
from __future__ import annotations

import gzip

import h11
import trio


class Receiver:
    def __init__(self) -> None:
        self.requests: list = []  # ExportTraceServiceRequest messages, in arrival order
        self.paths: list[str] = []
        self.port = 0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def serve(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._handle, listeners)

    def spans(self) -> list:
        return [s for req in self.requests for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans]

    def resources(self) -> list[dict]:
        return [{kv.key: kv.value.string_value for kv in rs.resource.attributes}
                for req in self.requests for rs in req.resource_spans]

    async def _handle(self, stream: trio.SocketStream) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest, ExportTraceServiceResponse,
        )
        conn = h11.Connection(h11.SERVER)
        body, path, gz = b"", "", False
        async with stream:
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    data = await stream.receive_some(65536)
                    if not data:
                        return
                    conn.receive_data(data)
                elif isinstance(event, h11.Request):
                    path, body = event.target.decode(), b""
                    gz = (b"content-encoding", b"gzip") in [(k.lower(), v) for k, v in event.headers]
                elif isinstance(event, h11.Data):
                    body += event.data
                elif isinstance(event, h11.EndOfMessage):
                    self.paths.append(path)
                    self.requests.append(ExportTraceServiceRequest.FromString(gzip.decompress(body) if gz else body))
                    reply = ExportTraceServiceResponse().SerializeToString()
                    await stream.send_all(conn.send(h11.Response(status_code=200, headers=[
                        ("content-type", "application/x-protobuf"), ("content-length", str(len(reply)))])))
                    await stream.send_all(conn.send(h11.Data(data=reply)) + conn.send(h11.EndOfMessage()))
                    if conn.our_state is h11.MUST_CLOSE:
                        return
                    conn.start_next_cycle()
                elif isinstance(event, h11.ConnectionClosed):
                    return

"""Server-sent events: the `GET /v2/queues/{q}/events` stream of queue activity."""
from __future__ import annotations

import json
from typing import AsyncIterator, Awaitable, Callable

HEARTBEAT_SECONDS = 15  # proxies close idle connections; a comment line keeps them open


def format_event(event_id: int, kind: str, data: dict) -> bytes:
    return f"id: {event_id}\nevent: {kind}\ndata: {json.dumps(data)}\n\n".encode()


async def stream_events(
    next_event: Callable[[float], Awaitable[tuple[int, str, dict] | None]],
    last_event_id: str | None = None,
) -> AsyncIterator[bytes]:
    """Yield SSE frames forever.

    A client that reconnects sends the `Last-Event-ID` header; we resume after that id so no event
    is lost across the reconnect. When nothing happens for HEARTBEAT_SECONDS we send a `: ping`
    comment line.
    """
    cursor = int(last_event_id) if last_event_id and last_event_id.isdigit() else 0
    yield b"retry: 3000\n\n"  # tells the browser how long to wait before reconnecting
    while True:
        found = await next_event(HEARTBEAT_SECONDS)
        if found is None:
            yield b": ping\n\n"
            continue
        event_id, kind, data = found
        if event_id <= cursor:
            continue
        cursor = event_id
        yield format_event(event_id, kind, data)

"""Server-sent events framing, shared by every streaming vendor.

Hand-written rather than httpx-sse: the status is checked before parsing, comments are kept
visible for keep-alive accounting, and llama.cpp's non-standard `error:` field is surfaced.
"""
from __future__ import annotations

from typing import AsyncGenerator, AsyncIterator

from msgspec import Struct


class SSE(Struct, frozen=True):
    event: str  # "message" unless the server named it; "error" also for llama.cpp's `error:` field
    data: str


async def iter_sse(lines: AsyncIterator[str]) -> AsyncGenerator[SSE, None]:
    """Events from text lines (httpx's aiter_lines already splits on \\n, \\r\\n and \\r)."""
    event = ""
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield SSE(event or "message", "\n".join(data))
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
        elif name == "error":  # llama.cpp streams failures in a field a compliant parser would drop
            yield SSE("error", value)
    if data:
        yield SSE(event or "message", "\n".join(data))

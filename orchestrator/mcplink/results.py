"""What an MCP tool result becomes for the model: text, images, resource links and structured content
as one tool-result, and `isError` as an error result the model reads and can act on.
"""
from __future__ import annotations

import json
from typing import Any

from orchestrator.core.types import ImageBlock
from orchestrator.tools.base import ToolOutput

# Providers take these in tool results; anything else is described in words.
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


def to_output(result: Any) -> ToolOutput:
    """Map the SDK's CallToolResult (read by attribute, so any of its protocol versions will do)."""
    parts: list[str] = []
    images: list[ImageBlock] = []
    for item in result.content or []:
        kind = getattr(item, "type", "")
        if kind == "text":
            parts.append(item.text)
        elif kind == "image" and item.mime_type in IMAGE_TYPES:
            images.append(ImageBlock(item.mime_type, item.data))
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} {item.mime_type}, {len(item.data) * 3 // 4} bytes, not shown]")
        elif kind == "resource_link":
            parts.append(_link(item))
        elif kind == "resource":
            parts.append(_embedded(item.resource))
        else:
            parts.append(f"[{kind or 'unknown'} content, not shown]")
    structured = getattr(result, "structured_content", None)
    if structured is not None and not _said(structured, parts):
        parts.append(json.dumps(structured, ensure_ascii=False, indent=1))
    text = "\n".join(parts) or ("(the tool reported an error without a message)" if result.is_error else "(no output)")
    return ToolOutput(text, is_error=bool(result.is_error), images=images)


def _link(item: Any) -> str:
    bits = [item.uri]
    if getattr(item, "mime_type", None):
        bits.append(item.mime_type)
    if getattr(item, "description", None):
        bits.append(item.description)
    return f"[resource {item.name}: {', '.join(bits)}]"


def _embedded(resource: Any) -> str:
    text = getattr(resource, "text", None)
    if text is not None:
        return f"[resource {resource.uri}]\n{text}"
    blob = getattr(resource, "blob", "") or ""
    mime = getattr(resource, "mime_type", None) or "binary"
    return f"[resource {resource.uri}: {mime}, {len(blob) * 3 // 4} bytes, not shown]"


def _said(structured: Any, parts: list[str]) -> bool:
    """Servers are asked to repeat structured content as text; show it once.
    The SDK wraps a plain return value as {"result": value}, which the text already says."""
    if isinstance(structured, dict) and set(structured) == {"result"} and str(structured["result"]) in parts:
        return True
    for part in parts:
        try:
            if json.loads(part) == structured:
                return True
        except ValueError:
            continue
    return False

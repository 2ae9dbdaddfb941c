"""The data model: content blocks, messages and the provider stream, as msgspec Structs.

Everything that is stored, streamed or sent to a model is one of these types; the rest of the code reads them.
"""
from __future__ import annotations

from typing import Any, Literal, Union

import msgspec
from msgspec import Struct, field


# gc=False on the history's data (blocks, messages, their model views): plain values that never hold a
# reference back, so the cyclic collector need not walk them; a host keeps hundreds of thousands.
class TextBlock(Struct, tag="text", frozen=True, gc=False):
    text: str


class ThinkingBlock(Struct, tag="thinking", frozen=True, gc=False):
    """Model reasoning; `signature` must be echoed verbatim to the same model."""

    thinking: str
    signature: str = ""
    redacted: bool = False


class ImageBlock(Struct, tag="image", frozen=True, gc=False):
    media_type: str
    data: str  # base64


class ToolCallBlock(Struct, tag="tool_call", frozen=True, gc=False):
    id: str
    name: str
    input: dict[str, Any]


class ToolResultBlock(Struct, tag="tool_result", frozen=True, gc=False):
    call_id: str
    name: str
    content: str
    is_error: bool = False
    images: list[ImageBlock] = field(default_factory=list)


Block = Union[TextBlock, ThinkingBlock, ImageBlock, ToolCallBlock, ToolResultBlock]

MessageKind = Literal["user", "text", "tool_call", "tool_result", "task", "summary", "notice"]


class Message(Struct, kw_only=True, frozen=True, gc=False):
    """One committed entry of a room: who wrote it, who may see it, and its blocks.

    `visible_to` is fixed at posting time. `provider`/`model` stamp what produced an
    assistant message; `seq` and `ts` are assigned by the store.
    """

    id: str
    room: str
    seq: int
    ts: float
    author: str
    kind: MessageKind
    blocks: list[Block]
    visible_to: list[str]
    provider: str = ""
    model: str = ""
    replaces: list[str] = field(default_factory=list)  # ids a summary stands for (compaction)

    @property
    def text(self) -> str:
        """The message's text blocks joined."""
        return block_text(self.blocks)

    @property
    def calls(self) -> list[ToolCallBlock]:
        """The tool calls the message makes."""
        return [b for b in self.blocks if isinstance(b, ToolCallBlock)]

    @property
    def result(self) -> ToolResultBlock | None:
        """The message's tool result, if it is one."""
        for b in self.blocks:
            if isinstance(b, ToolResultBlock):
                return b
        return None


class Draft(Struct, kw_only=True, frozen=True, gc=False):
    """A message before the store has given it an id, a seq and a timestamp."""

    author: str
    kind: MessageKind
    blocks: list[Block]
    visible_to: list[str]
    provider: str = ""
    model: str = ""
    replaces: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return block_text(self.blocks)


def block_text(blocks: list[Block]) -> str:
    return "".join(b.text for b in blocks if isinstance(b, TextBlock))


# --- what a provider streams back -------------------------------------------------------

class Usage(Struct, frozen=True):
    input: int = 0
    output: int = 0
    cached: int = 0


class TextDelta(Struct, tag="text", frozen=True):
    text: str


class ThinkingDelta(Struct, tag="thinking", frozen=True):
    text: str
    signature: str = ""
    redacted: bool = False  # `text` is opaque data that arrived whole; stored as its own redacted block


class ToolCallDone(Struct, tag="tool_call", frozen=True):
    id: str
    name: str
    input: dict[str, Any]


class ToolCallCut(Struct, tag="tool_call_cut", frozen=True):
    """A tool call that the output limit cut off inside its arguments: it is never run.

    `partial` is the argument text that arrived, so the model can be shown what it lost.
    """

    id: str
    name: str
    partial: str


StopReason = Literal["end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal"]


# Which limit ended a reply at max_tokens: the cap the request carried, the server's own lower cap, or the
# server's context window, which the prompt and the reply filled.
Limit = Literal["", "output", "server", "window"]


class StreamEnd(Struct, tag="end", frozen=True):
    stop_reason: StopReason
    usage: Usage | None = None  # None: the provider reported no counts (the engine estimates them)
    # With stop_reason max_tokens, when the provider can tell: the limit that ended the reply, and the cap sent.
    limit: Limit = ""
    max_tokens: int = 0


StreamEvent = Union[TextDelta, ThinkingDelta, ToolCallDone, ToolCallCut, StreamEnd]


class ToolSpec(Struct, frozen=True):
    """What the model is told about a tool."""

    name: str
    description: str
    input_schema: dict[str, Any]


class ModelMessage(Struct, frozen=True, gc=False):
    """A stored message as one agent sees it: its own words are `assistant`, the rest `user`.

    Tool results travel as `user` blocks; providers split or merge roles for their wire format.
    """

    role: Literal["user", "assistant"]
    blocks: list[Block]
    provider: str = ""
    model: str = ""


class Request(Struct, kw_only=True):
    """One model call: the system prompt, the agent's view of history, and its tools.

    `auxiliary` marks summaries and other side calls, which get small output caps.
    """

    agent: str
    model: str
    system: str
    messages: list[ModelMessage]
    tools: list[ToolSpec] = field(default_factory=list)
    max_output_tokens: int | None = None
    auxiliary: bool = False
    cache_key: str = ""
    thinking_budget: int | None = None  # tokens of extended thinking (Anthropic); None: the model's setting
    # Output tokens the model's window leaves after this prompt (our estimate); the cap asked never exceeds it,
    # since some servers refuse a prompt and cap that together pass the window. None: not known.
    output_room: int | None = None
    # Filled in by the provider as the reply arrives: the model its server says answered ("": it did not say).
    response_model: str = ""


BLOCK_DECODER = msgspec.json.Decoder(list[Block])
ENCODER = msgspec.json.Encoder()


def request_text(request: Request) -> str:
    """Every piece of text the model is sent, system prompt included (what `sees` checks)."""
    parts = [request.system]
    for m in request.messages:
        for b in m.blocks:
            if isinstance(b, TextBlock):
                parts.append(b.text)
            elif isinstance(b, ToolResultBlock):
                parts.append(b.content)
            elif isinstance(b, ToolCallBlock):
                parts.append(f"{b.name} {msgspec.json.encode(b.input).decode()}")
            elif isinstance(b, ThinkingBlock):
                parts.append(b.thinking)
    return "\n".join(parts)

"""The event stream: what a turn yields and what a room publishes (scenario-format.md).

Each event encodes to one JSON object with `type`, `room` and `ts`; the contract's field names are the Struct fields.
"""
from __future__ import annotations

from typing import Any, Literal, Union

import msgspec
from msgspec import Struct, field


class Event(Struct, tag_field="type", kw_only=True):
    """Something that happened in a room, as it streams to subscribers; `type` tells the kinds apart."""

    room: str = ""
    ts: float = 0.0


class CallRef(Struct, frozen=True):
    call_id: str
    name: str
    input: dict[str, Any]


class MessageEvent(Event, tag="message"):
    """A message was committed to the room's history (its `seq` is its place in the room)."""

    id: str
    seq: int
    author: str
    kind: str
    text: str
    visible_to: list[str]
    calls: list[CallRef] | msgspec.UnsetType = msgspec.UNSET
    call_id: str | msgspec.UnsetType = msgspec.UNSET
    name: str | msgspec.UnsetType = msgspec.UNSET
    is_error: bool | msgspec.UnsetType = msgspec.UNSET


class TextDeltaEvent(Event, tag="text_delta"):
    """A piece of an agent's reply while it streams; the whole reply follows as a `message`."""

    agent: str
    text: str


class ToolStart(Event, tag="tool_start"):
    """An agent's tool call began, with its decoded arguments."""

    agent: str
    call_id: str
    name: str
    input: dict[str, Any]


class ToolEnd(Event, tag="tool_end"):
    """An agent's tool call ended: its result as the model reads it, and whether it failed."""

    agent: str
    call_id: str
    name: str
    result: str
    is_error: bool
    seconds: float = 0.0  # wall time the tool ran


class CallUsage(Event, tag="usage"):
    """One model call's tokens and wall time; `estimated` when the provider reported no counts."""

    agent: str
    provider: str
    model: str
    input_tokens: int
    output_tokens: int
    cached_tokens: int = 0
    estimated: bool = False
    seconds: float = 0.0
    auxiliary: bool = False  # a side call (compaction summary), not the agent's own answer


class Compaction(Event, tag="compaction"):
    agent: str
    tokens_before: int
    tokens_after: int


class Retry(Event, tag="retry"):
    agent: str
    attempt: int
    reason: str
    delay: float


class State(Event, tag="state"):
    floor: str


class TaskEvent(Event, tag="task"):
    """A dispatched task or a worker's sub-task changed status in the ledger."""

    task_id: str
    agent: str
    kind: Literal["dispatch", "worker"]
    status: Literal["running", "done", "failed", "cancelled"]


class Cancelled(Event, tag="cancelled"):
    """The room's one group stop ran: every turn, worker and tool of the room was cancelled."""

    reason: str


class TurnStart(Event, tag="turn"):
    """An agent's turn began; it ends with its `done` (or an `error`, or the room's `cancelled`)."""

    agent: str


class Done(Event, tag="done"):
    """An agent's turn ended: why it stopped, its last words and the tokens it spent."""

    agent: str
    stop_reason: str
    result: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cut: list[str] = msgspec.field(default_factory=list)  # tools whose calls the output limit cut off (not run)
    # With stop_reason max_tokens: which limit ended the reply ("output": the cap asked, `max_tokens`; "server":
    # the server's own lower cap; "window": the prompt and the reply filled the context `window`).
    limit: str = ""
    max_tokens: int = 0
    window: int = 0


class ErrorEvent(Event, tag="error"):
    """A turn failed in a way the user is told of (one line), with the error's class."""

    message: str
    error_class: str
    agent: str | msgspec.UnsetType = msgspec.UNSET


class Confirm(Event, tag="confirm"):
    """A tool wants to do something risky: the user answers once, run (this run) or deny."""

    agent: str
    request_id: str
    category: str
    summary: str


class Evolution(Event, tag="evolution"):
    """The self-improvement pass ran: proposed (staged, not applied), nothing, refused or failed."""

    status: str
    proposal: str = ""  # the staged proposal's id
    reason: str = ""
    seq: list[int] = field(default_factory=list)  # the room messages it reviewed, first and last
    input_tokens: int = 0
    output_tokens: int = 0


class Check(Event, tag="check"):
    ok: bool
    failures: list[str] = field(default_factory=list)


AnyEvent = Union[
    MessageEvent, TextDeltaEvent, ToolStart, ToolEnd, CallUsage, Compaction, Retry, State, TaskEvent,
    Cancelled, TurnStart, Done, ErrorEvent, Confirm, Evolution, Check,
]

EVENT_ENCODER = msgspec.json.Encoder()
EVENT_DECODER = msgspec.json.Decoder(AnyEvent)


def message_event(msg) -> MessageEvent:
    """The `message` event for a stored Message (used live, by `show --json` and by export)."""
    from orchestrator.core.types import ToolCallBlock, ToolResultBlock

    ev = MessageEvent(room=msg.room, ts=msg.ts, id=msg.id, seq=msg.seq, author=msg.author,
                      kind=msg.kind, text=msg.text, visible_to=list(msg.visible_to))
    if msg.kind == "tool_call":
        ev.calls = [CallRef(b.id, b.name, b.input) for b in msg.blocks if isinstance(b, ToolCallBlock)]
    elif msg.kind == "tool_result":
        res = next(b for b in msg.blocks if isinstance(b, ToolResultBlock))
        ev.call_id, ev.name, ev.is_error, ev.text = res.call_id, res.name, res.is_error, res.content
    return ev

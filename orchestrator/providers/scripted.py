"""The deterministic scripted model: plays queued replies per agent, through the same engine path.

Errors become the same classes real vendors raise; `sees`/`not_sees` checks are recorded,
and auxiliary calls (summaries) are answered from the request without consuming a queue, unless a
queue is scripted under the call's own name (the self-improvement pass: `evolve`).
"""
from __future__ import annotations

import hashlib
import re
from collections import defaultdict, deque
from collections.abc import Iterable
from typing import Any, AsyncGenerator

import msgspec
import trio
from msgspec import Struct, field

from orchestrator.core.errors import ERROR_KINDS, ScriptExhausted
from orchestrator.core.types import (
    request_text,
    Message, Request, StreamEnd, StreamEvent, TextBlock, TextDelta, ThinkingDelta,
    ToolCallCut, ToolCallDone, ToolResultBlock, Usage,
)

_ANONYMOUS = re.compile(r"worker(-\d+)?")
# Auxiliary calls that play a queue of their own name, so a scenario can script them (the
# self-improvement pass); other auxiliary calls (summaries) never touch a queue.
SIDE_QUEUES = frozenset({"evolve"})


class Reply(Struct, kw_only=True, frozen=True):
    """One scripted model reply: text, thinking or tool calls, optionally delayed or failing."""

    say: str | None = None
    think: str | None = None
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    delay: float = 0.0
    error: str | None = None
    retry_after: float | None = None
    sees: str | None = None
    not_sees: str | None = None
    usage: Usage | None = None
    cut: bool = False  # the output limit stops the reply: inside its last call's arguments, if it has calls


def queue_of(agent: str) -> str:
    return "worker" if _ANONYMOUS.fullmatch(agent) else agent


def signature(text: str) -> str:
    return "scripted-" + hashlib.sha256(text.encode()).hexdigest()[:16]


def _chunks(text: str, n: int = 3) -> list[str]:
    """Split text into about n deltas on word boundaries, so streaming is real."""
    words = re.split(r"(?<=\s)", text)
    if len(words) < 2:
        return [text]
    step = max(1, -(-len(words) // n))
    return ["".join(words[i:i + step]) for i in range(0, len(words), step)]


class ScriptedProvider:
    """One instance serves a whole room: a queue per agent, consumed in order."""

    id = "scripted"

    def __init__(self, script: dict[str, list[Reply]], *, record: bool = True):
        self._queues = {name: deque(items) for name, items in script.items()}
        self._served: dict[str, int] = defaultdict(int)
        self.record = record
        self.requests: list[Request] = []
        self.failures: list[str] = []

    async def validate_auth(self) -> None:
        """Always valid: a scripted model needs no key."""
        return None

    def resume(self, messages: Iterable[Message]) -> None:
        """Go on where a stored room's script stopped: every reply it holds from a scripted agent was the next
        of that agent's queue, so as many are used up (a resumed chat does not play its first replies again)."""
        for m in messages:
            if m.provider == self.id and m.kind in ("text", "tool_call"):
                queue = queue_of(m.author)
                if items := self._queues.get(queue):
                    items.popleft()
                    self._served[queue] += 1

    def remaining(self) -> dict[str, int]:
        """The replies still queued for `agent`'s script."""
        return {q: len(items) for q, items in self._queues.items() if items}

    async def stream(self, request: Request) -> AsyncGenerator[StreamEvent, None]:
        """Play the next scripted reply for the request's agent as a stream of events."""
        if self.record:
            self.requests.append(request)
        # a side call with nothing scripted gets the summary too: for the pass, an answer proposing nothing
        if request.auxiliary and (request.agent not in SIDE_QUEUES or not self._queues.get(request.agent)):
            async for ev in self._summary(request):
                yield ev
            return
        queue = queue_of(request.agent)
        self._served[queue] += 1
        n = self._served[queue]
        items = self._queues.get(queue)
        if not items:
            raise ScriptExhausted(f"the scripted model for {queue!r} has no response left for call #{n}")
        reply = items.popleft()
        self._check(request, reply, f"{request.agent} call #{n}")
        if reply.delay:
            await trio.sleep(reply.delay)
        if reply.error:
            raise ERROR_KINDS[reply.error](f"scripted {reply.error} error", provider=self.id,
                                           retry_after=reply.retry_after)
        await trio.sleep(0)  # the reply arrives: a zero-latency model yields once per call, then streams it whole
        if reply.think:
            yield ThinkingDelta(reply.think, signature(reply.think))
        if reply.say:
            for piece in _chunks(reply.say):
                yield TextDelta(piece)
        for i, (name, args) in enumerate(reply.calls):
            if reply.cut and i == len(reply.calls) - 1:  # half of its arguments arrived before the limit
                text = msgspec.json.encode(args).decode()
                yield ToolCallCut(f"call_{queue}_{n}_{i}", name, text[:len(text) // 2])
            else:
                yield ToolCallDone(f"call_{queue}_{n}_{i}", name, args)
        yield StreamEnd("max_tokens" if reply.cut else "tool_use" if reply.calls else "end_turn", reply.usage)

    def _check(self, request: Request, reply: Reply, where: str) -> None:
        if reply.sees is None and reply.not_sees is None:
            return
        text = request_text(request)
        if reply.sees is not None and reply.sees not in text:
            self.failures.append(f"{where}: the request did not contain {reply.sees!r}")
        if reply.not_sees is not None and reply.not_sees in text:
            self.failures.append(f"{where}: the request contained {reply.not_sees!r}")

    async def _summary(self, request: Request) -> AsyncGenerator[StreamEvent, None]:
        lines = []
        for m in request.messages:
            for b in m.blocks:
                text = b.text if isinstance(b, TextBlock) else b.content if isinstance(b, ToolResultBlock) else ""
                if text.strip():
                    lines.append("- " + text.strip().splitlines()[0][:200])
                    break
        await trio.sleep(0)
        yield TextDelta("Summary of the earlier conversation:\n" + "\n".join(lines))
        yield StreamEnd("end_turn")

"""Confirmation questions: a tool asks "may I run this?", the room publishes a `confirm` event,
and whoever follows the room (the shell, a scenario's `confirm:` turn) answers it.

With nobody there to answer, every question is denied at once: a risky command never runs unasked.
"""
from __future__ import annotations

import time
import uuid
from typing import Awaitable, Callable

import trio

from orchestrator.core.errors import InputError
from orchestrator.core.events import Confirm, Event
from orchestrator.room.members import USER
from orchestrator.tools.session import Answer


class Questions:
    def __init__(self, publish: Callable[[Event], None], notice: Callable[..., Awaitable[object]],
                 on_open: Callable[[], None], can_confirm: bool):
        self._publish, self._notice, self._on_open = publish, notice, on_open
        self.can_confirm = can_confirm  # someone is there to answer
        self._open: dict[str, tuple[trio.Event, list[Answer]]] = {}

    async def ask(self, agent: str, category: str, summary: str) -> Answer:
        """A tool's request, answered by `answer`; the answer is noted for the user and the agent."""
        if not self.can_confirm:
            return "deny"
        request_id = "q" + uuid.uuid4().hex[:6]
        answered = trio.Event()
        answer: list[Answer] = []
        self._open[request_id] = (answered, answer)
        self._publish(Confirm(ts=time.time(), agent=agent, request_id=request_id, category=category,
                              summary=summary))
        self._on_open()
        try:
            await answered.wait()
        finally:
            self._open.pop(request_id, None)
        await self._notice(f"The user answered {answer[0]!r} to {agent}'s request ({category}).", [USER, agent])
        return answer[0]

    @property
    def asking(self) -> list[str]:
        """Open requests, oldest first."""
        return list(self._open)

    def answer(self, reply: Answer, request_id: str | None = None) -> None:
        """Answer a request (the oldest open one unless `request_id` says which)."""
        if not self._open:
            raise InputError("there is no confirmation request to answer")
        answered, answer = self._open.pop(request_id or next(iter(self._open)))
        answer.append(reply)
        answered.set()

"""The user's lines: the cap on one line, from any surface, and the trace of each line: its `invoke_workflow`
span, open while any room task started for it runs.

A task belongs to the line of whoever spawned it (trio copies the spawner's context), so background
work, handoffs and the reports that wake the commander stay in the trace of the line that caused them.
"""
from __future__ import annotations

from orchestrator.core.errors import InputError
from orchestrator.trace import semconv as sc
from orchestrator.trace.spans import OFF, TRACER, Span, current, root

MAX_LINE = 100_000  # characters in one user line, from any surface; longer text belongs in a file


def checked_line(text: str) -> str:
    """A user line as a room takes it; one that is too long is refused whole, never cut."""
    if len(text) > MAX_LINE:
        raise InputError(f"the line is {len(text):,} characters; a room takes at most {MAX_LINE:,} in one line: "
                         "put longer text in a file and name it")
    return text


class Lines:
    """The open lines' spans, each with the count of room tasks working for it."""

    def __init__(self, room_name: str, room_id: str):
        self._name, self._id = room_name, room_id
        self._tasks: dict[Span, int] = {}  # open lines -> room tasks working for them
        self._stops: dict[Span, str] = {}

    def open(self) -> Span:
        """A new line's span, a trace of its own; `settle` it once its first tasks are spawned."""
        if not TRACER.on:
            return OFF
        return TRACER.start(f"{sc.INVOKE_WORKFLOW} {self._name}", parent=None, attributes={
            sc.OPERATION_NAME: sc.INVOKE_WORKFLOW, sc.WORKFLOW_NAME: self._name, sc.CONVERSATION_ID: self._id})

    def settle(self, line: Span) -> None:
        """After posting: a line that started no task (a running turn took it) ends now."""
        if line.recording and line not in self._tasks:
            line.end()

    def hold(self) -> Span | None:
        """A room task starts for the current line."""
        if not TRACER.on:
            return None
        line = root(current())
        if line is not None:
            self._tasks[line] = self._tasks.get(line, 0) + 1
        return line

    def release(self, line: Span | None) -> None:
        """That task ended; the line ends with its last task (with an error if it was stopped)."""
        if line is None or line not in self._tasks:
            return
        self._tasks[line] -= 1
        if not self._tasks[line]:
            del self._tasks[line]
            line.end(self._stops.pop(line, None))

    def stop(self, reason: str) -> None:
        """The group stop: every open line records it, and ends with an error."""
        for line in self._tasks:
            line.event(sc.STOP, {sc.REASON: reason})
            self._stops[line] = f"stopped: {reason}"

    def event(self, name: str, from_agent: str, to_agent: str) -> None:
        """A handoff or a handback, on the line it happens in."""
        line = root(current()) if TRACER.on else None
        if line is not None:
            line.event(name, {sc.FROM_AGENT: from_agent, sc.TO_AGENT: to_agent})

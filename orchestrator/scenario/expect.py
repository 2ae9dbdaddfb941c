"""Checks a finished scenario run against its `expect` block; each failure is one readable line.

It reads what a user could inspect afterwards: the stored (healed) messages, the event stream,
the requests each model was sent, the ledger and the workspace.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from orchestrator.core.events import CallUsage, ErrorEvent, Event
from orchestrator.core.types import Message, Request
from orchestrator.core.types import request_text
from orchestrator.scenario.schema import Expect
from orchestrator.store.records import TaskRecord

_ANONYMOUS = re.compile(r"worker(-\d+)?")


def _is(author: str, name: str) -> bool:
    return author == name or (name == "worker" and bool(_ANONYMOUS.fullmatch(author)))


@dataclass
class Outcome:
    messages: list[Message]
    events: list[Event]
    requests: list[Request]
    tasks: list[TaskRecord]
    floor: str
    workspace: Path

    def errors(self) -> list[ErrorEvent]:
        return [e for e in self.events if isinstance(e, ErrorEvent)]


def check(expect: Expect, out: Outcome, *, scripted: bool = True) -> list[str]:
    """Every expectation that did not hold. Without `scripted`, checks that depend on the script are skipped."""
    fails: list[str] = []
    if expect.floor is not None and out.floor != expect.floor:
        fails.append(f"floor: expected {expect.floor}, got {out.floor}")
    if scripted:
        fails += _transcript(expect, out.messages)
        for item in expect.tool_calls:
            n = sum(1 for m in out.messages if _is(m.author, item.agent) for c in m.calls if c.name == item.name)
            if (item.count is None and n == 0) or (item.count is not None and n != item.count):
                want = f"{item.count} time(s)" if item.count is not None else "at least once"
                fails.append(f"tool_calls: {item.agent} called {item.name} {n} time(s), expected {want}")
    for absent in expect.absent:
        for m in out.messages:
            if _is(m.author, absent.from_) and absent.contains in m.text:
                fails.append(f"absent: {m.author} wrote {absent.contains!r} (message #{m.seq})")
                break
    for hidden in expect.not_in_context:
        for i, req in enumerate(r for r in out.requests if _is(r.agent, hidden.agent)):
            if hidden.text in request_text(req):
                fails.append(f"not_in_context: request #{i + 1} to {hidden.agent} contained {hidden.text!r}")
                break
    for task in expect.ledger:
        if not any(_is(t.agent, task.agent) and t.status == task.status for t in out.tasks):
            got = [f"{t.agent}:{t.status}" for t in out.tasks] or ["no tasks"]
            fails.append(f"ledger: no task for {task.agent} ended {task.status} (ledger: {', '.join(got)})")
    seen = {type(e).__struct_config__.tag for e in out.events}
    for kind in expect.events:
        if kind not in seen:
            fails.append(f"events: no {kind!r} event was emitted")
    for path, text in expect.files.items():
        p = out.workspace / path
        if not p.is_file():
            fails.append(f"files: {path} does not exist in the workspace")
        elif text not in p.read_text(errors="replace"):
            fails.append(f"files: {path} does not contain {text!r}")
    for path in expect.no_files:
        if (out.workspace / path).exists():
            fails.append(f"no_files: {path} exists in the workspace")
    for tool_error in expect.tool_errors:
        n = sum(1 for m in out.messages if m.kind == "tool_result" and _is(m.author, tool_error.agent)
                and m.result and m.result.name == tool_error.name and m.result.is_error)
        if n != tool_error.count:
            fails.append(f"tool_errors: {tool_error.agent} got {n} error result(s) from {tool_error.name}, "
                         f"expected {tool_error.count}")
    if scripted:
        fails += _usage(expect, out.events)
    if expect.error is not None and not any(expect.error in e.message for e in out.errors()):
        raised = "; ".join(e.message for e in out.errors()) or "no error"
        fails.append(f"error: expected an error containing {expect.error!r}, got: {raised}")
    return fails


def _usage(expect: Expect, events: list[Event]) -> list[str]:
    fails = []
    for item in expect.usage:
        calls = [e for e in events if isinstance(e, CallUsage) and _is(e.agent, item.agent)]
        got = {"calls": len(calls), "input": sum(e.input_tokens for e in calls),
               "output": sum(e.output_tokens for e in calls), "cached": sum(e.cached_tokens for e in calls),
               "estimated": any(e.estimated for e in calls)}
        for key, value in got.items():
            want = getattr(item, key)
            if want is not None and value != want:
                fails.append(f"usage: {item.agent} {key} is {value}, expected {want}")
    return fails


def _transcript(expect: Expect, messages: list[Message]) -> list[str]:
    i = 0
    for n, item in enumerate(expect.transcript):
        while i < len(messages):
            m = messages[i]
            i += 1
            if (_is(m.author, item.from_) and item.contains in m.text
                    and (item.to is None or item.to in m.visible_to)
                    and (item.hidden_from is None or item.hidden_from not in m.visible_to)):
                break
        else:
            extra = "".join([f", visible to {item.to}" if item.to else "",
                             f", hidden from {item.hidden_from}" if item.hidden_from else ""])
            return [f"transcript[{n}]: no message from {item.from_} containing {item.contains!r}{extra} "
                    f"after the previous match"]
    return []

"""Every expectation key both holds and fails when it should (so no scenario check is vacuous)."""
from __future__ import annotations

import re

import msgspec
import pytest

from orchestrator.core.events import ErrorEvent, State, TextDeltaEvent
from orchestrator.core.types import Message, Request, TextBlock, ToolCallBlock, ToolResultBlock, ModelMessage
from orchestrator.scenario.expect import Outcome, check
from orchestrator.scenario.schema import Expect
from orchestrator.store.db import TaskRecord


def msg(seq, author, kind, blocks, visible_to):
    return Message(id=f"m{seq}", room="r", seq=seq, ts=float(seq), author=author, kind=kind, blocks=blocks,
                   visible_to=visible_to)


@pytest.fixture
def outcome(tmp_path):
    (tmp_path / "out.txt").write_text("result: 42")
    messages = [
        msg(1, "user", "user", [TextBlock("hello team")], ["user", "commander"]),
        msg(2, "commander", "tool_call", [TextBlock("asking"), ToolCallBlock("c1", "run_worker", {"task": "x"})],
            ["commander", "user"]),
        msg(3, "worker-2", "text", [TextBlock("hidden work")], ["worker-2"]),
        msg(4, "commander", "tool_result", [ToolResultBlock("c1", "run_worker", "boom", True)], ["commander"]),
        msg(5, "commander", "text", [TextBlock("all done")], ["commander", "user"]),
    ]
    requests = [Request(agent="worker-2", model="m", system="sys", messages=[
        ModelMessage("user", [TextBlock("secret plan")])])]
    return Outcome(messages=messages, events=[State(floor="commander"), TextDeltaEvent(agent="a", text="t"),
                                              ErrorEvent(message="auth failed", error_class="auth")],
                   requests=requests, tasks=[TaskRecord(id="t1", room="r", agent="worker-2", kind="worker",
                                                        status="failed", task="x")],
                   floor="commander", workspace=tmp_path)


CASES = [
    ({"floor": "commander"}, {"floor": "tutor"}),
    ({"transcript": [{"from": "user", "contains": "hello"}, {"from": "commander", "contains": "done", "to": "user"}]},
     {"transcript": [{"from": "commander", "contains": "done"}, {"from": "user", "contains": "hello"}]}),
    ({"transcript": [{"from": "worker", "contains": "hidden", "hidden_from": "user"}]},
     {"transcript": [{"from": "worker", "contains": "hidden", "to": "user"}]}),
    ({"absent": [{"from": "commander", "contains": "hidden work"}]}, {"absent": [{"from": "worker", "contains": "hidden"}]}),
    ({"not_in_context": [{"agent": "commander", "text": "secret"}]},
     {"not_in_context": [{"agent": "worker", "text": "secret plan"}]}),
    ({"tool_calls": [{"agent": "commander", "name": "run_worker", "count": 1}]},
     {"tool_calls": [{"agent": "commander", "name": "run_worker", "count": 2}]}),
    ({"tool_calls": [{"agent": "commander", "name": "run_worker"}]},
     {"tool_calls": [{"agent": "commander", "name": "dispatch_to"}]}),
    ({"ledger": [{"agent": "worker", "status": "failed"}]}, {"ledger": [{"agent": "worker", "status": "done"}]}),
    ({"events": ["state", "text_delta"]}, {"events": ["cancelled"]}),
    ({"files": {"out.txt": "42"}}, {"files": {"out.txt": "43"}}),
    ({"files": {"out.txt": "42"}}, {"files": {"missing.txt": ""}}),
    ({"error": "auth"}, {"error": "overloaded"}),
    ({"no_files": ["missing.txt"]}, {"no_files": ["out.txt"]}),
    ({"tool_errors": [{"agent": "commander", "name": "run_worker", "count": 1}]},
     {"tool_errors": [{"agent": "commander", "name": "run_worker", "count": 0}]}),
]


@pytest.mark.parametrize("holds, fails", CASES)
def test_each_key_holds_and_fails(outcome, holds, fails):
    assert check(msgspec.convert(holds, Expect), outcome) == []
    failures = check(msgspec.convert(fails, Expect), outcome)
    assert len(failures) == 1, failures
    assert re.match(r"\w+", failures[0]).group() in fails  # the failure names its key


def test_script_dependent_checks_are_skipped_for_real_models(outcome):
    expect = msgspec.convert({"tool_calls": [{"agent": "commander", "name": "nope"}],
                              "transcript": [{"from": "user", "contains": "never"}]}, Expect)
    assert check(expect, outcome, scripted=False) == []
    assert len(check(expect, outcome)) == 2

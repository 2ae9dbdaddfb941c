"""External agents (ACP members) in a real Room: the SDK test agent (tests/acpdata/agent.py) is started as its own
process in the sandbox, and the commander (scripted) gives it work as it gives any member work.

What a test tells the agent to do is in the task's lines (`say: a|b`, `sleep: 30`, `crash: 3`...: the verbs are
listed at the top of the agent); what it did is read from the room's events and the store.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio

pytest.importorskip("acp", reason="the test agent needs the ACP SDK (agent-client-protocol)")

from orchestrator.core.errors import InputError  # noqa: E402
from orchestrator.core.events import Cancelled, Confirm, Event, MessageEvent, TextDeltaEvent, ToolEnd  # noqa: E402
from orchestrator.providers.scripted import Reply, ScriptedProvider, request_text  # noqa: E402
from orchestrator.room.room import Room  # noqa: E402
from orchestrator.store.db import Store  # noqa: E402
from orchestrator.team.loader import load_team  # noqa: E402
from orchestrator.team.schema import AcpSpec, AgentDef, Team  # noqa: E402

AGENT = Path(__file__).resolve().parent / "acpdata" / "agent.py"
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
async def store(tmp_path: Path):
    s = await Store.open(tmp_path / "room.db")
    yield s
    await s.close()


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # the agents' private homes
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    return ws


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[float, Event]] = []

    def __call__(self, ev: Event) -> None:
        self.events.append((time.perf_counter(), ev))

    def of(self, kind: type) -> list:
        return [e for _, e in self.events if isinstance(e, kind)]

    async def until(self, ready, seconds: float = 30) -> None:
        with trio.fail_after(seconds):  # the agent's start (a Python process in the sandbox) under load
            while not ready():
                await trio.sleep(0.01)


def acp_member(name: str, **kw) -> AgentDef:
    return AgentDef(name=name, description=f"the {name}", acp=AcpSpec(command=[sys.executable, str(AGENT)]), **kw)


def team(*agents: AgentDef) -> Team:
    return Team(commander=AgentDef(name="commander", model="scripted"), agents=list(agents))


def resolver(provider: ScriptedProvider):
    return lambda model: (provider, "scripted")


def dispatch(agent: str, *steps: str) -> Reply:
    return Reply(calls=[("dispatch_to", {"agent": agent, "task": "\n".join(["Please do this.", *steps])})])


async def test_streamed_text_is_one_message_and_its_tool_calls_stay_its_own(store, workspace):
    provider = ScriptedProvider({"commander": [
        dispatch("coder", "read: notes.txt", "say: first|, second|, third"),
        Reply(say="The coder read the notes.", sees="first, second, third"),
    ]})
    rec = Recorder()
    async with Room.create(store, team(acp_member("coder")), resolver(provider), workspace=workspace,
                           on_event=rec) as room:
        await room.post("Read the notes.")
        await room.idle()
    deltas = [e.text for e in rec.of(TextDeltaEvent) if e.agent == "coder"]
    assert deltas[-3:] == ["first", ", second", ", third"]  # one event per chunk, in the order sent
    said = [e for e in rec.of(MessageEvent) if e.author == "coder" and e.kind == "text"]
    assert len(said) == 1 and said[0].text.endswith("first, second, third")
    assert said[0].text.startswith("read 3 lines of notes.txt")
    assert said[0].visible_to == ["coder", "user"]  # a foreground task: the report goes to the commander
    order = [e for _, e in rec.events if e in said or (isinstance(e, TextDeltaEvent) and e.agent == "coder")]
    assert order[-1] is said[0]  # committed once the prompt ended, after every delta
    report = next(e for e in rec.of(ToolEnd) if e.name == "dispatch_to")
    assert not report.is_error and report.result.endswith("first, second, third")

    notes = [m for m in await store.load(room.id) if m.author == "coder" and m.kind == "notice"]
    tools = [m.text for m in notes if m.text.startswith("[tool]")]
    assert tools == ["[tool] read_file notes.txt (in_progress)", "[tool] read_file notes.txt (completed)"]
    assert all(m.visible_to == ["coder"] for m in notes)  # its partition only
    sent = "\n".join(request_text(r) for r in provider.requests)
    assert "read_file notes.txt" not in sent and "ACP session" not in sent  # never the commander's
    view = await room_view(store, room.id, provider, "coder")
    assert "[notice] [tool] read_file notes.txt (completed)" in view  # the browser's agent view shows them


async def room_view(store: Store, room_id: str, provider: ScriptedProvider, name: str) -> str:
    async with Room.open(store, room_id, resolver(provider)) as room:
        request = await room.next_request(name)
    return "\n".join(b.text for m in request.messages for b in m.blocks if hasattr(b, "text"))


async def test_stop_during_a_long_prompt_is_fast_and_the_next_task_works(store, workspace):
    provider = ScriptedProvider({"commander": [
        dispatch("coder", "sleep: 60"),
        dispatch("coder", "history:", "say: back at work"),
        Reply(say="Done.", sees="back at work"),
    ]})
    rec = Recorder()
    async with Room.create(store, team(acp_member("coder")), resolver(provider), workspace=workspace,
                           on_event=rec) as room:
        await room.post("Take your time.")
        await rec.until(lambda: any("sleeping 60 s" in e.text for e in rec.of(TextDeltaEvent)))
        stop_at = time.perf_counter()
        await room.stop()
        took = next(t for t, e in rec.events if isinstance(e, Cancelled)) - stop_at
        assert took < 0.1, f"stop -> cancelled took {took * 1000:.0f} ms"
        assert not room.busy
        assert [t.status for t in room.ledger.tasks.values()] == ["cancelled"]

        await room.post("Now the short one.")
        await room.idle()
        statuses = [t.status for t in room.ledger.tasks.values()]
        assert statuses == ["cancelled", "done"]
    said = [e.text for e in rec.of(MessageEvent) if e.author == "coder" and e.kind == "text"]
    # the same session went on: the cancelled prompt was its first
    assert said == ["this session has had 2 prompts\nback at work"]
    messages = await store.load(room.id)
    assert sum(m.text.startswith("ACP session ") for m in messages) == 1


async def test_a_crashed_agent_is_one_line_for_the_commander_and_is_started_again(store, workspace):
    provider = ScriptedProvider({"commander": [
        dispatch("coder", "crash: 3"),
        Reply(say="The coder crashed.", sees="coder failed"),
        dispatch("coder", "history:", "say: alive again"),
        Reply(say="It is back.", sees="alive again"),
    ]})
    rec = Recorder()
    async with Room.create(store, team(acp_member("coder")), resolver(provider), workspace=workspace,
                           on_event=rec) as room:
        await room.post("Try the risky thing.")
        await room.idle()
        failed = next(e for e in rec.of(ToolEnd) if e.name == "dispatch_to")
        assert failed.is_error and "\n" not in failed.result
        assert failed.result.startswith("coder failed: coder stopped before it answered: ")
        assert "exit" in failed.result and "started again" in failed.result
        assert [t.status for t in room.ledger.tasks.values()] == ["failed"]

        await room.post("Again, gently.")
        await room.idle()
    said = [e.text for e in rec.of(MessageEvent) if e.author == "coder" and e.kind == "text"]
    assert said[-1] == "this session has had 2 prompts\nalive again"  # restarted, its session loaded again
    assert [e.text for e in rec.of(MessageEvent) if e.author == "commander" and e.kind == "text"][-1] == "It is back."


async def test_always_is_asked_once_per_agent_and_kind(store, workspace):
    provider = ScriptedProvider({"commander": [
        dispatch("coder", "ask: run the migrations", "ask: run the migrations again"),
        Reply(say="Both ran."),
    ]})
    rec = Recorder()
    async with Room.create(store, team(acp_member("coder")), resolver(provider), workspace=workspace,
                           on_event=rec, can_confirm=True) as room:
        await room.post("Migrate.")
        while await room.question_or_idle():
            room.answer("run")
    asked = rec.of(Confirm)
    assert len(asked) == 1 and asked[0].agent == "coder" and asked[0].category == "acp:execute"
    said = next(e.text for e in rec.of(MessageEvent) if e.author == "coder" and e.kind == "text")
    assert said.count("selected yes-always") == 2, said


async def test_with_nobody_to_answer_a_permission_is_rejected(store, workspace):
    provider = ScriptedProvider({"commander": [dispatch("coder", "ask: delete the cache"), Reply(say="Noted.")]})
    rec = Recorder()
    async with Room.create(store, team(acp_member("coder")), resolver(provider), workspace=workspace,
                           on_event=rec) as room:
        await room.post("Clean up.")
        await room.idle()
    assert not rec.of(Confirm)
    said = next(e.text for e in rec.of(MessageEvent) if e.author == "coder" and e.kind == "text")
    assert "permission for 'delete the cache': selected no" in said


async def test_the_session_is_loaded_again_after_a_restart(store, workspace):
    provider = ScriptedProvider({"commander": [
        dispatch("coder", "say: one"), Reply(say="First."),
        dispatch("coder", "history:"), Reply(say="Second."),
    ]})
    async with Room.create(store, team(acp_member("coder")), resolver(provider), workspace=workspace) as room:
        await room.post("First task.")
        await room.idle()
    rec = Recorder()
    async with Room.open(store, room.id, resolver(provider), on_event=rec) as again:
        await again.post("Second task.")
        await again.idle()
    said = [e.text for e in rec.of(MessageEvent) if e.author == "coder" and e.kind == "text"]
    assert said == ["this session has had 2 prompts"]
    assert sum(m.text.startswith("ACP session ") for m in await store.load(room.id)) == 1


def test_an_acp_member_has_no_model_and_no_tools(tmp_path: Path):
    path = tmp_path / "team.yaml"
    path.write_text("agents:\n  - name: claude\n    acp: {command: [npx, -y, x]}\n    tools: [bash]\n")
    with pytest.raises(InputError, match=r"team.yaml:4: `tools` is for members on a model of ours.*agents\[0\]"):
        load_team(path)
    path.write_text("commander:\n  acp: {command: [x]}\n")
    with pytest.raises(InputError, match=r"team.yaml:2: the commander runs on a model of ours"):
        load_team(path)
    path.write_text("agents:\n  - name: claude\n    acp: {command: [npx], env: {K: '${SECRET_KEY}'}}\n")
    assert load_team(path).agents[0].acp.env == {"K": "${SECRET_KEY}"}  # filled in at start, never stored
    assert load_team(path).agents[0].model == ""


def test_agents_check_reports_each_agent_or_why_not(tmp_path: Path):
    path = tmp_path / "team.yaml"
    path.write_text(f"agents:\n  - name: good\n    acp: {{command: [{sys.executable}, {AGENT}]}}\n"
                    f"  - name: missing\n    acp: {{command: [no-such-agent-anywhere]}}\n")
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    run = subprocess.run([sys.executable, "-m", "orchestrator", "agents", "check", "--team", str(path)],
                         capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    lines = run.stdout.splitlines()
    assert run.returncode == 1, run.stdout + run.stderr
    assert lines[0].startswith("ok    good: acp-test-agent 1.0 (ACP 1); capabilities: loadSession")
    assert lines[1].startswith("FAIL  missing: ") and "no-such-agent-anywhere" in lines[1]
    assert lines[2] == "1 of 2 external agents started"
    assert "Traceback" not in run.stderr

"""A third real coding-agent CLI, Gemini CLI, which speaks ACP itself, its model calls served by a loopback Gemini
API, no API key: first over raw JSON-RPC lines, then as a room member through the project's own client, in the
sandbox (its report, with its settings.json from the user's HOME, a workspace's hook run only where the user trusts
the folder, and a stop mid-reply).

Skipped, saying why, where node and npm are missing or too old, the one-time npm install cannot run, or (the
room's tests) bubblewrap is missing.
"""
from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from shutil import which

import pytest
import trio

from orchestrator.core.events import Cancelled, MessageEvent, TextDeltaEvent, ToolEnd
from orchestrator.providers.scripted import Reply, ScriptedProvider
from orchestrator.room.room import Room
from orchestrator.store.db import Store
from orchestrator.team.schema import AcpSpec, AgentDef, Team
from orchestrator.tools.process import KILL_GRACE, _Group
from tests import acpreal, fakegemini
from tests.test_acp_realcli import CAPABILITIES, PROMPT, TAG, Lines, Recorder, tagged

KEY_VAR = "ORCHESTRATOR_TEST_GEMINI_KEY"  # the user's variable that `acp.env` names with ${...}
STREAMED = fakegemini.path(acpreal.GEMINI_MODEL)


@pytest.fixture(scope="module")
def entry() -> Path:
    try:
        return acpreal.install(adapter=acpreal.GEMINI)
    except acpreal.Unavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def vendor() -> Iterator[acpreal.Vendor]:
    server = acpreal.Vendor()
    with server:
        yield server


async def test_gemini_answers_a_prompt_over_acp(entry: Path, vendor: acpreal.Vendor, tmp_path: Path) -> None:
    vendor.replies.append(fakegemini.reply("hello from", " gemini"))
    spec = acpreal.gemini_agent(entry, vendor.url, tmp_path / "home")
    work = tmp_path / "work"
    work.mkdir()
    stderr = tmp_path / "agent.stderr"
    with trio.move_on_after(60) as clock, open(stderr, "wb") as errors:
        proc = await trio.lowlevel.open_process(spec.argv, cwd=work, env=spec.env, stdin=subprocess.PIPE,
                                                stdout=subprocess.PIPE, stderr=errors, start_new_session=True)
        group = _Group(proc)  # Gemini CLI starts itself again as its child, in its group
        try:
            lines = Lines(proc)
            hello = await lines.call("initialize", {"protocolVersion": 1, "clientCapabilities": CAPABILITIES})
            session = (await lines.call("session/new", {"cwd": str(work), "mcpServers": []}))["sessionId"]
            done = await lines.call("session/prompt", {"sessionId": session,
                                                       "prompt": [{"type": "text", "text": PROMPT}]})
            tunnels = list(vendor.tunnels)
        finally:
            with trio.CancelScope(shield=True):
                await group.close(KILL_GRACE)
                assert proc.stdin is not None  # opened with a pipe
                await proc.stdin.aclose()
    problem = f"the agent's stderr:\n{stderr.read_text()[-2000:]}\n{vendor.seen()}"
    assert not clock.cancelled_caught, f"no answer within 60 s; {problem}"
    assert hello["protocolVersion"] == 1, problem
    assert (hello["agentInfo"]["name"], hello["agentInfo"]["version"]) == \
        ("gemini-cli", acpreal.GEMINI.pins[acpreal.GEMINI.package])
    # Its ways to log in carry no `env_var` type, so the room's client sends no `authenticate`: with a base URL
    # set, session/new takes it as a gateway and the key from GEMINI_API_KEY.
    assert "gemini-api-key" in [m["id"] for m in hello["authMethods"]], hello["authMethods"]
    assert lines.said(session) == "hello from gemini", problem
    assert done["stopReason"] == "end_turn", problem

    # One model call, the prompt's, with the dummy key, and nothing sent past the base URL meanwhile.
    assert [r["path"] for r in vendor.requests] == [STREAMED], problem
    call = vendor.requests[0]
    assert call["headers"]["x-goog-api-key"] == acpreal.DUMMY_GEMINI_KEY
    assert any(PROMPT in text for text in fakegemini.said(call)), fakegemini.said(call)
    assert tunnels == [], f"the CLI tried to reach {tunnels} besides the vendor"


# --- Gemini CLI as a room member, through the project's own client, in the sandbox ---

def member(entry: Path, vendor: acpreal.Vendor, tag: str, home_files: list[str] | None = None) -> AgentDef:
    """The member `gemini`: Gemini CLI on node in ACP mode, the vendor as its base URL and its proxy, its key
    from the user's KEY_VAR through `${...}`, and a tag that finds every process of it afterwards. Its
    settings.json reaches the private HOME the room gives it only through `home_files`."""
    env = {**acpreal.gemini_env(vendor.url, f"${{{KEY_VAR}}}"), "HTTPS_PROXY": vendor.url,
           "HTTP_PROXY": vendor.url, "NO_PROXY": "127.0.0.1,localhost", TAG: tag}
    return AgentDef(name="gemini", description="Gemini CLI",
                    acp=AcpSpec(command=acpreal.gemini_argv(entry), env=env, network=True, start_timeout=60,
                                home_files=home_files or []))


@pytest.fixture
def jailed(entry: Path) -> Path:
    if which("bwrap") is None:
        pytest.skip("bubblewrap (bwrap) is not installed: the room runs external agents in its sandbox")
    return entry


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = await Store.open(tmp_path / "room.db")
    yield s
    await s.close()


@pytest.fixture
def user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's HOME, with the settings.json that keeps Gemini CLI's usage statistics on this machine; the
    file, which the user gives the agent (`home_files`, from the user's HOME, as a team file names it)."""
    home = tmp_path / "user"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # the member's private HOME is under it
    monkeypatch.setenv(KEY_VAR, acpreal.DUMMY_GEMINI_KEY)
    return acpreal.gemini_settings(home)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    return ws


def commander(*replies: Reply) -> ScriptedProvider:
    return ScriptedProvider({"commander": list(replies)})


def room_team(gemini: AgentDef) -> Team:
    return Team(commander=AgentDef(name="commander", model="scripted"), agents=[gemini])


def dispatch(task: str) -> Reply:
    return Reply(calls=[("dispatch_to", {"agent": "gemini", "task": task})])


def problem(vendor: acpreal.Vendor, rec: Recorder) -> str:
    notes = [e.text for e in rec.of(MessageEvent) if e.kind in ("notice", "error")]
    results = [e.result[:500] for e in rec.of(ToolEnd)]
    return f"{vendor.seen()}; notes: {notes[-5:]}; tool results: {results}"


async def test_gemini_as_a_member_reports_to_the_commander(jailed: Path, vendor: acpreal.Vendor, store: Store,
                                                           user: Path, workspace: Path) -> None:
    vendor.replies.append(fakegemini.reply("The notes", " hold three", " lines."))
    tag = uuid.uuid4().hex
    provider = commander(dispatch("How many lines do the notes hold?"),
                         Reply(say="Gemini counted them.", sees="The notes hold three lines."))
    rec = Recorder()
    gemini = member(jailed, vendor, tag, home_files=["~/.gemini/settings.json"])
    with trio.fail_after(60):
        async with Room.create(store, room_team(gemini), lambda model: (provider, "scripted"), workspace=workspace,
                               on_event=rec) as room:
            await room.post("Count the lines of the notes.")
            await room.idle()
    why = problem(vendor, rec)
    deltas = [e.text for e in rec.of(TextDeltaEvent) if e.agent == "gemini" and e.text]
    assert deltas == ["The notes", " hold three", " lines."], why  # streamed, one event per chunk, in order
    said = [e for e in rec.of(MessageEvent) if e.author == "gemini" and e.kind == "text"]
    assert [e.text for e in said] == ["The notes hold three lines."], why
    report = next(e for e in rec.of(ToolEnd) if e.name == "dispatch_to")
    assert not report.is_error and report.result.endswith("The notes hold three lines."), report.result
    assert [t.status for t in room.ledger.tasks.values()] == ["done"]
    assert [e.text for e in rec.of(MessageEvent) if e.author == "commander" and e.kind == "text"] == \
        ["Gemini counted them."]

    # The task reached the model through the room's session prompt, with the key `acp.env` took from the
    # user's variable, and nothing left the machine: the user's settings.json kept the usage statistics home.
    assert [r["path"] for r in vendor.requests] == [STREAMED], why
    call = vendor.requests[0]
    assert call["headers"]["x-goog-api-key"] == acpreal.DUMMY_GEMINI_KEY
    asked = json.dumps(fakegemini.said(call))
    assert "How many lines do the notes hold?" in asked and "gemini" in asked, asked
    assert vendor.tunnels == []
    assert tagged(tag) == [], "a process of the agent outlived the room"


@pytest.mark.parametrize("trusted", [False, True], ids=["untrusted", "trusted"])
async def test_a_workspaces_hook_runs_only_where_the_user_trusts_the_folder(
        jailed: Path, vendor: acpreal.Vendor, store: Store, user: Path, workspace: Path, trusted: bool) -> None:
    # Gemini CLI takes hooks from a workspace's .gemini/settings.json, and runs them only in a folder it trusts:
    # one the trustedFolders.json in its HOME names (the room's private HOME holds none) or, as here, by the
    # user's own GEMINI_CLI_TRUST_WORKSPACE in `acp.env`. The trusted run shows the hook is one it would run.
    hook = {"type": "command", "command": f"touch {workspace / 'hooked'}"}
    (workspace / ".gemini").mkdir()
    (workspace / ".gemini" / "settings.json").write_text(json.dumps({"hooks": {"BeforeAgent": [{"hooks": [hook]}]}}))
    vendor.replies.append(fakegemini.reply("Done."))
    tag = uuid.uuid4().hex
    provider = commander(dispatch("Say done."), Reply(say="Fine.", sees="Done."))
    rec = Recorder()
    gemini = member(jailed, vendor, tag, home_files=["~/.gemini/settings.json"])
    assert gemini.acp is not None
    if trusted:
        gemini.acp.env["GEMINI_CLI_TRUST_WORKSPACE"] = "true"
    with trio.fail_after(60):
        async with Room.create(store, room_team(gemini), lambda model: (provider, "scripted"), workspace=workspace,
                               on_event=rec) as room:
            await room.post("Check the hooks.")
            await room.idle()
    why = problem(vendor, rec)
    report = next(e for e in rec.of(ToolEnd) if e.name == "dispatch_to")
    assert not report.is_error and report.result.endswith("Done."), why
    assert (workspace / "hooked").exists() == trusted, \
        f"the workspace's hook {'did not run in a trusted' if trusted else 'ran in an untrusted'} folder"
    assert vendor.tunnels == [] and tagged(tag) == []


async def test_a_stop_during_a_long_reply_cancels_at_once_and_leaves_no_process(
        jailed: Path, vendor: acpreal.Vendor, store: Store, user: Path, workspace: Path) -> None:
    # The reply's first piece, then a silence far longer than the test: only the stop ends this task.
    vendor.replies.append(fakegemini.stalled("Working on it", " and more", seconds=120))
    tag = uuid.uuid4().hex
    provider = commander(dispatch("Write a long essay."))
    rec = Recorder()
    gemini = member(jailed, vendor, tag, home_files=["~/.gemini/settings.json"])
    with trio.fail_after(60):
        async with Room.create(store, room_team(gemini), lambda model: (provider, "scripted"), workspace=workspace,
                               on_event=rec) as room:
            await room.post("Start the essay.")
            while not any(e.agent == "gemini" and e.text == "Working on it" for e in rec.of(TextDeltaEvent)):
                await trio.sleep(0.01)
            assert tagged(tag), "the agent's processes are not found by their tag"
            stop_at = time.perf_counter()
            await room.stop()
            took = next(t for t, e in rec.events if isinstance(e, Cancelled)) - stop_at
            assert took < 0.1, f"stop -> cancelled took {took * 1000:.0f} ms"
            assert [t.status for t in room.ledger.tasks.values()] == ["cancelled"], problem(vendor, rec)
            assert not room.busy
        closed = time.perf_counter() - stop_at
    left = {pid: Path(f"/proc/{pid}/cmdline").read_bytes()[:200] for pid in tagged(tag)}
    assert not left, f"a process of the agent outlived the room: {left}"
    assert closed < 10, f"the room took {closed:.1f} s to close after the stop"
    assert not [e for e in rec.of(MessageEvent) if e.author == "gemini" and e.kind == "text"]

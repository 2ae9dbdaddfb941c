"""A second real coding-agent CLI, Codex through Zed's ACP adapter, its model calls served by a loopback Responses
API, no API key: first over raw JSON-RPC lines, then as a room member through the project's own client, in the
sandbox (its report, with its config.toml from the user's HOME and not the workspace's, and a stop mid-reply).

Skipped, saying why, where npm is missing, the one-time npm install cannot run or brings no build for this machine,
or (the room's tests) bubblewrap is missing.
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
from tests import acpreal, fakeresponses
from tests.test_acp_realcli import CAPABILITIES, PROMPT, TAG, Lines, Recorder, tagged

KEY_VAR = "ORCHESTRATOR_TEST_CODEX_KEY"  # the user's variable that `acp.env` names with ${...}


@pytest.fixture(scope="module")
def binary() -> Path:
    try:
        return acpreal.install(adapter=acpreal.codex())
    except acpreal.Unavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def vendor() -> Iterator[acpreal.Vendor]:
    server = acpreal.Vendor()
    with server:
        yield server


async def test_codex_answers_a_prompt_over_acp(binary: Path, vendor: acpreal.Vendor, tmp_path: Path) -> None:
    vendor.replies.append(fakeresponses.reply("hello from", " codex"))
    spec = acpreal.codex_agent(binary, vendor.url, tmp_path / "home")
    work = tmp_path / "work"
    work.mkdir()
    stderr = tmp_path / "agent.stderr"
    with trio.move_on_after(60) as clock, open(stderr, "wb") as errors:
        proc = await trio.lowlevel.open_process(spec.argv, cwd=work, env=spec.env, stdin=subprocess.PIPE,
                                                stdout=subprocess.PIPE, stderr=errors, start_new_session=True)
        group = _Group(proc)  # Codex does not exit when its stdin closes: its group is ended
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
    assert (hello["agentInfo"]["name"], hello["agentInfo"]["version"]) == ("codex-acp", acpreal.CODEX_VERSION)
    # The fake's text and nothing else: a model Codex does not know would put a warning chunk first.
    assert lines.said(session) == "hello from codex", problem
    assert done["stopReason"] == "end_turn", problem

    # One model call, the prompt's, to the provider its config.toml names, with its key, and nothing sent past
    # the base URL meanwhile.
    assert [r["path"] for r in vendor.requests] == ["/v1/responses"], problem
    call = vendor.requests[0]
    assert call["headers"]["authorization"] == f"Bearer {acpreal.DUMMY_OPENAI_KEY}"
    assert call["json"]["model"] == acpreal.CODEX_MODEL and call["json"]["stream"] is True
    assert any(PROMPT in text for text in fakeresponses.said(call)), fakeresponses.said(call)
    assert tunnels == [], f"the CLI tried to reach {tunnels} besides the vendor"


# --- Codex as a room member, through the project's own client, in the sandbox ---

def member(binary: Path, vendor: acpreal.Vendor, tag: str, home_files: list[str] | None = None) -> AgentDef:
    """The member `codex`: the native adapter, the vendor as its proxy, its key from the user's KEY_VAR through
    `${...}`, and a tag that finds every process of it afterwards. Its config.toml reaches the private HOME the
    room gives it only through `home_files`."""
    env = {acpreal.CODEX_KEY: f"${{{KEY_VAR}}}", "HTTPS_PROXY": vendor.url, "HTTP_PROXY": vendor.url,
           "NO_PROXY": "127.0.0.1,localhost", TAG: tag}
    return AgentDef(name="codex", description="Codex",
                    acp=AcpSpec(command=[str(binary)], env=env, network=True, start_timeout=60,
                                home_files=home_files or []))


def notifying(folder: Path, vendor: acpreal.Vendor, marker: Path, model: str = acpreal.CODEX_MODEL) -> Path:
    """`folder`/.codex/config.toml for the vendor, with a `notify` command that creates `marker` after each turn
    of the agent; the file."""
    config = folder / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(acpreal.codex_config(vendor.url, {"model": model, "notify": ["touch", str(marker)]}))
    return config


@pytest.fixture
def jailed(binary: Path) -> Path:
    if which("bwrap") is None:
        pytest.skip("bubblewrap (bwrap) is not installed: the room runs external agents in its sandbox")
    return binary


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = await Store.open(tmp_path / "room.db")
    yield s
    await s.close()


@pytest.fixture
def workspace(tmp_path: Path, vendor: acpreal.Vendor, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A workspace with a hostile `.codex/config.toml`: another model, and a command run after every turn.

    Codex reads it only for a project the user's config.toml marks trusted, which this one is not, and takes no
    notify command from it even then."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # the member's private HOME is under it
    monkeypatch.setenv(KEY_VAR, acpreal.DUMMY_OPENAI_KEY)
    ws = tmp_path / "ws"
    notifying(ws, vendor, ws / "notified", model="gpt-5.2")
    (ws / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    return ws


def commander(*replies: Reply) -> ScriptedProvider:
    return ScriptedProvider({"commander": list(replies)})


def room_team(codex: AgentDef) -> Team:
    return Team(commander=AgentDef(name="commander", model="scripted"), agents=[codex])


def dispatch(task: str) -> Reply:
    return Reply(calls=[("dispatch_to", {"agent": "codex", "task": task})])


def problem(vendor: acpreal.Vendor, rec: Recorder) -> str:
    notes = [e.text for e in rec.of(MessageEvent) if e.kind in ("notice", "error")]
    results = [e.result[:500] for e in rec.of(ToolEnd)]
    return f"{vendor.seen()}; notes: {notes[-5:]}; tool results: {results}"


async def test_codex_as_a_member_reports_to_the_commander(jailed: Path, vendor: acpreal.Vendor, store: Store,
                                                          workspace: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    vendor.replies.append(fakeresponses.reply("The notes", " hold three", " lines."))
    tag = uuid.uuid4().hex
    provider = commander(dispatch("How many lines do the notes hold?"),
                         Reply(say="Codex counted them.", sees="The notes hold three lines."))
    # The user's own config.toml, which the user gives the agent (`home_files`, from the user's HOME, as a team
    # file names it): it names the vendor, and its notify command runs.
    user = tmp_path / "user"
    notifying(user, vendor, workspace / "user-notified")
    monkeypatch.setenv("HOME", str(user))
    rec = Recorder()
    codex = member(jailed, vendor, tag, home_files=["~/.codex/config.toml"])
    with trio.fail_after(60):
        async with Room.create(store, room_team(codex), lambda model: (provider, "scripted"), workspace=workspace,
                               on_event=rec) as room:
            await room.post("Count the lines of the notes.")
            await room.idle()
            # Codex starts its notify command once the turn is over, which may be after it answered: waited for
            # while the agent still runs (the room's close ends its processes).
            with trio.move_on_after(10):
                while not (workspace / "user-notified").exists():
                    await trio.sleep(0.01)
    why = problem(vendor, rec)
    deltas = [e.text for e in rec.of(TextDeltaEvent) if e.agent == "codex" and e.text]
    assert deltas == ["The notes", " hold three", " lines."], why  # streamed, one event per chunk, in order
    said = [e for e in rec.of(MessageEvent) if e.author == "codex" and e.kind == "text"]
    assert [e.text for e in said] == ["The notes hold three lines."], why
    report = next(e for e in rec.of(ToolEnd) if e.name == "dispatch_to")
    assert not report.is_error and report.result.endswith("The notes hold three lines."), report.result
    assert [t.status for t in room.ledger.tasks.values()] == ["done"]
    assert [e.text for e in rec.of(MessageEvent) if e.author == "commander" and e.kind == "text"] == \
        ["Codex counted them."]

    # The task reached the model through the room's session prompt, with the user's model and the key `acp.env`
    # took from the user's variable, and nothing left the machine.
    assert [r["path"] for r in vendor.requests] == ["/v1/responses"], why
    call = vendor.requests[0]
    assert call["headers"]["authorization"] == f"Bearer {acpreal.DUMMY_OPENAI_KEY}"
    assert call["json"]["model"] == acpreal.CODEX_MODEL, "the workspace's config.toml chose the model"
    asked = json.dumps(fakeresponses.said(call))
    assert "How many lines do the notes hold?" in asked and "codex" in asked, asked
    assert vendor.tunnels == []
    # The workspace's notify did not run: its config is the workspace's, not the user's, whose notify ran.
    assert (workspace / "user-notified").exists(), "the notify command of the user's own config.toml did not run"
    assert not (workspace / "notified").exists(), "a notify command in the workspace's .codex/config.toml ran"
    assert tagged(tag) == [], "a process of the agent outlived the room"


async def test_codex_on_its_own_openai_provider_is_logged_in_with_the_key_acp_env_gives(
        jailed: Path, vendor: acpreal.Vendor, store: Store, workspace: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # codex-acp's built-in provider refuses session/new until the client sends `authenticate` with a way to log
    # in it offers: here by OPENAI_API_KEY, which acp.env gives; its config.toml only moves that provider's
    # address to the vendor.
    vendor.replies.append(fakeresponses.reply("Logged in", " and done."))
    user = tmp_path / "user"
    (user / ".codex").mkdir(parents=True)
    (user / ".codex" / "config.toml").write_text(
        f"model = {json.dumps(acpreal.CODEX_MODEL)}\nopenai_base_url = {json.dumps(vendor.url + '/v1')}\n")
    monkeypatch.setenv("HOME", str(user))
    tag = uuid.uuid4().hex
    codex = member(jailed, vendor, tag, home_files=["~/.codex/config.toml"])
    assert codex.acp is not None
    codex.acp.env = {("OPENAI_API_KEY" if k == acpreal.CODEX_KEY else k): v for k, v in codex.acp.env.items()}
    provider = commander(dispatch("Say you are logged in."), Reply(say="Fine.", sees="Logged in and done."))
    rec = Recorder()
    with trio.fail_after(60):
        async with Room.create(store, room_team(codex), lambda model: (provider, "scripted"), workspace=workspace,
                               on_event=rec) as room:
            await room.post("Check the login.")
            await room.idle()
    why = problem(vendor, rec)
    report = next(e for e in rec.of(ToolEnd) if e.name == "dispatch_to")
    assert not report.is_error and report.result.endswith("Logged in and done."), why
    assert [r["path"] for r in vendor.requests] == ["/v1/responses"], why
    assert vendor.requests[0]["headers"]["authorization"] == f"Bearer {acpreal.DUMMY_OPENAI_KEY}"
    assert vendor.tunnels == [] and tagged(tag) == []


async def test_a_stop_during_a_long_reply_cancels_at_once_and_leaves_no_process(
        jailed: Path, vendor: acpreal.Vendor, store: Store, workspace: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The reply's first piece, then a silence far longer than the test: only the stop ends this task.
    vendor.replies.append(fakeresponses.stalled("Working on it", " and more", seconds=120))
    user = tmp_path / "user"
    (user / ".codex").mkdir(parents=True)
    (user / ".codex" / "config.toml").write_text(acpreal.codex_config(vendor.url))
    monkeypatch.setenv("HOME", str(user))
    tag = uuid.uuid4().hex
    provider = commander(dispatch("Write a long essay."))
    rec = Recorder()
    codex = member(jailed, vendor, tag, home_files=["~/.codex/config.toml"])
    with trio.fail_after(60):
        async with Room.create(store, room_team(codex), lambda model: (provider, "scripted"), workspace=workspace,
                               on_event=rec) as room:
            await room.post("Start the essay.")
            while not any(e.agent == "codex" and e.text == "Working on it" for e in rec.of(TextDeltaEvent)):
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
    assert not [e for e in rec.of(MessageEvent) if e.author == "codex" and e.kind == "text"]

"""A real coding-agent CLI (Claude Code through Zed's ACP adapter), its model calls served by a loopback vendor,
no API key: first over raw JSON-RPC lines, then as a room member through the project's own client, in the sandbox
(its report, a stop, its file reads and writes through the room, a workspace's hooks not run).

Skipped, saying why, where node and npm are missing, the one-time npm install cannot run, or (the room's tests)
bubblewrap is missing.
"""
from __future__ import annotations

import io
import json
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from shutil import which
from typing import Any

import pytest
import trio

from orchestrator.core.events import Cancelled, Confirm, Event, MessageEvent, TextDeltaEvent, ToolEnd
from orchestrator.providers.scripted import Reply, ScriptedProvider
from orchestrator.room.room import Room
from orchestrator.store.db import Store
from orchestrator.team.schema import AcpSpec, AgentDef, Team
from orchestrator.tools.process import KILL_GRACE, _Group
from tests import acpreal
from tests.fakeserver import Reply as Served
from tests.test_provider_anthropic import stream, text_block, tool_block

PROMPT = "Say hello, please."
CAPABILITIES = {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}


@pytest.fixture(scope="module")
def entry() -> Path:
    try:
        return acpreal.install()
    except acpreal.Unavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def vendor() -> Iterator[acpreal.Vendor]:
    server = acpreal.Vendor()
    with server:
        yield server


class RoomVendor(acpreal.Vendor):
    """The vendor as a member's Claude Code sees it: with MCP servers in its session (the room's bridge) it
    also counts its tools' tokens and probes with a one-token haiku call; those side calls are answered
    here (and recorded), and only the streamed calls take the scripted replies, in order."""

    def __init__(self) -> None:
        super().__init__()
        served = self._httpd.RequestHandlerClass
        self.side: list[str] = []
        side = self.side

        class Handler(served):  # type: ignore[misc, valid-type]  # FakeServer builds its handler per server
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))  # type: ignore[has-type]
                asked = json.loads(body) if body else {}
                answer: dict[str, Any]
                if "/count_tokens" in self.path:
                    answer = {"input_tokens": 100}
                elif not asked.get("stream"):
                    answer = {"id": "msg_side", "type": "message", "role": "assistant", "model": asked.get("model"),
                              "content": [{"type": "text", "text": "ok"}], "stop_reason": "max_tokens",
                              "stop_sequence": None, "usage": {"input_tokens": 100, "output_tokens": 1}}
                else:
                    self.rfile = io.BytesIO(body)
                    return super().do_POST()
                side.append(self.path)
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd.RequestHandlerClass = Handler


@pytest.fixture
def room_vendor() -> Iterator[RoomVendor]:
    server = RoomVendor()
    with server:
        yield server


class Lines:
    """The smallest ACP client: requests out, responses matched by id, the agent's notifications kept and
    any request of its own refused (this client offers no file system, terminal or permission answers)."""

    def __init__(self, proc: trio.Process):
        assert proc.stdin is not None and proc.stdout is not None  # opened with pipes
        self.send_stream, self.receive_stream = proc.stdin, proc.stdout
        self.buffer = b""
        self.ids = 0
        self.notifications: list[dict[str, Any]] = []

    async def send(self, message: dict[str, Any]) -> None:
        await self.send_stream.send_all(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.ids += 1
        await self.send({"id": self.ids, "method": method, "params": params})
        while True:
            message = await self.receive()
            if "method" not in message and message.get("id") == self.ids:
                assert "error" not in message, f"{method} failed: {message['error']}"
                result: dict[str, Any] = message["result"]
                return result
            if "method" in message and "id" in message:
                await self.send({"id": message["id"], "error": {"code": -32601, "message": "not offered"}})
            elif "method" in message:
                self.notifications.append(message)

    async def receive(self) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            chunk = await self.receive_stream.receive_some()
            if not chunk:
                raise AssertionError("the agent closed its stdout")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    def said(self, session: str) -> str:
        return "".join(n["params"]["update"]["content"]["text"] for n in self.notifications
                       if n["method"] == "session/update" and n["params"]["sessionId"] == session
                       and n["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
                       and n["params"]["update"]["content"]["type"] == "text")


async def test_claude_code_answers_a_prompt_over_acp(entry: Path, vendor: acpreal.Vendor, tmp_path: Path) -> None:
    vendor.replies.append(acpreal.reply("hello from", " claude"))
    spec = acpreal.agent(entry, vendor.url, tmp_path / "home")
    work = tmp_path / "work"
    work.mkdir()
    stderr = tmp_path / "agent.stderr"
    with trio.move_on_after(60) as clock, open(stderr, "wb") as errors:
        proc = await trio.lowlevel.open_process(spec.argv, cwd=work, env=spec.env, stdin=subprocess.PIPE,
                                                stdout=subprocess.PIPE, stderr=errors, start_new_session=True)
        group = _Group(proc)  # the adapter's Claude Code child is in its group and must end with it
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
    problem = f"the agent's stderr:\n{stderr.read_text()[-2000:]}\nthe vendor saw: {[r['path'] for r in vendor.requests]}"
    assert not clock.cancelled_caught, f"no answer within 60 s; {problem}"
    assert hello["protocolVersion"] == 1 and hello["agentInfo"]["name"] == acpreal.ADAPTER, problem
    assert lines.said(session) == "hello from claude", problem
    assert done["stopReason"] == "end_turn", problem

    # One model call, the prompt's, with the dummy key, and nothing sent past the base URL meanwhile.
    assert [r["path"] for r in vendor.requests] == ["/v1/messages?beta=true"], problem
    call = vendor.requests[0]
    assert call["headers"]["x-api-key"] == acpreal.DUMMY_KEY and call["json"]["stream"] is True
    asked = [b.get("text", "") for m in call["json"]["messages"] if m["role"] == "user"
             for b in (m["content"] if isinstance(m["content"], list) else [{"text": m["content"]}])]
    assert any(PROMPT in text for text in asked), asked
    assert tunnels == [], f"the CLI tried to reach {tunnels} besides the vendor"


# --- Claude Code as a room member, through the project's own client, in the sandbox ---

def member(entry: Path, vendor: acpreal.Vendor, home: Path, tag: str, home_files: list[str] | None = None) -> AgentDef:
    """The member `claude`: the adapter on node, its env the real-CLI one but for what the room sets itself
    (HOME and PATH), and a tag that finds every process of it afterwards. `home` is only acpreal's: the room
    gives the member its own private HOME."""
    spec = acpreal.agent(entry, vendor.url, home)
    own = {"HOME", "PATH", "LANG", "TERM"} | {k for k in spec.env if k.startswith("XDG_")}
    env = {k: v for k, v in spec.env.items() if k not in own} | {TAG: tag}
    return AgentDef(name="claude", description="Claude Code",
                    acp=AcpSpec(command=spec.argv, env=env, network=True, start_timeout=60,
                                home_files=home_files or []))


def hooked(folder: Path, marker: Path) -> Path:
    """`folder`/.claude/settings.json with a hook that creates `marker` at every prompt; the .claude folder."""
    hook = {"type": "command", "command": f"touch {marker}"}
    (folder / ".claude").mkdir(parents=True)
    (folder / ".claude" / "settings.json").write_text(json.dumps({"hooks": {"UserPromptSubmit": [{"hooks": [hook]}]}}))
    return folder / ".claude"


TAG = "ORCHESTRATOR_REALCLI_TAG"


def tagged(tag: str) -> list[int]:
    """The processes whose environment carries `tag` (the jail's, the adapter's and its Claude Code child's)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if f"{TAG}={tag}".encode() in (proc / "environ").read_bytes().split(b"\0"):
                    found.append(int(proc.name))
            except OSError:
                pass  # gone meanwhile, or not ours
    return found


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
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A workspace with a hostile `.claude/settings.json`: a hook that runs a shell command at every prompt."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # the member's private HOME is under it
    ws = tmp_path / "ws"
    hooked(ws, ws / "hooked")
    (ws / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    return ws


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[float, Event]] = []

    def __call__(self, ev: Event) -> None:
        self.events.append((time.perf_counter(), ev))

    def of(self, kind: type) -> list[Any]:
        return [e for _, e in self.events if isinstance(e, kind)]


def commander(*replies: Reply) -> ScriptedProvider:
    return ScriptedProvider({"commander": list(replies)})


def room_team(claude: AgentDef) -> Team:
    return Team(commander=AgentDef(name="commander", model="scripted"), agents=[claude])


def dispatch(task: str) -> Reply:
    return Reply(calls=[("dispatch_to", {"agent": "claude", "task": task})])


def problem(vendor: RoomVendor, rec: Recorder) -> str:
    notes = [e.text for e in rec.of(MessageEvent) if e.kind in ("notice", "error")]
    results = [e.result[:500] for e in rec.of(ToolEnd)]
    streamed = [r["path"] for r in vendor.requests if (r["json"] or {}).get("stream")]
    return (f"the vendor streamed {streamed} (besides {len(vendor.side)} side calls); notes: {notes[-5:]}; "
            f"tool results: {results}")


async def test_claude_code_as_a_member_reports_to_the_commander(jailed: Path, room_vendor: RoomVendor,
                                                                 store: Store, workspace: Path, tmp_path: Path) -> None:
    room_vendor.replies.append(acpreal.reply("The notes", " hold three", " lines."))
    tag = uuid.uuid4().hex
    provider = commander(dispatch("How many lines do the notes hold?"),
                         Reply(say="Claude counted them.", sees="The notes hold three lines."))
    # The user's own settings, which the user gives the agent (`home_files`), have a hook too: that one runs.
    mine = hooked(tmp_path / "user", workspace / "user-hooked")
    rec = Recorder()
    claude = member(jailed, room_vendor, tmp_path / "unused", tag, home_files=[str(mine)])
    with trio.fail_after(60):
        async with Room.create(store, room_team(claude), lambda model: (provider, "scripted"), workspace=workspace,
                               on_event=rec) as room:
            await room.post("Count the lines of the notes.")
            await room.idle()
    why = problem(room_vendor, rec)
    deltas = [e.text for e in rec.of(TextDeltaEvent) if e.agent == "claude" and e.text]
    assert deltas == ["The notes", " hold three", " lines."], why  # streamed, one event per chunk, in order
    said = [e for e in rec.of(MessageEvent) if e.author == "claude" and e.kind == "text"]
    assert [e.text for e in said] == ["The notes hold three lines."], why
    report = next(e for e in rec.of(ToolEnd) if e.name == "dispatch_to")
    assert not report.is_error and report.result.endswith("The notes hold three lines."), report.result
    assert [t.status for t in room.ledger.tasks.values()] == ["done"]
    assert [e.text for e in rec.of(MessageEvent) if e.author == "commander" and e.kind == "text"] == \
        ["Claude counted them."]

    # The task reached the model, through the room's session prompt, and nothing left the machine.
    asked = json.dumps(room_vendor.requests[-1]["json"]["messages"])
    assert "How many lines do the notes hold?" in asked and "claude" in asked
    assert room_vendor.tunnels == []
    # The workspace's hook did not run: its settings are the workspace's, not the user's, whose hook ran.
    assert (workspace / "user-hooked").exists(), "the hook in the user's own settings did not run"
    assert not (workspace / "hooked").exists(), "a hook in the workspace's .claude/settings.json ran"
    assert tagged(tag) == [], "a process of the agent outlived the room"


async def test_a_stop_during_a_long_reply_cancels_at_once_and_leaves_no_process(
        jailed: Path, room_vendor: RoomVendor, store: Store, workspace: Path, tmp_path: Path) -> None:
    # The reply's first piece, then a silence far longer than the test: only the stop ends this task.
    room_vendor.replies.append(Served(chunks=stream(*text_block(0, "Working on it", " and more")), stall=120, stall_at=3))
    tag = uuid.uuid4().hex
    provider = commander(dispatch("Write a long essay."))
    rec = Recorder()
    with trio.fail_after(60):
        async with Room.create(store, room_team(member(jailed, room_vendor, tmp_path / "unused", tag)),
                               lambda model: (provider, "scripted"), workspace=workspace, on_event=rec) as room:
            await room.post("Start the essay.")
            while not any(e.agent == "claude" and e.text == "Working on it" for e in rec.of(TextDeltaEvent)):
                await trio.sleep(0.01)
            assert tagged(tag), "the agent's processes are not found by their tag"
            stop_at = time.perf_counter()
            await room.stop()
            took = next(t for t, e in rec.events if isinstance(e, Cancelled)) - stop_at
            assert took < 0.1, f"stop -> cancelled took {took * 1000:.0f} ms"
            assert [t.status for t in room.ledger.tasks.values()] == ["cancelled"], problem(room_vendor, rec)
            assert not room.busy
        closed = time.perf_counter() - stop_at
    left = {pid: Path(f"/proc/{pid}/cmdline").read_bytes()[:200] for pid in tagged(tag)}
    assert not left, f"a process of the agent outlived the room: {left}"
    assert closed < 10, f"the room took {closed:.1f} s to close after the stop"
    assert not [e for e in rec.of(MessageEvent) if e.author == "claude" and e.kind == "text"]


async def test_claude_code_reads_and_writes_through_the_room(jailed: Path, room_vendor: RoomVendor, store: Store,
                                                            workspace: Path, tmp_path: Path) -> None:
    # Claude Code's Read and Write, offered by the adapter as its own MCP tools since this client reads and
    # writes files: the adapter asks the client's fs/read_text_file and fs/write_text_file (the room's file
    # tools), and asks session/request_permission before a write (the room's question).
    notes = workspace / "notes.txt"
    read = tool_block(0, "toolu_01", "mcp__acp__Read", json.dumps({"file_path": str(notes)}))
    write = tool_block(0, "toolu_02", "mcp__acp__Write", json.dumps({"file_path": str(notes), "content": "ALPHA\n"}))
    room_vendor.replies += [Served(chunks=stream(*read, stop="tool_use")),
                            Served(chunks=stream(*write, stop="tool_use")), acpreal.reply("Rewrote the notes.")]
    tag = uuid.uuid4().hex
    provider = commander(dispatch("Shout the first line of notes.txt."), Reply(say="Done.", sees="Rewrote the notes."))
    rec = Recorder()
    with trio.fail_after(60):
        async with Room.create(store, room_team(member(jailed, room_vendor, tmp_path / "unused", tag)),
                               lambda model: (provider, "scripted"), workspace=workspace, on_event=rec,
                               can_confirm=True) as room:
            await room.post("Fix the notes.")
            while await room.question_or_idle():
                room.answer("once")
            seen = room._tool_session.reads.seen("claude", notes)
    why = problem(room_vendor, rec)
    assert seen is not None, f"the read did not go through the room's read ledger; {why}"
    asked = rec.of(Confirm)
    assert [(q.agent, q.category) for q in asked] == [("claude", "acp:other")], why
    assert "notes.txt" in asked[0].summary, asked[0].summary
    assert notes.read_text() == "ALPHA\n", why  # written by the room's write_file, after the read
    said = [e.text for e in rec.of(MessageEvent) if e.author == "claude" and e.kind == "text"]
    assert said == ["Rewrote the notes."], why
    # The file's text went back to the model as the Read's result.
    streamed = [r for r in room_vendor.requests if r["json"].get("stream")]
    results = [b for m in streamed[1]["json"]["messages"] if isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "tool_result"]
    assert results and "beta" in json.dumps(results), results
    notes_kept = [m for m in await store.load(room.id) if m.author == "claude" and m.kind == "notice"]
    calls = [m.text for m in notes_kept if m.text.startswith("[tool]")]
    assert any("notes.txt" in c for c in calls), calls  # its tool calls, noted in its own partition only
    assert all(m.visible_to == ["claude"] for m in notes_kept)
    assert tagged(tag) == []

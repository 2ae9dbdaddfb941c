"""The ACP client against a real agent process (tests/acpdata/agent.py, made with the official SDK): streaming,
the room's hold on files, terminals and permissions, cancel and close, and each way a start can fail."""
from __future__ import annotations

import os
import sys
import time
import uuid
from pathlib import Path

import pytest
import trio

from orchestrator.acp.client import AcpError, AcpStartError, Update, connect
from orchestrator.team.schema import AcpSpec
from orchestrator.tools.jail import Settings, backend
from orchestrator.tools.session import ToolSession

AGENT = Path(__file__).parent / "acpdata" / "agent.py"
MCP_SERVER = Path(__file__).parent / "mcpdata" / "server.py"
BWRAP = backend().unavailable()
# Starting Python with pydantic and the SDK takes a while on a loaded machine; the bound is for a hang.
START = 60.0


def agent_spec(*extra: str, **kw) -> AcpSpec:
    return AcpSpec(command=[sys.executable, str(AGENT), *extra], start_timeout=kw.pop("start_timeout", START), **kw)


class Host:
    agent = "ext"

    def __init__(self, workspace: Path, answer: str | None = "allow_once", **session):
        self.session = ToolSession(workspace, **session)
        self.answer = answer
        self.asked: list[tuple[str, str, list[dict]]] = []

    async def permission(self, title: str, kind: str, options: list[dict]) -> str | None:
        self.asked.append((title, kind, options))
        return self.answer


class Collect:
    def __init__(self, marker: str | None = None):
        self.updates: list[Update] = []
        self.marker = marker
        self.seen = trio.Event()

    async def __call__(self, update: Update) -> None:
        self.updates.append(update)
        if self.marker and self.marker in update.text:
            self.seen.set()

    def text(self) -> str:
        return "".join(u.text for u in self.updates if u.kind == "text")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("one\ntwo\nthree\n")
    return root


async def test_streamed_text_reaches_the_callback_in_order(ws: Path):
    chunks = [f"c{i}" for i in range(60)]
    got = Collect()
    async with connect(agent_spec(), Host(ws), cwd=ws) as conn:
        assert (conn.info.name, conn.info.version, conn.info.protocol_version) == ("acp-test-agent", "1.0", 1)
        assert conn.info.load_session
        session = await conn.new_session(ws, [])
        stop = await conn.prompt(session, "think: planning\nplan: first|second\nsay: " + "|".join(chunks), got)
    assert stop == "end_turn"
    assert [u.text for u in got.updates if u.kind == "text"] == chunks
    assert [(u.kind, u.text) for u in got.updates[:2]] == [("thought", "planning"),
                                                          ("plan", "[pending] first\n[pending] second")]
    assert conn.closed.is_set()


async def test_files_go_through_the_path_sandbox_and_read_before_write(ws: Path, tmp_path: Path):
    outside = tmp_path / "secret.txt"
    outside.write_text("not for agents")
    got = Collect()
    async with connect(agent_spec(), Host(ws), cwd=ws) as conn:
        session = await conn.new_session(ws, [])
        await conn.prompt(session, f"read: {outside}\nwrite: src/app.py = blind\nread: src/app.py 2 1\n"
                                   f"write: src/app.py = seen\nwrite: src/new.txt = fresh", got)
        report = got.text()
        assert f"read of {outside} refused:" in report and "outside the workspace" in report
        assert "write of src/app.py refused:" in report and "read it first" in report
        assert "read 1 lines of src/app.py: 'two\\n'" in report
        assert (ws / "src" / "app.py").read_text() == "seen"
        assert (ws / "src" / "new.txt").read_text() == "fresh"
        assert [u.text for u in got.updates if u.kind == "tool"][:2] == [
            f"read_file {outside} (in_progress)", f"read_file {outside} (failed)"]

        (ws / "src" / "app.py").write_text("changed by someone else")
        got = Collect()
        await conn.prompt(session, "write: src/app.py = mine", got)
        assert "stale: it changed since you read it" in got.text()
        assert (ws / "src" / "app.py").read_text() == "changed by someone else"


@pytest.mark.skipif(BWRAP is not None, reason=f"no sandbox here: {BWRAP}")
async def test_a_terminal_command_runs_in_the_jail(ws: Path, tmp_path: Path):
    beyond = tmp_path / "beyond"
    beyond.mkdir()

    async def allow(agent: str, category: str, summary: str) -> str:
        return "once"  # let every risk through: the jail, not the question, must stop the write

    got = Collect()
    async with trio.open_nursery() as nursery:
        host = Host(ws, ask=allow, spawn=nursery.start_soon)
        async with connect(agent_spec(), host, cwd=ws) as conn:
            session = await conn.new_session(ws, [])
            await conn.prompt(session, f"run: sh -c 'echo inside > made.txt && cat made.txt'\n"
                                       f"run: sh -c 'echo out > {beyond}/escaped.txt'", got)
    report = got.text()
    assert "ran \"sh -c 'echo inside > made.txt && cat made.txt'\": exit 0 signal None; output: 'inside" in report
    assert (ws / "made.txt").read_text() == "inside\n"
    escape = report.split("escaped.txt'\": ", 1)[1]
    assert escape.startswith("exit ") and not escape.startswith("exit 0") and "Directory nonexistent" in escape
    assert not (beyond / "escaped.txt").exists()


async def test_a_terminal_without_a_room_is_refused_in_one_line(ws: Path):
    got = Collect()
    async with connect(agent_spec(), Host(ws), cwd=ws) as conn:
        session = await conn.new_session(ws, [])
        await conn.prompt(session, "run: echo hi", got)
    assert "run of 'echo hi' refused: background jobs need a room" in got.text()


@pytest.mark.parametrize(("answer", "said"), [("yes-always", "selected yes-always"), ("reject_once", "selected no"),
                                               (None, "cancelled"), ("something-not-offered", "cancelled")])
async def test_a_permission_request_is_answered_by_the_host(ws: Path, answer: str | None, said: str):
    host, got = Host(ws, answer=answer), Collect()
    async with connect(agent_spec(), host, cwd=ws) as conn:
        session = await conn.new_session(ws, [])
        await conn.prompt(session, "ask: delete the build folder", got)
    assert f"permission for 'delete the build folder': {said}" in got.text()
    ((title, kind, options),) = host.asked
    assert (title, kind) == ("delete the build folder", "execute")
    assert [(o["optionId"], o["kind"]) for o in options] == [
        ("yes-once", "allow_once"), ("yes-always", "allow_always"), ("no", "reject_once")]


async def test_cancel_during_a_long_prompt_returns_cancelled_at_once(ws: Path):
    took = []
    async with connect(agent_spec(), Host(ws), cwd=ws) as conn:
        session = await conn.new_session(ws, [])
        for _ in range(5):
            got = Collect("sleeping")
            stop: list[str] = []
            async with trio.open_nursery() as nursery:
                async def ask() -> None:
                    stop.append(await conn.prompt(session, "sleep: 60", got))
                nursery.start_soon(ask)
                await got.seen.wait()
                start = time.perf_counter()
                await conn.cancel(session)
            took.append(time.perf_counter() - start)
            assert stop == ["cancelled"]
        assert "this session has had 6 prompts" in await _ask(conn, session, "history:")
    print(f"cancel to 'cancelled': {', '.join(f'{t * 1000:.1f}' for t in took)} ms")
    assert max(took) < 0.1


async def _ask(conn, session: str, text: str) -> str:
    got = Collect()
    assert await conn.prompt(session, text, got) == "end_turn"
    return got.text()


def _running(tag: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if tag.encode() in f.read():
                    found.append(int(pid))
        except (OSError, ValueError):
            continue
    return found


async def test_an_agent_that_ignores_cancel_is_killed_at_close(ws: Path):
    tag = uuid.uuid4().hex
    got = Collect("not listening")
    async with trio.open_nursery() as nursery:
        async with connect(agent_spec("--tag", tag), Host(ws), cwd=ws) as conn:
            session = await conn.new_session(ws, [])
            stop: list[str] = []

            async def ask() -> None:
                stop.append(await conn.prompt(session, "stubborn:", got))
            nursery.start_soon(ask)
            await got.seen.wait()
            assert _running(tag)
            await conn.cancel(session)
            with trio.move_on_after(0.5):
                await conn.closed.wait()
            assert stop == [] and not conn.closed.is_set()  # it did not answer, and it is still there
            nursery.cancel_scope.cancel()  # the room stops the turn, then closes the member
            start = time.perf_counter()
    took = time.perf_counter() - start
    print(f"close of an agent that ignores cancel, stdin's end and TERM: {took:.2f} s")
    assert not _running(tag)
    assert took < 5


async def test_a_crash_mid_prompt_is_one_clear_error_and_closes(ws: Path):
    got = Collect()
    async with connect(agent_spec(), Host(ws), cwd=ws) as conn:
        session = await conn.new_session(ws, [])
        with pytest.raises(AcpError) as err:
            await conn.prompt(session, "say: working\ncrash: 3", got)
        assert conn.closed.is_set()
        assert str(err.value) == "agent ext exited with code 3: test agent: crashing as told"
        assert conn.why == "exited with code 3: test agent: crashing as told"
        assert got.text().startswith("working")
        with pytest.raises(AcpError, match="exited with code 3"):
            await conn.prompt(session, "say: again", got)


async def test_a_session_survives_a_restart_through_session_load(ws: Path, tmp_path: Path):
    home = tmp_path / "kept-home"
    async with connect(agent_spec(), Host(ws), cwd=ws, home=home) as conn:
        session = await conn.new_session(ws, [])
        assert "has had 1 prompts" in await _ask(conn, session, "history:")
        assert "has had 2 prompts" in await _ask(conn, session, "history:")
    async with connect(agent_spec(), Host(ws), cwd=ws, home=home) as conn:
        assert await conn.load_session(session, ws, [])
        assert "has had 3 prompts" in await _ask(conn, session, "history:")
        assert not await conn.load_session("no-such-session", ws, [])
    assert home.is_dir()  # the caller's, kept


async def test_the_agent_reaches_an_mcp_server_it_is_given(ws: Path):
    server = {"name": "dictionary", "command": sys.executable, "args": [str(MCP_SERVER)], "env": []}
    async with connect(agent_spec(), Host(ws), cwd=ws, reach=[MCP_SERVER.parent]) as conn:
        session = await conn.new_session(ws, [server])
        said = await _ask(conn, session, 'mcp: lookup {"word": "trio"}')
    assert "dictionary.lookup: a structured concurrency library" in said


async def test_a_private_home_holds_only_the_named_files(ws: Path, tmp_path: Path, monkeypatch):
    fake_home = tmp_path / "user"
    (fake_home / ".agentrc").parent.mkdir(parents=True)
    (fake_home / ".agentrc").write_text("token = 1")
    (fake_home / ".other-secret").write_text("no")
    monkeypatch.setenv("HOME", str(fake_home))
    async with connect(agent_spec(home_files=["~/.agentrc"]), Host(ws), cwd=ws) as conn:
        home = conn.home
        assert sorted(p.name for p in home.iterdir()) == [".agentrc"]
        session = await conn.new_session(ws, [])
        said = await _ask(conn, session, f"read: {home}/.agentrc")
        assert "refused" in said  # the agent's own HOME is its own, not a path the room's file tools serve
    assert not home.exists()


START_FAILURES = [
    (["no-such-agent-program"], {}, "agent ext: 'no-such-agent-program' was not found: install it, or fix "
                                    "`acp.command` (no-such-agent-program)"),
    ([sys.executable, "-c", "import sys; print('boom: no config file', file=sys.stderr); sys.exit(2)"], {},
     "exited at start with code 2: boom: no config file"),
    ([sys.executable, "-c", "print('Welcome to my chat bot!', flush=True); import time; time.sleep(60)"], {},
     "does not speak ACP: it printed 'Welcome to my chat bot!' where a JSON-RPC message belongs"),
    ([sys.executable, "-c", "import time; time.sleep(60)"], {"start_timeout": 1.0},
     "did not answer `initialize` within 1 s: it does not speak ACP, or starts slowly (raise `acp.start_timeout`)"),
]


@pytest.mark.parametrize(("command", "kw", "line"), START_FAILURES, ids=["missing", "exits", "not-acp", "silent"])
async def test_each_start_failure_is_one_line(ws: Path, command: list[str], kw: dict, line: str):
    start = time.perf_counter()
    with pytest.raises(AcpStartError) as err:
        async with connect(AcpSpec(command=command, start_timeout=kw.get("start_timeout", START)), Host(ws),
                           cwd=ws):
            pytest.fail("it started")
    message = str(err.value)
    assert line in message and "\n" not in message
    assert time.perf_counter() - start < 20  # none waits out the start timeout but the silent one


async def test_authentication_required_says_how_to_log_in(ws: Path):
    async with connect(agent_spec(env={"ACP_AGENT_AUTH": "required"}), Host(ws), cwd=ws) as conn:
        with pytest.raises(AcpStartError) as err:
            await conn.new_session(ws, [])
    assert str(err.value) == ("agent ext: authentication required (it offers: Log in): set its API key in `acp.env`, "
                              "or log in once with the agent's own command and list its login file in `acp.home_files`")


async def test_an_agent_that_takes_a_key_is_logged_in_with_the_one_acp_env_gives(ws: Path):
    # Codex's adapter: session/new is refused until `authenticate` names its way by an environment variable
    async with connect(agent_spec(env={"ACP_AGENT_AUTH": "key", "TEST_AGENT_KEY": "k3y"}), Host(ws), cwd=ws) as conn:
        session = await conn.new_session(ws, [])
        assert "You said: hi" in await _ask(conn, session, "hi")
    # without the variable in acp.env (set in the user's environment is not enough) the line names it
    async with connect(agent_spec(env={"ACP_AGENT_AUTH": "key"}), Host(ws), cwd=ws) as conn:
        with pytest.raises(AcpStartError) as err:
            await conn.new_session(ws, [])
    assert "set TEST_AGENT_KEY in `acp.env`" in str(err.value)
    # a wrong key: authenticate itself is refused, in the same one line
    async with connect(agent_spec(env={"ACP_AGENT_AUTH": "key", "TEST_AGENT_KEY": "wrong"}), Host(ws), cwd=ws) as conn:
        with pytest.raises(AcpStartError, match="authentication required"):
            await conn.new_session(ws, [])


async def test_with_the_sandbox_off_the_user_is_asked_first(ws: Path):
    with pytest.raises(AcpStartError, match="the sandbox is off and the user did not allow running it unsandboxed"):
        async with connect(agent_spec(), Host(ws), cwd=ws, sandbox=Settings(enabled=False)):
            pytest.fail("it started")
    asked = []

    async def yes(agent: str, category: str, summary: str) -> str:
        asked.append((agent, category))
        return "once"

    async with connect(agent_spec(), Host(ws, ask=yes), cwd=ws, sandbox=Settings(enabled=False)) as conn:
        assert "You said: hi" in await _ask(conn, await conn.new_session(ws, []), "hi")
    assert asked == [("ext", "unsandboxed")]


async def test_without_bubblewrap_it_is_refused_as_the_bash_tool_refuses(ws: Path, monkeypatch):
    from orchestrator.acp import launch
    from orchestrator.tools.jail import Bubblewrap

    missing = Bubblewrap(None)
    monkeypatch.setattr(launch, "backend", lambda: missing)
    with pytest.raises(AcpStartError) as err:
        async with connect(agent_spec(), Host(ws), cwd=ws):
            pytest.fail("it started")
    assert str(err.value) == f"agent ext: not started: {missing.unavailable()}"


@pytest.mark.skipif(BWRAP is not None, reason=f"no sandbox here: {BWRAP}")
async def test_the_agent_process_itself_is_jailed(ws: Path, tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "notes.txt").write_text("private")
    mine = next((p for p in sorted(Path.home().iterdir()) if p.is_file()), outside / "notes.txt")  # the user's own
    async with connect(agent_spec(), Host(ws), cwd=ws) as conn:
        session = await conn.new_session(ws, [])
        said = await _ask(conn, session, f"peek: src/app.py\npeek: {outside}/notes.txt\npoke: made.txt = by agent\n"
                                         f"poke: {outside}/planted.txt = x\npeek: {mine}")
    assert "peeked at src/app.py: 'one\\ntwo\\nthree\\n'" in said
    assert f"peek at {outside}/notes.txt failed: No such file or directory" in said
    assert (ws / "made.txt").read_text() == "by agent"
    assert f"poke at {outside}/planted.txt failed" in said and not (outside / "planted.txt").exists()
    assert f"peek at {mine} failed" in said

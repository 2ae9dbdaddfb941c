"""The reverse bridge end to end: `python -m orchestrator bridge` run as an external agent runs it, driven by the
official MCP SDK's stdio client, reaching a room's skills, a real MCP connector and the knowledge base; its
credentials (wrong, revoked), its private folder, the hand back, and a call the agent cancels."""
from __future__ import annotations

import json
import os
import random
import shutil
import stat
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

pytest.importorskip("mcp", reason="the MCP extra is not installed: pip install -e '.[mcp]'")

from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

from orchestrator.acp import bridge as bridge_module  # noqa: E402
from orchestrator.acp.bridge import TOKEN_ENV, Bridge, Grant, RoomBridgeServices  # noqa: E402
from orchestrator.acp.jsonrpc import Peer  # noqa: E402
from orchestrator.mcplink.config import ServerConfig  # noqa: E402
from orchestrator.mcplink.servers import Hub, open_hub  # noqa: E402
from orchestrator.memory.knowledge import MemoryKnowledgeBase  # noqa: E402
from orchestrator.room.skills import RoomSkills  # noqa: E402
from orchestrator.skills.library import Root, discover  # noqa: E402
from orchestrator.team.schema import AgentDef, Team  # noqa: E402
from orchestrator.tools.jail import Settings, backend  # noqa: E402
from orchestrator.tools.session import Answer, ToolSession  # noqa: E402
from tests.kbdata import HashEmbedder, documents  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SERVER = str(REPO / "tests" / "mcpdata" / "server.py")


def skill(root: Path, name: str, description: str, body: str = "Steps.") -> Path:
    (root / name).mkdir(parents=True, exist_ok=True)
    (root / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n{body}\n")
    return root / name


class Asker:
    """The person in front of the room: answers each question with `answer`, and counts them."""

    def __init__(self, answer: Answer = "run"):
        self.answer, self.asked = answer, []

    async def __call__(self, agent: str, category: str, summary: str) -> Answer:
        self.asked.append((agent, category))
        return self.answer


class Room:
    """A room's parts as the bridge takes them, in a temp workspace."""

    def __init__(self, tmp: Path, session: ToolSession, hub: Hub | None, kb: MemoryKnowledgeBase | None):
        self.tmp, self.session, self.hub, self.kb = tmp, session, hub, kb

    async def services(self, servers: dict[str, ServerConfig] | None = None) -> RoomBridgeServices:
        roots = [Root("user", self.tmp / "skills"), Root("claude", self.tmp / "foreign", "untrusted")]
        library = await trio.to_thread.run_sync(discover, roots)
        team = Team(commander=AgentDef(name="commander", model="scripted"), skills="all",
                    agents=[AgentDef(name="claude", description="an external agent"),
                            AgentDef(name="codex", description="another one")])
        return RoomBridgeServices(RoomSkills(team, library), self.hub, servers or {}, self.kb, self.session)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "work").mkdir()
    style = skill(tmp_path / "skills", "house-style", "How we write code here.", "Use tabs. See references/guide.md.")
    (style / "references").mkdir()
    (style / "references" / "guide.md").write_text("The guide: tabs, always.\n")
    (style / "scripts").mkdir()
    (style / "scripts" / "hello.sh").write_text('echo "hello $1 from $(pwd)"\necho made > made.txt\n'
                                                'touch "$(dirname "$0")/touched" 2>/dev/null || echo "skill folder read-only"\n')
    (style / "scripts" / "nap.sh").write_text('sleep "$1"\necho "slept $1"\n')
    (style / "scripts" / "gate.sh").write_text('touch "$1.waiting"\nwhile [ ! -e "$1" ]; do sleep 0.05; done\n'
                                               'echo "through $1"\n')
    skill(tmp_path / "foreign", "foreign-trick", "FOREIGN-SKILL")
    (tmp_path / "secret.txt").write_text("not for agents")
    return tmp_path


def params(grant: Grant, token: str | None = None) -> StdioServerParameters:
    """The command line grant.server says, as the external agent would start it."""
    env = {e["name"]: e["value"] for e in grant.server["env"]}
    if token is not None:
        env[TOKEN_ENV] = token
    return StdioServerParameters(command=grant.server["command"], args=grant.server["args"], cwd=str(REPO),
                                 env={"PYTHONPATH": str(REPO), **env})


@asynccontextmanager
async def agent(grant: Grant) -> AsyncIterator[Client]:
    with open(os.devnull, "w") as errlog:
        async with Client(stdio_client(params(grant), errlog=errlog)) as client:
            yield client


async def call(client: Client, tool: str, /, **arguments: Any) -> tuple[str, bool]:
    result = await client.call_tool(tool, arguments)
    return "\n".join(c.text for c in result.content if c.type == "text"), bool(result.is_error)


async def names(client: Client) -> set[str]:
    return {t.name for t in (await client.list_tools()).tools}


async def relay_exit(grant: Grant, token: str) -> tuple[int, str]:
    """Run the relay with `token` and nothing on stdin: its exit code and stderr."""
    p = params(grant, token)
    done = await trio.run_process([p.command, *p.args], cwd=p.cwd, env={**os.environ, **(p.env or {})},
                                  stdin=b"", capture_stdout=True, capture_stderr=True, check=False)
    return done.returncode, done.stderr.decode()


async def test_an_agent_lists_reads_and_is_confined_to_its_skills(workspace):
    room = Room(workspace, ToolSession(workspace / "work"), None, None)
    async with Bridge.open(await room.services()) as bridge:
        async with agent(bridge.grant("claude", hand_back=None)) as client:
            offered = await names(client)
            assert {"list_skills", "read_skill", "read_skill_file", "run_skill_script", "list_connectors",
                    "call_connector"} <= offered
            assert "hand_back" not in offered and "search_knowledge" not in offered  # no callback, no kb
            listing, _ = await call(client, "list_skills")
            assert "house-style: How we write code here." in listing and "foreign-trick" not in listing
            text, error = await call(client, "read_skill", name="house-style")
            assert not error and "Use tabs." in text and "references/guide.md" in text and "scripts/hello.sh" in text
            text, error = await call(client, "read_skill_file", name="house-style", path="references/guide.md")
            assert (text, error) == ("The guide: tabs, always.\n", False)
            # the untrusted tier is the commander's only, as in the room
            text, error = await call(client, "read_skill", name="foreign-trick")
            assert error and "no skill named 'foreign-trick'" in text
            # nothing outside the skill's folder: not by `..`, not by an absolute path, not through a link
            for path in ("../../secret.txt", str(workspace / "secret.txt")):
                text, error = await call(client, "read_skill_file", name="house-style", path=path)
                assert error and "not for agents" not in text, text
            (workspace / "skills" / "house-style" / "out").symlink_to(workspace / "secret.txt")
            text, error = await call(client, "read_skill_file", name="house-style", path="out")
            assert error and "leads out" in text and "not for agents" not in text


async def test_a_skill_script_runs_in_the_jail(workspace):
    if why := await trio.to_thread.run_sync(backend().unavailable):
        pytest.skip(f"no sandbox here: {why}")
    asker = Asker("deny")
    room = Room(workspace, ToolSession(workspace / "work", ask=asker), None, None)
    async with Bridge.open(await room.services()) as bridge:
        async with agent(bridge.grant("claude")) as client:
            text, error = await call(client, "run_skill_script", name="house-style", script="scripts/hello.sh",
                                     args=["world"])
            assert not error, text
            assert f"hello world from {workspace / 'work'}" in text and "[exit code 0]" in text
            assert "skill folder read-only" in text  # readable in the jail, never writable
            assert (workspace / "work" / "made.txt").read_text() == "made\n"
            assert not (workspace / "skills" / "house-style" / "scripts" / "touched").exists()
            assert asker.asked == []  # contained: nothing to ask
            text, error = await call(client, "run_skill_script", name="house-style", script="../../secret.txt")
            assert error and "refused" in text


async def test_the_knowledge_base_is_searched(workspace):
    docs = documents()
    async with await MemoryKnowledgeBase.open(embedder=HashEmbedder()) as kb:
        for path in sorted(docs)[:12]:
            await kb.add_document(path, docs[path])
        first = sorted(docs)[0]
        word = next(w for w in docs[first].split() if len(w) > 8 and w.isalpha())
        room = Room(workspace, ToolSession(workspace / "work"), None, kb)
        async with Bridge.open(await room.services()) as bridge:
            async with agent(bridge.grant("claude")) as client:
                assert "search_knowledge" in await names(client)
                text, error = await call(client, "search_knowledge", query=word, k=3, mode="fts")
                assert not error and "passage" in text and first in text, text


async def test_a_connector_is_asked_once_per_agent_and_connector(workspace, tmp_path):
    servers = {"dict": ServerConfig(command=[sys.executable, SERVER, "normal"]),
               "closed": ServerConfig(command=[sys.executable, SERVER, "normal"], approval={"add": "deny"})}
    asker = Asker("run")
    async with open_hub(tmp_path / "mcplogs") as hub:
        room = Room(workspace, ToolSession(workspace / "work", ask=asker), hub, None)
        services = await room.services(servers)
        async with Bridge.open(services) as bridge:
            async with agent(bridge.grant("claude")) as claude, agent(bridge.grant("codex")) as codex:
                listing, _ = await call(claude, "list_connectors")
                assert "dict:" in listing and "closed:" in listing
                tools, _ = await call(claude, "list_connectors", server="dict")
                assert '"lookup"' in tools and '"inputSchema"' in tools
                for word in ("trio", "x"):
                    text, error = await call(claude, "call_connector", server="dict", tool="lookup",
                                             arguments={"word": word})
                    assert not error, text
                assert text == "no entry for 'x'"
                assert asker.asked == [("claude", "connector:dict")]  # "always allow": asked once
                text, error = await call(codex, "call_connector", server="dict", tool="add",
                                         arguments={"a": 2, "b": 3})
                assert not error and '"sum": 5' in text
                assert asker.asked == [("claude", "connector:dict"), ("codex", "connector:dict")]
                # the server's approval setting holds: a denied tool is refused unasked
                text, error = await call(claude, "call_connector", server="closed", tool="add",
                                         arguments={"a": 1, "b": 1})
                assert error and "denied by the `approval` setting" in text
                text, error = await call(claude, "call_connector", server="dict", tool="lookup",
                                         arguments={"word": 3})
                assert error and "invalid arguments" in text
                assert len(asker.asked) == 2
        # with nobody to answer, a connector's call does not run
        nobody = Room(workspace, ToolSession(workspace / "work"), hub, None)
        async with Bridge.open(await nobody.services(servers)) as bridge:
            async with agent(bridge.grant("claude")) as client:
                text, error = await call(client, "call_connector", server="dict", tool="lookup",
                                         arguments={"word": "trio"})
                assert error and "did not allow" in text


async def test_credentials_wrong_and_revoked_are_refused(workspace):
    room = Room(workspace, ToolSession(workspace / "work"), None, None)
    async with Bridge.open(await room.services()) as bridge:
        grant = bridge.grant("claude")
        code, said = await relay_exit(grant, "not-the-token")
        assert code == 1 and said.count("\n") == 1 and "unknown or was revoked" in said, said
        async with agent(grant) as client:
            assert "list_skills" in await names(client)
            grant.revoke()
            with pytest.raises(MCPError, match="(?i)closed"):  # the connection ends with the grant
                with trio.fail_after(10):
                    await client.list_tools()
        code, said = await relay_exit(grant, grant.token)
        assert code == 1 and "unknown or was revoked" in said
        # another grant of the same bridge still works
        async with agent(bridge.grant("claude")) as client:
            assert "list_skills" in await names(client)


async def test_the_first_line_must_be_the_credential_and_come_soon(workspace, monkeypatch):
    monkeypatch.setattr(bridge_module, "AUTH_SECONDS", 0.2)
    room = Room(workspace, ToolSession(workspace / "work"), None, None)
    async with Bridge.open(await room.services()) as bridge:
        grant = bridge.grant("claude")
        async with await trio.open_unix_socket(str(bridge.socket_path)) as silent:
            with trio.fail_after(10):
                assert (await silent.receive_some(512)).startswith(b"refused: ")
        async with await trio.open_unix_socket(str(bridge.socket_path)) as hasty:
            await hasty.send_all(grant.token.encode() + b'\n{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n')
            with trio.fail_after(10):
                assert (await hasty.receive_some(512)).startswith(b"refused: the first line")
        async with await trio.open_unix_socket(str(bridge.socket_path)) as garbled:
            await garbled.send_all(b"\xff\xfe token? \n")
            with trio.fail_after(10):
                assert (await garbled.receive_some(512)).startswith(b"refused: the credential is unknown")
        # the handshake answers a version it does not know with its newest
        async with await trio.open_unix_socket(str(bridge.socket_path)) as raw:
            await raw.send_all(grant.token.encode() + b"\n")
            assert await raw.receive_some(3) == b"ok\n"
            async with trio.open_nursery() as nursery:
                peer = Peer(raw, raw)
                await nursery.start(peer.serve)
                answer = await peer.request("initialize", {"protocolVersion": "1999-01-01", "capabilities": {},
                                                           "clientInfo": {"name": "t", "version": "0"}}, timeout=10)
                assert answer["protocolVersion"] == "2025-11-25" and "tools" in answer["capabilities"]
                await peer.aclose()
                nursery.cancel_scope.cancel()


async def test_the_folder_is_private_and_gone_after_close(workspace, monkeypatch):
    # a short runtime folder: a socket path over what sun_path holds would send the bridge elsewhere
    runtime = Path(tempfile.mkdtemp(prefix="run-"))
    try:
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
        room = Room(workspace, ToolSession(workspace / "work"), None, None)
        async with Bridge.open(await room.services()) as bridge:
            folder = bridge.folder
            assert folder.parent == runtime and stat.S_IMODE(folder.stat().st_mode) == 0o700
            assert stat.S_ISSOCK(bridge.socket_path.stat().st_mode)
            grant = bridge.grant("claude")
        assert not folder.exists()
        code, said = await relay_exit(grant, grant.token)
        assert code == 1 and "cannot reach the room's bridge" in said
        runtime.chmod(0o755)  # a runtime folder others may enter is not used
        async with Bridge.open(await room.services()) as bridge:
            assert bridge.folder.parent != runtime and stat.S_IMODE(bridge.folder.stat().st_mode) == 0o700
    finally:
        shutil.rmtree(runtime)


async def test_another_user_is_refused_even_when_the_folder_lets_them_in(workspace, tmp_path, monkeypatch):
    # The private folder keeps other users out; were it opened to them (a mistake, a bind mount), the kernel's
    # word on who connected (SO_PEERCRED) still refuses them, with the right credential in hand.
    if os.getuid() != 0:
        pytest.skip("runs another user's process: needs root (CI runs as root)")
    python = next((p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.access(p, os.X_OK)), None)
    if python is None:  # this venv's own interpreter may sit in a folder only root may enter
        pytest.skip("needs a system python3 that another user may run (/usr/bin/python3)")
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    room = Room(workspace, ToolSession(workspace / "work"), None, None)
    async with Bridge.open(await room.services()) as bridge:
        grant = bridge.grant("claude")
        opened = [f for f in (*reversed(bridge.folder.parents), bridge.folder)
                  if f.is_relative_to(tempfile.gettempdir()) and not f.stat().st_mode & 0o001]
        for folder in opened:
            folder.chmod(folder.stat().st_mode | 0o011)
        bridge.socket_path.chmod(0o666)
        # The bridge may refuse before the credential is sent (it need not read it): the send may then find the
        # socket closed, and the refusal is still there to read.
        code = ("import socket, sys\ns = socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\n"
                "try:\n    s.sendall(sys.argv[2].encode() + b'\\n')\nexcept BrokenPipeError:\n    pass\n"
                "print(s.recv(512).decode(errors='replace'))\n")
        try:
            done = await trio.run_process([python, "-c", code, str(bridge.socket_path), grant.token],
                                          capture_stdout=True, capture_stderr=True, check=False, user=65534,
                                          group=65534, extra_groups=[], cwd="/")
        finally:
            for folder in opened:
                folder.chmod(folder.stat().st_mode & ~0o011)
        assert done.returncode == 0, done.stderr.decode()
        assert done.stdout.decode().strip() == "refused: the connection is not from this user"
        async with agent(grant) as client:  # the same credential, from this user, is taken
            assert "list_skills" in await names(client)


async def test_hand_back_reaches_the_callback(workspace):
    notes: list[str | None] = []

    async def hand_back(note: str | None) -> None:
        notes.append(note)

    room = Room(workspace, ToolSession(workspace / "work"), None, None)
    async with Bridge.open(await room.services()) as bridge:
        async with agent(bridge.grant("claude", hand_back=hand_back)) as client:
            assert "hand_back" in await names(client)
            text, error = await call(client, "hand_back", note="the user is happy")
            assert not error and "handed the floor back" in text
            await call(client, "hand_back")
        async with agent(bridge.grant("codex")) as other:
            assert "hand_back" not in await names(other)
            with pytest.raises(MCPError, match="unknown tool"):  # the protocol's error for a tool not offered
                await call(other, "hand_back")
    assert notes == ["the user is happy", None]


async def test_with_the_sandbox_off_a_script_asks_first(workspace):
    asker = Asker("deny")
    session = ToolSession(workspace / "work", ask=asker, sandbox=Settings(enabled=False))
    room = Room(workspace, session, None, None)
    async with Bridge.open(await room.services()) as bridge:
        async with agent(bridge.grant("claude")) as client:
            text, error = await call(client, "run_skill_script", name="house-style", script="scripts/hello.sh")
    assert error and "denied" in text and asker.asked == [("claude", "unsandboxed")]
    assert not (workspace / "work" / "made.txt").exists()


def naps() -> str:
    """A sleep length no other process has: its sleep is found by its command line, inside the jail or not."""
    return f"{300 + random.random() * 100:.6f}"


def sleeping(length: str) -> bool:
    wanted = b"sleep\0" + length.encode() + b"\0"
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if f.read() == wanted:
                    return True
        except OSError:
            pass  # not a process, or gone meanwhile
    return False


async def until(ready, seconds: float = 20) -> None:
    with trio.fail_after(seconds):  # a script's start in the jail, under load
        while not ready():
            await trio.sleep(0.02)


async def test_a_cancelled_call_ends_its_script_and_the_connection_goes_on(workspace):
    if why := await trio.to_thread.run_sync(backend().unavailable):
        pytest.skip(f"no sandbox here: {why}")
    room = Room(workspace, ToolSession(workspace / "work"), None, None)
    async with Bridge.open(await room.services()) as bridge:
        async with agent(bridge.grant("claude")) as client:
            length = naps()
            stopped = trio.CancelScope()
            ended: list[float] = []

            async def long_call() -> None:
                with stopped:  # the SDK's client tells the server when its call is cancelled
                    await call(client, "run_skill_script", name="house-style", script="scripts/nap.sh",
                               args=[length], timeout=600)
                ended.append(trio.current_time())

            async with trio.open_nursery() as nursery:
                nursery.start_soon(long_call)
                await until(lambda: sleeping(length))
                cancelled_at = trio.current_time()
                stopped.cancel()
            assert stopped.cancelled_caught and ended
            await until(lambda: not sleeping(length), 10)  # its process ended, well before its sleep would
            assert trio.current_time() - cancelled_at < 10
            text, error = await call(client, "run_skill_script", name="house-style", script="scripts/nap.sh",
                                     args=["0"])
            assert not error and "slept 0" in text and "[exit code 0]" in text, text


class Wire:
    """The bridge spoken to line by line, as a client that checks what it is answered and what it is not."""

    def __init__(self, stream: trio.SocketStream):
        self.stream, self.buffer, self.answers = stream, b"", {}

    async def send(self, message: dict) -> None:
        await self.stream.send_all(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    async def answer(self, ident: int, seconds: float = 20) -> dict:
        with trio.fail_after(seconds):
            while ident not in self.answers:
                while b"\n" not in self.buffer:
                    chunk = await self.stream.receive_some(65536)
                    assert chunk, "the bridge closed the connection"
                    self.buffer += chunk
                line, _, self.buffer = self.buffer.partition(b"\n")
                message = json.loads(line)
                assert message["id"] not in self.answers, f"answered twice: {message}"
                self.answers[message["id"]] = message
        return self.answers[ident]


async def test_a_cancelled_request_is_never_answered_and_the_others_are(workspace):
    """The protocol's rule, seen on the wire: the cancelled call's script ends and no answer comes for it, while
    a call beside it runs to its end, and an unknown or finished id cancels nothing."""
    asker = Asker("run")  # the sandbox off: each script asks, and is allowed
    session = ToolSession(workspace / "work", ask=asker, sandbox=Settings(enabled=False))
    room = Room(workspace, session, None, None)
    async with Bridge.open(await room.services()) as bridge:
        grant = bridge.grant("claude")
        async with await trio.open_unix_socket(str(bridge.socket_path)) as raw:
            await raw.send_all(grant.token.encode() + b"\n")
            assert await raw.receive_some(3) == b"ok\n"
            wire = Wire(raw)
            await wire.send({"id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
            assert "result" in await wire.answer(1)
            long, work = naps(), workspace / "work"

            def script(ident: int, name: str, arg: str) -> dict:
                return {"id": ident, "method": "tools/call", "params": {"name": "run_skill_script", "arguments": {
                    "name": "house-style", "script": f"scripts/{name}", "args": [arg], "timeout": 600}}}

            await wire.send(script(2, "nap.sh", long))
            await wire.send(script(3, "gate.sh", "gate"))  # runs until the file `gate` is made
            await until(lambda: sleeping(long) and (work / "gate.waiting").exists())
            for stray in ("2", 99, 2.0, True):  # another id's type, an unknown one: nothing is cancelled
                await wire.send({"method": "notifications/cancelled", "params": {"requestId": stray}})
            await wire.send({"method": "notifications/cancelled", "params": {"requestId": 2, "reason": "user"}})
            await until(lambda: not sleeping(long), 10)
            await wire.send({"id": 4, "method": "tools/call", "params": {"name": "list_skills", "arguments": {}}})
            assert "house-style" in (await wire.answer(4))["result"]["content"][0]["text"]
            (work / "gate").touch()  # the call beside the cancelled one went on, and ends now
            done = (await wire.answer(3))["result"]
            assert not done["isError"] and "through gate" in done["content"][0]["text"], done
            await wire.send({"method": "notifications/cancelled", "params": {"requestId": 3}})  # finished: no-op
            await wire.send({"id": 5, "method": "ping"})
            assert (await wire.answer(5))["result"] == {}
            with trio.move_on_after(0.5):  # anything still on its way would be an answer to 2
                await wire.answer(2)
            assert set(wire.answers) == {1, 3, 4, 5}

"""The MCP client side against real servers written with the official SDK (tests/mcpdata/server.py):
stdio and streamable HTTP on 127.0.0.1, results, failures that each give one line, stop and shutdown."""
from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

import pytest
import trio

pytest.importorskip("mcp", reason="the MCP extra is not installed: pip install -e '.[mcp]'")

from orchestrator.mcplink.config import ServerConfig  # noqa: E402
from orchestrator.mcplink.servers import CallFailed, ServerUnavailable, open_hub  # noqa: E402
from orchestrator.mcplink.tools import FIND_TOOLS, find_tools, tool_name, toolset  # noqa: E402
from orchestrator.tools.base import ToolContext, ToolError  # noqa: E402
from orchestrator.tools.session import ToolSession  # noqa: E402

SERVER = str(Path(__file__).parent / "mcpdata" / "server.py")


def stdio(mode: str = "normal", **kw) -> ServerConfig:
    return ServerConfig(command=[sys.executable, SERVER, mode], **kw)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def http_server(nursery: trio.Nursery) -> str:
    """Start the HTTP test server under hypercorn's trio worker; its URL once it accepts connections."""
    pytest.importorskip("hypercorn", reason="hypercorn is needed for the streamable HTTP test server")
    port = free_port()
    proc = await nursery.start(trio.run_process, [sys.executable, SERVER, "http", str(port)])
    with trio.fail_after(20):
        while True:
            try:
                stream = await trio.open_tcp_stream("127.0.0.1", port)
                await stream.aclose()
                break
            except OSError:
                assert proc.returncode is None, "the HTTP test server exited"
                await trio.sleep(0.05)
    return f"http://127.0.0.1:{port}/mcp"


def ctx(session: ToolSession | None = None) -> ToolContext:
    return ToolContext(agent="researcher", call_id="c1", session=session or ToolSession(Path.cwd()))


async def exercise(conn) -> None:
    """The same checks over either transport: listing, annotations, every kind of result, a cancel."""
    tools = {t.name: t for t in await conn.tools()}
    assert {"lookup", "slow", "fail", "picture"} <= set(tools)
    assert tools["lookup"].read_only and not tools["fail"].read_only
    from orchestrator.mcplink.results import to_output

    out = to_output(await conn.call("lookup", {"word": "trio"}))
    assert out.text == "a structured concurrency library" and not out.is_error
    out = to_output(await conn.call("fail", {"reason": "on purpose"}))
    assert out.is_error and "fail" in out.text
    out = to_output(await conn.call("picture", {}))
    assert "here it is" in out.text and "[resource pixel.png: file:///tmp/pixel.png, image/png]" in out.text
    assert [i.media_type for i in out.images] == ["image/png"]
    out = to_output(await conn.call("add", {"a": 2, "b": 3}))
    assert '"sum": 5' in out.text
    # a cancelled slow call returns at once, and the connection serves the next call
    t0 = time.perf_counter()
    with trio.move_on_after(0.3):
        await conn.call("slow", {"seconds": 30})
    assert time.perf_counter() - t0 < 0.4
    assert to_output(await conn.call("lookup", {"word": "x"})).text == "no entry for 'x'"


async def test_stdio_server(tmp_path):
    async with open_hub(tmp_path) as hub:
        await exercise(hub.connection("files", stdio()))
    assert "lookup trio" in (tmp_path / "files.log").read_text()  # the server's stderr went to its log


async def test_streamable_http_server(tmp_path):
    async with trio.open_nursery() as nursery:
        url = await http_server(nursery)
        async with open_hub(tmp_path) as hub:
            await exercise(hub.connection("tracker", ServerConfig(url=url)))
        nursery.cancel_scope.cancel()


async def test_a_changed_tool_list_is_read_again(tmp_path):
    async with open_hub(tmp_path) as hub:
        conn = hub.connection("files", stdio())
        assert "echo" not in {t.name for t in await conn.tools()}
        await conn.call("grow", {})
        with trio.fail_after(5):
            while "echo" not in {t.name for t in await conn.tools()}:  # the notification is on its way
                await trio.sleep(0.01)
        assert (await conn.call("echo", {"text": "hi"})).content[0].text == "hi"


async def test_call_timeout_leaves_server_usable(tmp_path):
    async with open_hub(tmp_path) as hub:
        conn = hub.connection("files", stdio(timeout=0.5))
        with pytest.raises(CallFailed, match=r"slow on MCP server 'files' did not answer within 0.5 s"):
            await conn.call("slow", {"seconds": 10})
        assert (await conn.call("lookup", {"word": "trio"})).is_error is False


async def test_crash_during_call_then_restart(tmp_path):
    async with open_hub(tmp_path) as hub:
        conn = hub.connection("files", stdio())
        await conn.tools()
        with pytest.raises(ServerUnavailable) as err:
            await conn.call("die", {})
        line = str(err.value)
        assert "MCP server 'files' stopped during the call" in line and "started again" in line
        assert "\n" not in line
        assert not (await conn.call("lookup", {"word": "trio"})).is_error  # restarted at once


@pytest.mark.parametrize("mode, expected", [
    ("crash", r"MCP server 'broken' exited before it was ready; its last stderr line: \"ImportError: no module"),
    ("silent", r"MCP server 'broken' did not answer within 2 s of starting \(start_timeout\)"),
    ("garbage", r"MCP server 'broken' .*printed 'hello! you said .*' on stdout, which is not MCP"),
])
async def test_broken_servers_give_one_line(tmp_path, mode, expected):
    async with open_hub(tmp_path) as hub:
        conn = hub.connection("broken", stdio(mode, start_timeout=2))
        t0 = time.perf_counter()
        with pytest.raises(ServerUnavailable, match=expected) as err:
            await conn.tools()
        assert time.perf_counter() - t0 < 3
        assert "\n" not in str(err.value) and f"log: {tmp_path / 'broken.log'}" in str(err.value)
        # the next try waits for its backoff instead of hammering the server
        with pytest.raises(ServerUnavailable, match="next start attempt in"):
            await conn.tools()
    assert "site-packages" not in (tmp_path / "broken.log").read_text()  # the SDK's own tracebacks stay out


async def test_missing_command_and_missing_variable(tmp_path):
    async with open_hub(tmp_path, env={}) as hub:
        with pytest.raises(ServerUnavailable, match=r"cannot start `no-such-mcp-server-x`"):
            await hub.connection("a", ServerConfig(command="no-such-mcp-server-x")).tools()
        with pytest.raises(ServerUnavailable, match=r"env.TOKEN uses \$\{MY_TOKEN\}, which is not set"):
            await hub.connection("b", stdio(env={"TOKEN": "${MY_TOKEN}"})).tools()


async def test_secret_reaches_the_server_and_nothing_else(tmp_path):
    secret = "s3cr3t-value-4242"
    cfg = stdio(env={"TOKEN": "${MY_TOKEN}"}, approval="allow")
    async with open_hub(tmp_path, env={"MY_TOKEN": secret}) as hub:
        tools = await toolset(hub, {"files": cfg}, ["mcp:files/token_length"], 200_000, set())
        out = await tools.tools[0].run({}, ctx())
        assert out.text == str(len(secret))
    assert secret not in (tmp_path / "files.log").read_text()
    assert secret not in repr(cfg) and "${MY_TOKEN}" in cfg.shown() + repr(cfg.env)


async def test_stubborn_server_is_gone_after_the_hub(tmp_path):
    async with open_hub(tmp_path) as hub:
        assert await hub.connection("stubborn", stdio("stubborn")).tools()
        pid = int((tmp_path / "stubborn.log").read_text().split("pid ")[1].split()[0])
        os.kill(pid, 0)  # alive
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_toolset_grants_names_and_bad_schema(tmp_path):
    servers = {"files": stdio(approval="allow"), "odd": stdio("badschema", approval="allow")}
    async with open_hub(tmp_path) as hub:
        ts = await toolset(hub, servers, ["read_file", "mcp:files/lookup", "mcp:files/nope", "mcp:odd", "mcp:ghost"],
                           200_000, set())
        names = [t.name for t in ts.tools]
        assert "mcp__files__lookup" in names and "mcp__odd__slow" in names
        assert "mcp__odd__lookup" not in names and "mcp__files__slow" not in names
        assert any("tool 'lookup' left out: its input schema is not valid JSON Schema" in p for p in ts.problems)
        assert any("MCP server 'files' has no tool 'nope'" in p for p in ts.problems)
        assert any("no MCP server named 'ghost'" in p for p in ts.problems)
        assert all("\n" not in p for p in ts.problems)
        lookup = next(t for t in ts.tools if t.name == "mcp__files__lookup")
        assert lookup.read_only and lookup.concurrent
        assert lookup.spec().input_schema["required"] == ["word"]
        with pytest.raises(ToolError, match="invalid arguments for mcp__files__lookup: 'word' is a required"):
            lookup.parse({})


async def test_approval_policies(tmp_path):
    asked = []

    async def ask(agent, category, summary):
        asked.append((category, summary))
        return "deny"

    servers = {"files": stdio(approval={"lookup": "allow", "fail": "deny", "*": "ask"})}
    async with open_hub(tmp_path) as hub:
        ts = {t.name: t for t in (await toolset(hub, servers, ["mcp:files"], 200_000, set())).tools}
        session = ToolSession(Path.cwd(), ask=ask)
        assert (await ts["mcp__files__lookup"].run({"word": "trio"}, ctx(session))).text.startswith("a structured")
        with pytest.raises(ToolError, match="denied by the `approval` setting"):
            await ts["mcp__files__fail"].run({}, ctx(session))
        with pytest.raises(ToolError, match="The user did not allow mcp__files__add"):
            await ts["mcp__files__add"].run({"a": 1, "b": 2}, ctx(session))
    assert [c for c, _ in asked] == ["mcp:files/add"]
    assert SERVER in asked[0][1] and '{"a": 1, "b": 2}' in asked[0][1]


async def test_find_tools_when_schemas_crowd_the_window(tmp_path):
    servers = {"files": stdio(approval="allow")}
    async with open_hub(tmp_path) as hub:
        ts = await toolset(hub, servers, ["mcp:files"], 2_000, set())
        assert ts.tools == [] and "mcp__files__lookup" in ts.deferred
        loaded = []
        finder = find_tools(ts.deferred, loaded.extend)
        assert finder.name == FIND_TOOLS
        found = await finder.run(finder.parse({"query": "dictionary word"}), ctx())
        assert found.splitlines()[0].startswith("mcp__files__lookup:")
        await finder.run(finder.parse({"query": "", "load": ["mcp__files__lookup"]}), ctx())
        assert [t.name for t in loaded] == ["mcp__files__lookup"]
        again = await toolset(hub, servers, ["mcp:files"], 2_000, {"mcp__files__lookup"})
        assert [t.name for t in again.tools] == ["mcp__files__lookup"]
        assert (await toolset(hub, servers, ["mcp:files"], 200_000, set())).deferred == {}


def test_tool_names_are_safe_and_bounded():
    assert tool_name("files", "read") == "mcp__files__read"
    assert tool_name("files", "a.b/c") == "mcp__files__a_b_c"
    long = tool_name("server", "x" * 100)
    assert len(long) == 64 and long != tool_name("server", "x" * 99)


async def test_without_the_extra_the_line_says_what_to_install(tmp_path, monkeypatch):
    for name in [m for m in sys.modules if m == "mcp" or m.startswith("mcp.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mcp", None)  # `import mcp` now fails as if it were not installed
    async with open_hub(tmp_path) as hub:
        with pytest.raises(ServerUnavailable, match=r"MCP server 'files' needs the `mcp` extra: `pip install -e '\.\[mcp\]'`"):
            await hub.connection("files", stdio()).tools()

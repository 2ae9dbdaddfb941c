"""MCP tools inside a Room: the group stop during a slow MCP call, broken servers as one notice each
while the room keeps working, approval through the room's confirmation path, concurrency of
read-only MCP tools, and find_tools through the engine."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import trio

pytest.importorskip("mcp", reason="the MCP extra is not installed: pip install -e '.[mcp]'")

from orchestrator.core.events import Cancelled, Confirm, ToolStart  # noqa: E402
from orchestrator.mcplink.config import ServerConfig  # noqa: E402
from orchestrator.mcplink.servers import open_hub  # noqa: E402
from orchestrator.providers.scripted import Reply, ScriptedProvider, request_text  # noqa: E402
from orchestrator.room.room import Room  # noqa: E402
from orchestrator.store.db import Store  # noqa: E402
from orchestrator.store.heal import pairing_problems  # noqa: E402
from orchestrator.team.schema import AgentDef, Team  # noqa: E402

from test_room import Recorder, resolver  # noqa: E402

SERVER = str(Path(__file__).parent / "mcpdata" / "server.py")


def stdio(mode: str = "normal", **kw) -> ServerConfig:
    return ServerConfig(command=[sys.executable, SERVER, mode], **{"approval": "allow", **kw})


def team(tools: list[str], **servers: ServerConfig) -> Team:
    return Team(commander=AgentDef(name="commander", model="scripted", tools=tools), mcp_servers=servers)


@pytest.fixture
async def store(tmp_path: Path):
    s = await Store.open(tmp_path / "room.db")
    yield s
    await s.close()


async def test_stop_during_a_slow_mcp_call(store, tmp_path):
    provider = ScriptedProvider({"commander": [
        Reply(calls=[("mcp__files__slow", {"seconds": 30})]),
        Reply(calls=[("mcp__files__lookup", {"word": "trio"})]),
        Reply(say="Still here.", sees="a structured concurrency library"),
    ]})
    rec = Recorder()
    async with open_hub(tmp_path / "logs") as hub:
        async with Room.create(store, team(["mcp:files"], files=stdio()), resolver(provider), workspace=tmp_path,
                               on_event=rec, mcp=hub) as room:
            await room.post("Take your time.")
            with trio.fail_after(30):
                while not rec.of(ToolStart):
                    await trio.sleep(0.01)
            await trio.sleep(0.2)  # the call is now with the server
            assert room.busy
            stop_at = time.perf_counter()
            await room.stop()
            took = rec.of(Cancelled)[0][0] - stop_at
            assert took < 0.1, f"stop -> cancelled took {took * 1000:.0f} ms"
            messages = await store.load(room.id)
            assert pairing_problems(messages) == []
            assert [m.result.content for m in messages if m.kind == "tool_result"][0].startswith("cancelled")
            # the next line works, and the server that was mid-call still answers
            await room.post("Now something quick.")
            with trio.fail_after(10):
                await room.idle()
            assert (await store.load(room.id))[-1].text == "Still here."
    assert provider.failures == [] and provider.remaining() == {}


@pytest.mark.parametrize("mode, start_timeout, line", [
    ("crash", 20, "MCP server 'odd' exited before it was ready"),
    ("silent", 2, "MCP server 'odd' did not answer within 2 s of starting"),
    ("garbage", 2, "on stdout, which is not MCP"),
    ("badschema", 20, "MCP server 'odd': tool 'lookup' left out: its input schema is not valid JSON Schema"),
])
async def test_a_broken_server_is_one_notice_and_the_room_keeps_working(store, tmp_path, mode, start_timeout, line):
    provider = ScriptedProvider({"commander": [
        Reply(calls=[("mcp__files__lookup", {"word": "trio"})]),
        Reply(say="Found it.", sees="a structured concurrency library"),
        Reply(say="Second line answered."),
    ]})
    servers = {"files": stdio(), "odd": stdio(mode, start_timeout=start_timeout)}
    async with open_hub(tmp_path / "logs") as hub:
        async with Room.create(store, team(["mcp:files/lookup", "mcp:odd"], **servers), resolver(provider),
                               workspace=tmp_path, mcp=hub) as room:
            await room.post("What is trio?")
            await room.idle()
            await room.post("And again?")  # a second turn must not repeat the notice
            await room.idle()
            messages = await store.load(room.id)
    notices = [m for m in messages if m.kind == "notice" and "MCP server 'odd'" in m.text]
    assert len(notices) == 1 and line in notices[0].text and "\n" not in notices[0].text, [m.text for m in notices]
    assert "user" in notices[0].visible_to
    assert messages[-1].text == "Second line answered."
    assert provider.failures == [] and provider.remaining() == {}


async def test_ask_policy_goes_through_the_rooms_confirmation(store, tmp_path):
    provider = ScriptedProvider({"commander": [
        Reply(calls=[("mcp__files__add", {"a": 2, "b": 3})]),
        Reply(say="Done.", sees='"sum": 5'),
    ]})
    rec = Recorder()
    async with open_hub(tmp_path / "logs") as hub:
        async with Room.create(store, team(["mcp:files/add"], files=stdio(approval="ask")), resolver(provider),
                               workspace=tmp_path, on_event=rec, mcp=hub, can_confirm=True) as room:
            await room.post("Add 2 and 3.")
            assert await room.question_or_idle()
            [(_, ask)] = rec.of(Confirm)
            assert ask.category == "mcp:files/add" and SERVER in ask.summary
            room.answer("once")
            await room.idle()
    assert provider.failures == [] and provider.remaining() == {}


async def test_read_only_mcp_tools_run_concurrently(store, tmp_path):
    calls = [("mcp__files__slow", {"seconds": 1.0}) for _ in range(3)]
    provider = ScriptedProvider({"commander": [Reply(calls=calls), Reply(say="All slept.")]})
    async with open_hub(tmp_path / "logs") as hub:
        async with Room.create(store, team(["mcp:files/slow"], files=stdio()), resolver(provider),
                               workspace=tmp_path, mcp=hub) as room:
            await hub.connection("files", room._mcp_servers["files"]).tools()  # started before the clock
            t0 = time.perf_counter()
            await room.post("Sleep three times.")
            await room.idle()
            took = time.perf_counter() - t0
    assert took < 2.5, f"three 1 s read-only calls took {took:.1f} s: they ran one after another"
    assert provider.failures == [] and provider.remaining() == {}


async def test_find_tools_loads_a_schema_for_the_next_request(store, tmp_path):
    commander = AgentDef(name="commander", model="scripted", tools=["mcp:files"], context_window=3_000)
    provider = ScriptedProvider({"commander": [
        Reply(calls=[("find_tools", {"query": "dictionary"})]),
        Reply(calls=[("find_tools", {"query": "", "load": ["mcp__files__lookup"]})]),
        Reply(calls=[("mcp__files__lookup", {"word": "trio"})]),
        Reply(say="Loaded and used.", sees="a structured concurrency library"),
    ]})
    async with open_hub(tmp_path / "logs") as hub:
        async with Room.create(store, Team(commander=commander, mcp_servers={"files": stdio()}), resolver(provider),
                               workspace=tmp_path, mcp=hub) as room:
            await room.post("Look trio up.")
            await room.idle()
    tools = [[t.name for t in r.tools] for r in provider.requests if not r.auxiliary]
    assert "mcp__files__lookup" not in tools[0] and "find_tools" in tools[0]
    assert "mcp__files__lookup" in tools[2]
    assert "mcp__files__lookup:" in request_text(provider.requests[1])
    assert provider.failures == [] and provider.remaining() == {}

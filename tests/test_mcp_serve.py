"""`orchestrator mcp serve` driven by the official SDK's client over stdio, with a scripted team:
ask_team answers (with progress notifications), a cancelled call stops the room, and the room is usable after."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import trio

pytest.importorskip("mcp", reason="the MCP extra is not installed: pip install -e '.[mcp]'")

from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

TEAM = Path(__file__).parent / "mcpdata" / "serve-team.yaml"


async def test_a_client_uses_the_team(tmp_path):
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "orchestrator", "mcp", "serve", "--scripted", str(TEAM),
                                      "--db", str(tmp_path / "rooms.db"), "--workspace", str(tmp_path)],
        env={"XDG_STATE_HOME": str(tmp_path / "state")}, cwd=str(Path(__file__).parent.parent))
    progress: list[str] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    with open(tmp_path / "serve.log", "w") as errlog, trio.fail_after(60):
        async with Client(stdio_client(params, errlog=errlog)) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert names == {"ask_team", "list_rooms", "read_room"}

            first = await client.call_tool("ask_team", {"line": "What is the capital of France?"},
                                           progress_callback=on_progress)
            assert not first.is_error, first.content
            room = first.structured_content["room"]
            assert first.structured_content["answer"] == "Paris is the capital of France."
            assert f"[room {room}]" in first.content[0].text
            # The SDK runs each progress callback in a task of its own, so one may run after the call's
            # result is read: wait for them rather than read them once.
            with trio.move_on_after(10):
                while not any(p.startswith("commander: run_worker") for p in progress):
                    await trio.sleep(0.01)
            assert any(p.startswith("commander: run_worker") for p in progress), progress

            # a client's cancellation is the group stop: quick, and the room stays usable
            with trio.move_on_after(1.0):
                await client.call_tool("ask_team", {"line": "Take your time.", "room": room})
            # The cancel is a notification, unanswered: watch the room go idle instead of reading it once.
            cancelled_at = time.perf_counter()
            while True:
                rooms = (await client.call_tool("list_rooms", {})).structured_content["rooms"]
                assert [r["id"] for r in rooms] == [room]
                if not rooms[0]["busy"]:
                    break
                assert time.perf_counter() - cancelled_at < 1, "the room still works after the client cancelled"
                await trio.sleep(0.01)

            again = await client.call_tool("ask_team", {"line": "are you still there?", "room": room})
            assert again.structured_content["answer"] == "Back again after the stop."
            assert again.structured_content["room"] == room

            since = again.structured_content["messages"][0]["seq"] - 1
            read = await client.call_tool("read_room", {"room": room, "since_seq": since})
            assert [m["text"] for m in read.structured_content["messages"]] == ["Back again after the stop."]
            whole = await client.call_tool("read_room", {"room": room})  # a transcript: the user's lines too
            said = [(m["kind"], m["text"]) for m in whole.structured_content["messages"]]
            assert ("user", "are you still there?") in said and said[-1] == ("text", "Back again after the stop.")
            missing = await client.call_tool("read_room", {"room": "nope"})
            assert missing.is_error and "no room 'nope'" in missing.content[0].text
    assert "Traceback" not in (tmp_path / "serve.log").read_text()


def test_mcp_list_shows_each_server_its_tools_and_why_one_does_not_start(tmp_path):
    import json
    import subprocess

    server = Path(__file__).parent / "mcpdata" / "server.py"
    (tmp_path / "team.yaml").write_text(
        "mcp_servers:\n"
        f"  files: {{command: ['${{ORCHESTRATOR_PYTHON}}', '{server}'], approval: {{lookup: allow}}}}\n"
        f"  broken: {{command: ['${{ORCHESTRATOR_PYTHON}}', '{server}', crash]}}\n"
        "agents:\n  - {name: researcher, tools: ['mcp:files']}\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path / "state"),
           "XDG_CONFIG_HOME": str(tmp_path / "config")}
    run = subprocess.run([sys.executable, "-m", "orchestrator", "mcp", "list", "--team", str(tmp_path / "team.yaml"),
                          "--json"], capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 1, run.stderr  # a server that does not start is a failure, as a key is for `models`
    entries = {e["server"]: e for e in map(json.loads, run.stdout.splitlines())}
    files = entries["files"]
    assert files["starts"] and files["transport"] == "stdio" and "${ORCHESTRATOR_PYTHON}" in files["target"]
    tools = {t["name"]: t for t in files["tools"]}
    assert tools["lookup"]["annotations"] == {"readOnlyHint": True} and tools["lookup"]["approval"] == "allow"
    assert tools["fail"]["approval"] == "ask"
    assert not entries["broken"]["starts"]
    assert "exited before it was ready" in entries["broken"]["error"]
    plain = subprocess.run([sys.executable, "-m", "orchestrator", "mcp", "list", "--team", str(tmp_path / "team.yaml")],
                           capture_output=True, text=True, env=env, timeout=60)
    assert "mcp__files__lookup  approval=allow  [readOnlyHint=True]" in plain.stdout
    assert "broken  (stdio:" in plain.stdout and "  does not start: MCP server 'broken' exited" in plain.stdout


async def test_mcp_serve_keeps_its_own_database_and_refuses_long_lines(tmp_path):
    """Any MCP client can list and read every room of the database `mcp serve` opens: by default that is a
    database of its own, so the user's chat rooms (and what was said in them) stay out of its reach."""
    from orchestrator.cli.paths import open_db
    from orchestrator.core.types import Draft, TextBlock
    from orchestrator.room.room import MAX_LINE

    data = tmp_path / "data"
    chat = await open_db(data / "orchestrator" / "orchestrator.db")
    secret = await chat.create_room("private")
    await chat.append(secret.id, Draft(author="user", kind="user", blocks=[TextBlock("the key is hunter2")],
                                       visible_to=["user"]))
    await chat.close()

    home = tmp_path / "home"
    home.mkdir()
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "orchestrator", "mcp", "serve", "--scripted", str(TEAM)],
        env={"HOME": str(home), "XDG_DATA_HOME": str(data), "XDG_STATE_HOME": str(tmp_path / "state"),
             "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_CACHE_HOME": str(tmp_path / "cache"),
             "PATH": "/usr/bin:/bin"},
        cwd=str(home))
    with open(tmp_path / "serve.log", "w") as errlog, trio.fail_after(60):
        async with Client(stdio_client(params, errlog=errlog)) as client:
            listed = await client.call_tool("list_rooms", {})
            assert listed.structured_content["rooms"] == []
            hidden = await client.call_tool("read_room", {"room": secret.id})
            assert hidden.is_error and "hunter2" not in hidden.content[0].text

            long = await client.call_tool("ask_team", {"line": "x" * (MAX_LINE + 1)})
            assert long.is_error and f"at most {MAX_LINE:,}" in long.content[0].text
            assert (await client.call_tool("list_rooms", {})).structured_content["rooms"] == []

            asked = await client.call_tool("ask_team", {"line": "What is the capital of France?"})
            assert not asked.is_error, asked.content
    assert (data / "orchestrator" / "mcp-serve.db").is_file()
    assert list(home.iterdir()) == [], "nothing was written in the folder it started in"
    assert "Traceback" not in (tmp_path / "serve.log").read_text()

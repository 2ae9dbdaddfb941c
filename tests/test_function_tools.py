"""Python functions as tools: a sync one (in a worker thread) and an async one (on the loop) in a room with a
scripted model, read-only ones running side by side, errors as error results, the context parameter, and
`py:` tools named by a team file: imported when the file is trusted, refused at its line when it is not."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import trio

from orchestrator.core.errors import InputError
from orchestrator.providers.scripted import Reply, ScriptedProvider
from orchestrator.room.room import Room
from orchestrator.store.db import Store
from orchestrator.team.loader import load_team
from orchestrator.team.schema import AgentDef, Team
from orchestrator.tools.base import ToolContext
from orchestrator.tools.functions import function_tool, tool

MET = threading.Event()


@tool(read_only=True)
def lookup(term: str, limit: int = 3) -> str:
    """Look a term up in the glossary.

    Args:
        term: the word to look up
        limit: at most this many senses
    """
    # Waits (in its worker thread) for the async tool of the same reply: it only comes if they run together.
    together = MET.wait(10)
    return f"{term}: {limit} senses" + (" (ran beside announce)" if together else " (ran alone)")


@tool(read_only=True)
async def announce(text: str, ctx: ToolContext) -> dict:
    """Say something, and who asked."""
    MET.set()
    await trio.sleep(0)
    return {"said": text, "agent": ctx.agent}


def explode(reason: str) -> str:
    """Always fails."""
    raise ValueError(f"exploded: {reason}")


def results(messages) -> dict[str, tuple[str, bool]]:
    return {m.result.name: (m.result.content, m.result.is_error) for m in messages if m.kind == "tool_result"}


def test_a_function_becomes_a_tool_with_its_schema_and_description():
    t = function_tool(explode)
    assert (t.name, t.description, t.read_only) == ("explode", "Always fails.", False)
    spec = lookup.spec()
    assert spec.description == "Look a term up in the glossary."
    assert spec.input_schema["required"] == ["term"]
    assert spec.input_schema["properties"]["term"] == {"type": "string", "description": "the word to look up"}
    assert spec.input_schema["properties"]["limit"]["default"] == 3
    assert "ctx" not in announce.spec().input_schema["properties"]  # the context is not the model's to give
    with pytest.raises(ValueError, match="no type hint"):
        function_tool(lambda x: x, name="untyped")


async def test_a_room_calls_sync_async_and_failing_python_tools(tmp_path):
    MET.clear()
    provider = ScriptedProvider({"commander": [
        Reply(calls=[("lookup", {"term": "room"}), ("announce", {"text": "hello"})]),
        Reply(calls=[("explode", {"reason": "on purpose"})]),
        Reply(calls=[("lookup", {"term": 5})]),
        Reply(say="done"),
    ]})
    team = Team(commander=AgentDef(name="commander", model="scripted", tools=["read_file", lookup, announce, explode]))
    store = await Store.open(tmp_path / "r.db")
    try:
        async with Room.create(store, team, lambda m: (provider, "scripted"), workspace=tmp_path) as room:
            with trio.fail_after(30):
                await room.post("go")
                await room.idle()
            messages = await store.load(room.id)
    finally:
        await store.close()
    got = [m.result for m in messages if m.kind == "tool_result"]
    assert got[0].content == "room: 3 senses (ran beside announce)" and not got[0].is_error
    assert got[1].content == '{"said":"hello","agent":"commander"}'
    assert got[2].is_error and "exploded: on purpose" in got[2].content
    assert got[3].is_error and "term" in got[3].content  # a bad argument, told to the model like any tool's
    assert [m.text for m in messages if m.kind == "text"][-1] == "done"
    first = provider.requests[0]
    assert {"lookup", "announce", "explode", "read_file"} <= {t.name for t in first.tools}


MODULE = '''
def shout(text: str) -> str:
    """Say it louder."""
    return text.upper() + "!"
'''


def team_file(tmp_path: Path) -> Path:
    (tmp_path / "lib").mkdir(exist_ok=True)
    (tmp_path / "lib" / "loudtools.py").write_text(MODULE)
    path = tmp_path / "team.yaml"
    path.write_text("commander:\n  model: scripted\n  tools:\n    - read_file\n    - py:loudtools:shout\n")
    return path


async def test_py_tools_come_only_from_a_trusted_team_file_and_never_from_the_store(tmp_path, monkeypatch):
    path = team_file(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path / "lib"))
    with pytest.raises(InputError, match=rf"{path}:5:.*would import and run Python code"):
        load_team(path)
    team = load_team(path, trusted=True)
    provider = ScriptedProvider({"commander": [Reply(calls=[("shout", {"text": "hi"})]), Reply(say="ok"),
                                               Reply(say="again")]})
    store = await Store.open(tmp_path / "r.db")
    try:
        async with Room.create(store, team, lambda m: (provider, "scripted"), workspace=tmp_path) as room:
            await room.post("go")
            await room.idle()
            room_id = room.id
        assert results(await store.load(room_id))["shout"] == ("HI!", False)
        # the stored team names the tool, but the store is no place to import code from
        with pytest.raises(InputError, match="not imported again"):
            async with Room.open(store, room_id, lambda m: (provider, "scripted")):
                pass
        async with Room.open(store, room_id, lambda m: (provider, "scripted"), team=team) as room:
            await room.post("more")
            await room.idle()
    finally:
        await store.close()


def test_a_scenario_calls_a_py_tool_and_its_arguments_are_checked_at_load(tmp_path):
    team_file(tmp_path)
    scn = tmp_path / "scn.yaml"
    scn.write_text(textwrap.dedent("""
        name: py-tool
        team:
          commander: {tools: ["py:loudtools:shout"]}
        models:
          commander:
            - call: {shout: {text: "hey"}}
            - {say: "shouted", sees: "HEY!"}
        turns:
          - user: go
        """))
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path / "lib")}
    run = subprocess.run([sys.executable, "-m", "orchestrator", "run", str(scn), "--db", str(tmp_path / "s.db")],
                         capture_output=True, text=True, timeout=60, env=env)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "commander calls shout(text=hey)" in run.stdout and "commander: shouted" in run.stdout
    scn.write_text(scn.read_text().replace('{text: "hey"}', '{words: "hey"}'))
    bad = subprocess.run([sys.executable, "-m", "orchestrator", "run", str(scn)], capture_output=True, text=True,
                         timeout=60, env=env)
    assert bad.returncode == 2 and f"{scn}:7" in bad.stderr, bad.stderr

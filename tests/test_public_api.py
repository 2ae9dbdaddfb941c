"""The public API: `from orchestrator import ...` names what a user needs, each loaded on first use (so
`import orchestrator` imports nothing else), typed (`py.typed`); the blocking facade from plain Python, from
asyncio through a thread, and its refusal inside a running loop."""
from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
import trio

import orchestrator
from orchestrator import Agent, Conversation, Reply, Team, run

TEAM = Team(commander=Agent(model="scripted"))


def test_every_public_name_resolves_and_nothing_loads_on_import():
    assert sorted(orchestrator.__all__) == sorted(orchestrator._WHERE) == orchestrator.__all__
    for name in orchestrator.__all__:
        assert getattr(orchestrator, name) is not None, name
    with pytest.raises(AttributeError):
        orchestrator.not_a_name  # noqa: B018
    loaded = subprocess.run([sys.executable, "-c", "import sys, orchestrator; "
                             "print(sorted(m for m in sys.modules if m.startswith('orchestrator')))"],
                            capture_output=True, text=True, timeout=60)
    assert loaded.stdout.strip() == "['orchestrator']", loaded.stderr
    assert (Path(orchestrator.__file__).parent / "py.typed").is_file()


def test_run_and_a_conversation_from_plain_python():
    said = run(TEAM, ["hello", "again"], scripted={"commander": [Reply(say="Hi!"), Reply(say="Hi again!")]})
    assert [(m.author, m.text) for m in said] == [("user", "hello"), ("commander", "Hi!"), ("user", "again"),
                                                 ("commander", "Hi again!")]
    with Conversation(TEAM, scripted={"commander": [Reply(say="one"), Reply(say="two")]}) as chat:
        assert [m.text for m in chat.say("first")] == ["one"]
        assert [m.text for m in chat.say("second")] == ["two"]
        assert chat.room_id


def test_from_asyncio_through_a_thread_and_refused_inside_a_loop():
    async def from_asyncio():
        with pytest.raises(RuntimeError, match="asyncio.to_thread"):
            run(TEAM, "hi", scripted={"commander": [Reply(say="no")]})
        return await asyncio.to_thread(run, TEAM, "hi", scripted={"commander": [Reply(say="from a thread")]})

    said = asyncio.run(from_asyncio())
    assert said[-1].text == "from a thread"

    async def from_trio():
        with pytest.raises(RuntimeError, match="Runtime.open"):
            run(TEAM, "hi", scripted={"commander": [Reply(say="no")]})

    trio.run(from_trio)


def test_a_conversation_reports_a_team_that_cannot_open():
    bad = Team(commander=Agent(model="scripted", tools=["no_such_tool"]))
    with pytest.raises(orchestrator.InputError, match="unknown tool 'no_such_tool'"):
        with Conversation(bad, scripted={}):
            pass


def test_every_public_name_and_its_public_members_have_a_docstring():
    import inspect

    import orchestrator

    missing = []
    for name in orchestrator.__all__:
        obj = getattr(orchestrator, name)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        if not (obj.__doc__ or "").strip():
            missing.append(name)
        for member, value in (vars(obj).items() if inspect.isclass(obj) else ()):
            if member.startswith("_"):
                continue
            fn = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
            if inspect.isfunction(fn) and not (fn.__doc__ or "").strip():
                missing.append(f"{name}.{member}")
    assert not missing, f"public names without a docstring: {missing}"

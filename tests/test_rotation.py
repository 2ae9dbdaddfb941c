"""Rotation below the runner (P5): which failures move to the next candidate, cooldowns on a MockClock,
and one run through the CLI and a Room where the first key is rejected and the second answers.

Candidates are real OpenAI-compatible providers over loopback servers, except where an exact failure
after the first content event is needed (an in-memory provider).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
from typing import AsyncIterator

import httpx
import pytest
import structlog

from orchestrator.core import errors as E
from orchestrator.core.types import ModelMessage, Request, StreamEnd, StreamEvent, TextBlock, TextDelta
from orchestrator.providers.openai import OpenAICompatible
from orchestrator.providers.rotation import COOLDOWN, Rotation
from tests.fakeserver import FakeServer, Reply, json_body, sse

# Stopping at [DONE] closes the response, but httpx's inner byte/text generators under aiter_lines are
# left to the garbage collector, which trio reports; the sockets themselves are released.
pytestmark = pytest.mark.filterwarnings(r"ignore:Async generator 'http(x|core)\.:ResourceWarning")

ROOT = Path(__file__).resolve().parent.parent
KEY_A = "sk-test-AAAAAAAAAAAAAAAA1111"
KEY_B = "sk-test-BBBBBBBBBBBBBBBB2222"
REQ = Request(agent="a", model="m-1", system="Be brief.", messages=[ModelMessage("user", [TextBlock("hi")])])


def chunk(delta: dict, finish: str | None = None) -> dict:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m-1",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def answer(text: str = "Hello from B") -> Reply:
    return Reply(chunks=sse(chunk({"role": "assistant", "content": text}), chunk({}, "stop"), done=True))


def unauthorized() -> Reply:
    return json_body(401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                                     "code": "invalid_api_key"}})


@asynccontextmanager
async def pair() -> AsyncIterator[tuple[Rotation, FakeServer, FakeServer]]:
    """A rotation over two keys, each at its own server, so every request shows who served it."""
    with FakeServer() as a, FakeServer() as b:
        async with httpx.AsyncClient() as client:
            rot = Rotation("team", [
                ("sk-…1111", OpenAICompatible(id="team", base_url=a.url + "/v1", api_key=KEY_A, client=client)),
                ("sk-…2222", OpenAICompatible(id="team", base_url=b.url + "/v1", api_key=KEY_B, client=client)),
            ])
            yield rot, a, b


async def events(provider, request: Request = REQ) -> list[StreamEvent]:
    async with aclosing(provider.stream(request)) as stream:
        return [ev async for ev in stream]


def text(evs: list[StreamEvent]) -> str:
    return "".join(ev.text for ev in evs if isinstance(ev, TextDelta))


async def test_rejected_key_cools_down_and_comes_back_after_ten_minutes(mock_clock):
    async with pair() as (rot, a, b):
        a.replies.append(unauthorized())
        b.replies.append(answer())
        with structlog.testing.capture_logs() as logs:
            assert text(await events(rot)) == "Hello from B"
        assert (len(a.requests), len(b.requests)) == (1, 1)
        assert rot.id == "team"

        b.replies.append(answer("again B"))  # A rests: the next call goes straight to B
        assert text(await events(rot)) == "again B"
        assert (len(a.requests), len(b.requests)) == (1, 2)

        mock_clock.jump(COOLDOWN - 1)
        b.replies.append(answer("still B"))
        assert text(await events(rot)) == "still B"
        assert len(a.requests) == 1

        mock_clock.jump(1)
        a.replies.append(answer("A is back"))
        assert text(await events(rot)) == "A is back"
        assert (len(a.requests), len(b.requests)) == (2, 3)

    cooled = [e for e in logs if e["event"].startswith("candidate rejected")]
    assert cooled and cooled[0]["candidate"] == "sk-…1111" and cooled[0]["error"] == "auth"
    assert KEY_A not in repr(logs) and KEY_B not in repr(logs)


async def test_connection_reset_is_retried_in_place():
    async with pair() as (rot, a, b):
        a.replies.extend([Reply(reset=True), answer("A after a reset")])
        assert text(await events(rot)) == "A after a reset"
        assert (len(a.requests), len(b.requests)) == (2, 0)


async def test_connection_that_keeps_failing_moves_on_without_cooling():
    async with pair() as (rot, a, b):
        a.replies.extend([Reply(reset=True)] * 3)  # the first try and two in place
        b.replies.append(answer())
        assert text(await events(rot)) == "Hello from B"
        assert (len(a.requests), len(b.requests)) == (3, 1)
        a.replies.append(answer("A again"))  # no cooldown: the next call starts at A
        assert text(await events(rot)) == "A again"


async def test_server_error_goes_up_without_rotating():
    async with pair() as (rot, a, b):
        a.replies.append(json_body(500, {"error": {"message": "boom", "type": "server_error"}}))
        with pytest.raises(E.ServerError):
            await events(rot)
        assert (len(a.requests), len(b.requests)) == (1, 0)
        a.replies.append(answer("A"))  # and nothing cooled
        assert text(await events(rot)) == "A"


async def test_failure_after_the_first_text_goes_up_without_rotating():
    async with pair() as (rot, a, b):
        a.replies.append(Reply(chunks=sse(chunk({"content": "partial "}), chunk({"content": "more"})),
                               drop_after=1))
        seen: list[StreamEvent] = []
        with pytest.raises(E.ProviderConnectionError):
            async with aclosing(rot.stream(REQ)) as stream:
                async for ev in stream:
                    seen.append(ev)
        assert seen == [TextDelta("partial ")]
        assert (len(a.requests), len(b.requests)) == (1, 0)


class Scripted:
    """A candidate that plays a list of outcomes: events to yield, then optionally an error."""

    def __init__(self, id: str, *plays: tuple[list[StreamEvent], E.ProviderError | None]):  # noqa: A002
        self.id, self.plays, self.calls = id, list(plays), 0

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        evs, error = self.plays[self.calls]
        self.calls += 1
        for ev in evs:
            yield ev
        if error is not None:
            raise error

    async def validate_auth(self) -> None:
        return None


OK = ([TextDelta("fine"), StreamEnd("end_turn")], None)


async def test_account_error_after_content_goes_up_and_cools_nothing():
    a = Scripted("x", ([TextDelta("half")], E.AuthError("key revoked mid-stream")), OK)
    b = Scripted("x", OK)
    rot = Rotation("x", [("a", a), ("b", b)])
    with pytest.raises(E.AuthError):
        await events(rot)
    assert text(await events(rot)) == "fine"
    assert (a.calls, b.calls) == (2, 0)


@pytest.mark.parametrize("error", [E.InvalidRequestError("bad"), E.ContentPolicyError("no"),
                                   E.ContextOverflowError("too long"), E.RateLimitError("slow down"),
                                   E.OverloadedError("busy"), E.ProviderTimeout("late")])
async def test_errors_another_key_would_repeat_go_up(error):
    a = Scripted("x", ([], error))
    b = Scripted("x", OK)
    with pytest.raises(type(error)):
        await events(Rotation("x", [("a", a), ("b", b)]))
    assert b.calls == 0


async def test_quota_rotates_and_all_cooling_says_when_one_is_back(mock_clock):
    a = Scripted("x", ([], E.QuotaError("no credit left")))
    b = Scripted("x", ([], E.AuthError("bad key")))
    rot = Rotation("x", [("a", a), ("b", b)])
    with pytest.raises(E.AuthError) as first:
        await events(rot)
    assert "all 2 keys are cooling down" in str(first.value) and "10m00s" in str(first.value)
    assert "bad key" in str(first.value) and first.value.provider == "x"

    mock_clock.jump(240)
    with pytest.raises(E.AuthError) as later:  # nobody is asked while everyone rests
        await events(rot)
    assert "6m00s" in str(later.value)
    assert (a.calls, b.calls) == (1, 1)


# --- end to end: the CLI, a Room, two candidates of one named endpoint ------------------------

SCENARIO = """\
name: rotation-e2e
description: "One user line; every agent runs on the real model given with --model."
turns:
  - user: hello there
"""


def test_run_rotates_to_the_second_key_and_stores_the_user_line_once(tmp_path):
    with FakeServer() as a, FakeServer() as b:
        a.replies.append(unauthorized())
        b.replies.append(answer("Hello from the second key"))
        config = tmp_path / "config.toml"
        config.write_text(f"""
[endpoints.team]
base_url = "{a.url}/v1"
api_key_env = "TEAM_KEY_A"

[[endpoints.team.candidates]]
base_url = "{b.url}/v1"
api_key_env = "TEAM_KEY_B"
""")
        (tmp_path / "s.yaml").write_text(SCENARIO)
        env = {k: v for k, v in os.environ.items()
               if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL")}
        env.update(ORCHESTRATOR_CONFIG=str(config), TEAM_KEY_A=KEY_A, TEAM_KEY_B=KEY_B)
        db = tmp_path / "room.db"

        def cli(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", "orchestrator", *args], cwd=ROOT, env=env,
                                  capture_output=True, text=True, timeout=60)

        run = cli("run", str(tmp_path / "s.yaml"), "--model", "team/m-1", "--db", str(db), "--json")
        assert run.returncode == 0, run.stderr
        assert (len(a.requests), len(b.requests)) == (1, 1)
        assert a.requests[0]["headers"]["Authorization"] == f"Bearer {KEY_A}"
        assert b.requests[0]["headers"]["Authorization"] == f"Bearer {KEY_B}"
        assert b.requests[0]["json"]["model"] == "m-1"
        assert KEY_A not in run.stdout + run.stderr and KEY_B not in run.stdout + run.stderr

    room = json.loads(cli("rooms", "--db", str(db), "--json").stdout.splitlines()[0])["id"]
    shown = cli("show", room, "--db", str(db), "--json")
    messages = [json.loads(line) for line in shown.stdout.splitlines()]
    assert [m["text"] for m in messages if m["kind"] == "user"] == ["hello there"]
    assert [m["text"] for m in messages if m["author"] == "commander"] == ["Hello from the second key"]

"""The JSON-RPC peer both ACP and the bridge speak: requests both ways, ordered notifications, concurrent
answers, and a hostile other side (garbage, floods, stray answers, a hang-up with a request pending)."""
from __future__ import annotations

import json

import pytest
import trio
import trio.testing

from orchestrator.acp.jsonrpc import METHOD_NOT_FOUND, Closed, Peer, RpcError


def pair(**kw):
    a, b = trio.testing.memory_stream_pair()
    return a, b


async def test_requests_both_ways_and_notifications_in_order():
    a, b = pair()
    seen: list = []

    async def b_requests(method, params):
        if method == "add":
            return params["x"] + params["y"]
        raise RpcError(METHOD_NOT_FOUND, "no")

    async def b_notes(method, params):
        seen.append(params)

    left = Peer(a, a)
    right = Peer(b, b, on_request=b_requests, on_notify=b_notes)
    async with trio.open_nursery() as n:
        await n.start(left.serve)
        await n.start(right.serve)
        assert await left.request("add", {"x": 2, "y": 3}) == 5
        for i in range(50):
            await left.notify("tick", i)
        with pytest.raises(RpcError) as err:
            await left.request("nope")
        assert err.value.code == METHOD_NOT_FOUND
        assert seen == list(range(50))
        await left.aclose()
    assert right.closed.is_set()


async def test_a_slow_answer_does_not_hold_up_other_traffic():
    a, b = pair()
    gate = trio.Event()

    async def b_requests(method, params):
        if method == "slow":
            await gate.wait()
            return "slow"
        return "fast"

    left, right = Peer(a, a), Peer(b, b, on_request=b_requests)
    got: list[str] = []
    async with trio.open_nursery() as n:
        await n.start(left.serve)
        await n.start(right.serve)

        async def ask(m):
            got.append(await left.request(m))
        n.start_soon(ask, "slow")
        await trio.testing.wait_all_tasks_blocked()
        await ask("fast")
        assert got == ["fast"]
        gate.set()
        await trio.testing.wait_all_tasks_blocked()
        assert got == ["fast", "slow"]
        n.cancel_scope.cancel()


async def test_a_hostile_other_side():
    a, b = pair()
    left = Peer(a, a, max_line=1000)
    async with trio.open_nursery() as n:
        await n.start(left.serve)

        async def pending():
            with pytest.raises(Closed):
                await left.request("anything")
        n.start_soon(pending)
        await trio.testing.wait_all_tasks_blocked()
        first = json.loads((await b.receive_some()).decode())
        await b.send_all(b"not json\n")
        assert json.loads((await b.receive_some()).decode())["error"]["code"] == -32700
        await b.send_all(b'{"jsonrpc":"2.0","id":999,"result":1}\n[1,2]\n')  # a stray answer, then a non-object
        assert json.loads((await b.receive_some()).decode())["error"]["code"] == -32600
        await b.send_all(json.dumps({"jsonrpc": "2.0", "id": first["id"], "result": 1}).encode()[:-1])
        await b.send_all(b"x" * 2000)  # no newline: a flood, not a line
    assert left.closed.is_set() and "over 1000 bytes" in left.why_closed

"""Healing on load (S2): broken histories are repaired through Store.load, and only once.

Each history is appended as written, healed, checked with pairing_problems, then loaded again unchanged.
"""
from __future__ import annotations

import pytest

from orchestrator.core.types import Draft, Message, TextBlock, ToolCallBlock, ToolResultBlock
from orchestrator.store.db import Store
from orchestrator.store.heal import INTERRUPTED, pairing_problems, plan


@pytest.fixture
async def store():
    s = await Store.open(":memory:")
    yield s
    await s.close()


def call(author: str, *ids: str) -> Draft:
    blocks = [ToolCallBlock(id=i, name="probe", input={"i": i}) for i in ids]
    return Draft(author=author, kind="tool_call", blocks=blocks, visible_to=[author])


def result(author: str, call_id: str, content: str = "ok") -> Draft:
    block = ToolResultBlock(call_id=call_id, name="probe", content=content)
    return Draft(author=author, kind="tool_result", blocks=[block], visible_to=[author])


def say(author: str, text: str = "hi") -> Draft:
    return Draft(author=author, kind="user" if author == "user" else "text", blocks=[TextBlock(text)],
                 visible_to=["*"])


def answers(messages: list[Message], author: str) -> list[tuple[str, str]]:
    """(call id, content) of `author`'s results in seq order."""
    return [(m.result.call_id, m.result.content) for m in messages
            if m.kind == "tool_result" and m.author == author]


async def heal(store: Store, drafts: list[Draft]) -> tuple[list[Message], list[Message]]:
    """Store `drafts` as written; return them and the healed history, after checking it holds."""
    room = await store.create_room("heal")
    stored = await store.append_many(room.id, drafts)
    healed = await store.load(room.id)
    assert pairing_problems(healed) == []
    assert plan(healed).empty()
    assert await store.load(room.id) == healed  # idempotent: same ids, seqs, ts and blocks
    assert [m.seq for m in healed] == sorted({m.seq for m in healed})
    return stored, healed


GOOD = {
    "empty": [],
    "no tools": [say("user"), say("a")],
    "in order": [call("a", "c1", "c2"), result("a", "c1"), result("a", "c2"), say("a")],
    "others in between": [call("a", "c1", "c2"), say("user"), result("a", "c1"), call("b", "c1"),
                           say("b"), result("a", "c2"), result("b", "c1")],
    "ids reused across turns": [call("a", "c1"), result("a", "c1", "one"), say("user"),
                                call("a", "c1"), result("a", "c1", "two")],
}


@pytest.mark.parametrize("drafts", GOOD.values(), ids=GOOD.keys())
async def test_good_histories_are_left_alone(store, drafts):
    stored, healed = await heal(store, drafts)
    assert healed == stored


async def test_call_without_results_gets_interrupted_results_in_declared_order(store):
    stored, healed = await heal(store, [say("user"), call("a", "c1", "c2"), say("b")])
    assert healed[:3] == stored
    assert answers(healed, "a") == [("c1", INTERRUPTED), ("c2", INTERRUPTED)]
    synthesized = healed[3:]
    assert [m.seq for m in synthesized] == [4, 5]
    assert all(m.result.is_error and m.visible_to == ["a"] for m in synthesized)


async def test_result_without_call_is_dropped(store):
    stored, healed = await heal(store, [
        result("a", "ghost"),                      # no call at all
        result("a", "c1", "early"), call("a", "c1"),  # before its call
        result("a", "c1", "late"),
        result("b", "c1"),                         # pairing is per author
    ])
    assert [m.id for m in healed] == [stored[2].id, stored[3].id]
    assert answers(healed, "a") == [("c1", "late")]


async def test_results_out_of_order_are_renumbered_not_rewritten(store):
    stored, healed = await heal(store, [call("a", "c1", "c2", "c3"), result("a", "c3"), say("user"),
                                        result("a", "c1"), result("a", "c2")])
    assert {m.id for m in healed} == {m.id for m in stored}
    assert {m.seq for m in healed} == {m.seq for m in stored}
    assert [c for c, _ in answers(healed, "a")] == ["c1", "c2", "c3"]
    assert healed[2] == stored[2]  # the user line keeps its place


async def test_duplicate_result_keeps_the_first(store):
    stored, healed = await heal(store, [call("a", "c1", "c2"), result("a", "c1", "first"),
                                        result("a", "c1", "again"), result("a", "c2")])
    assert answers(healed, "a") == [("c1", "first"), ("c2", "ok")]
    assert stored[2].id not in {m.id for m in healed}


async def test_a_mix_of_everything(store):
    stored, healed = await heal(store, [
        call("a", "c1", "c2", "c3"),
        result("a", "c2", "real"),
        result("a", "x"),
        result("a", "c2", "dup"),
        say("user", "stop"),
    ])
    assert answers(healed, "a") == [("c1", INTERRUPTED), ("c2", "real"), ("c3", INTERRUPTED)]
    kept = {m.id for m in healed}
    assert stored[1].id in kept and stored[2].id not in kept and stored[3].id not in kept


async def test_several_authors_interleaved(store):
    _, healed = await heal(store, [
        call("a", "a1", "a2"),
        call("b", "b1"),
        say("user", "meanwhile"),
        result("b", "b1"),
        result("a", "a2"),
        result("a", "a1"),
        call("b", "b2", "b3"),
        result("b", "b3"),
        result("a", "b2"),  # a's result for b's call
        say("a"),
    ])
    assert [c for c, _ in answers(healed, "a")] == ["a1", "a2"]
    assert answers(healed, "b") == [("b1", "ok"), ("b2", INTERRUPTED), ("b3", "ok")]


async def test_unanswered_call_with_a_reused_id_is_healed_once(store):
    _, healed = await heal(store, [call("a", "c1"), say("user"), call("a", "c1"), result("a", "c1")])
    assert answers(healed, "a") == [("c1", "ok"), ("c1", INTERRUPTED)]


def test_plan_lists_what_is_wrong():
    def message(seq: int, draft: Draft) -> Message:
        return Message(id=f"m{seq}", room="r", seq=seq, ts=float(seq), **{
            f: getattr(draft, f) for f in Draft.__struct_fields__})

    history = [message(1, call("a", "c1", "c2")), message(2, result("a", "c2")),
               message(3, result("a", "c1")), message(4, result("a", "zz"))]
    fix = plan(history)
    assert fix.add == [] and fix.delete == ["m4"] and fix.reseq == [("m3", 2), ("m2", 3)]
    assert len(pairing_problems(history)) == 2

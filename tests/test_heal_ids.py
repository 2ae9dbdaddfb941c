"""Healing gives what it synthesizes ids that depend only on the stored history: a read-only heal (for `show`)
and the heal that writes must name the same results alike."""
from __future__ import annotations

import re


from orchestrator.core.types import Draft, Message, ToolCallBlock, ToolResultBlock
from orchestrator.store.db import Store
from orchestrator.store.heal import INTERRUPTED, plan


def call(author: str, *ids: str) -> Draft:
    return Draft(author=author, kind="tool_call", blocks=[ToolCallBlock(i, "probe", {"i": i}) for i in ids],
                 visible_to=[author])


def result(author: str, call_id: str) -> Draft:
    return Draft(author=author, kind="tool_result", blocks=[ToolResultBlock(call_id, "probe", "ok")],
                 visible_to=[author])


def stored(drafts: list[Draft]) -> list[Message]:
    return [Message(id=f"{seq:032x}", room="r", seq=seq, ts=float(seq), **{
        f: getattr(d, f) for f in Draft.__struct_fields__}) for seq, d in enumerate(drafts, 1)]


BROKEN = [call("a", "c1", "c2"), result("a", "c2"), call("b", "c1"), call("a", "c1")]  # a reused call id too


def test_planning_twice_gives_the_same_ids_one_per_synthesized_result():
    history = stored(BROKEN)
    first, second = plan(history), plan(list(history))
    assert len(first.ids) == len(first.add) == 3
    assert first.ids == second.ids
    assert len(set(first.ids)) == 3 and all(re.fullmatch(r"[0-9a-f]{32}", i) for i in first.ids)
    assert not set(first.ids) & {m.id for m in history}


async def test_a_read_only_heal_and_the_real_one_name_the_results_alike(tmp_path):
    path = tmp_path / "room.db"
    store = await Store.open(path)
    try:
        room = await store.create_room("broken")
        await store.append_many(room.id, BROKEN)
    finally:
        await store.close()
    shown = await Store.open(path, readonly=True)
    try:
        seen = await shown.load(room.id)
    finally:
        await shown.close()
    store = await Store.open(path)
    try:
        healed = await store.load(room.id)
    finally:
        await store.close()
    ids = [[m.id for m in ms if m.kind == "tool_result" and m.result.content == INTERRUPTED] for ms in (seen, healed)]
    assert len(ids[0]) == 3 and ids[0] == ids[1]

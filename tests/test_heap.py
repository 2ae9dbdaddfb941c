"""The host's collector policy (room/heap.py): frozen room state is left out of full passes, and what became
cyclic garbage in the frozen heap is freed once many rooms closed or memory doubled, and at the host's end."""
from __future__ import annotations

import gc
import weakref

import pytest
import trio

from orchestrator.core import startup
from orchestrator.room import host as host_module
from orchestrator.room.heap import Heap
from orchestrator.room.host import RoomHost
from orchestrator.store.db import Store
from tests.test_host import Relay, _team


class Node:
    def __init__(self):
        self.me = self  # a cycle: only the collector frees it


@pytest.fixture(autouse=True)
def thawed():
    yield
    gc.unfreeze()


def _frozen_garbage(heap: Heap) -> list[weakref.ref]:
    """Ten cycles frozen by a settle after the first (the baseline), then dropped: garbage only a thaw frees."""
    heap.settle()
    kept = [Node() for _ in range(10)]
    heap.settle()
    return [weakref.ref(n) for n in kept]


def test_a_settle_freezes_and_a_full_pass_leaves_the_frozen_alone():
    heap = Heap()
    kept = [Node() for _ in range(100)]
    heap.settle()
    assert gc.get_freeze_count() >= len(kept)
    refs = [weakref.ref(n) for n in kept]
    del kept
    gc.collect()
    assert all(r() is not None for r in refs)  # frozen: the collector does not look at them


def test_cycles_in_the_frozen_heap_are_freed_once_many_rooms_closed():
    heap = Heap()
    refs = _frozen_garbage(heap)
    for _ in range(50):
        heap.closed(open_rooms=100)
    gc.collect()
    assert all(r() is not None for r in refs)  # 50 closed of 100 open: not yet
    heap.closed(open_rooms=100)
    gc.collect()  # unfrozen at the 51st: any collection frees them now
    assert all(r() is None for r in refs)
    heap.settle()  # the due full pass, then a fresh freeze
    assert gc.get_freeze_count() > 0


def test_cycles_in_the_frozen_heap_are_freed_when_memory_doubles():
    used = [1_000]
    heap = Heap(used=lambda: used[0], gap=0)
    refs = _frozen_garbage(heap)
    used[0] = 2_000  # doubled, not more
    heap.settle()
    assert all(r() is not None for r in refs)
    used[0] = 2_001
    heap.settle()
    assert all(r() is None for r in refs)


def test_young_passes_back_off_while_they_find_nothing_and_come_back_when_one_finds_a_cycle(monkeypatch):
    passes: list[int] = []
    collect = gc.collect

    def counted(generation: int = 2) -> int:
        found = collect(generation)
        if generation == 1:
            passes.append(found)
        return found

    monkeypatch.setattr(gc, "collect", counted)
    gc.disable()  # no automatic pass may free the test's cycles first (the heap's run sets threshold 0)
    try:
        collect()
        heap = Heap()

        def settles_with_a_pass(count: int) -> list[int]:
            ran = []
            for n in range(1, count + 1):
                before = len(passes)
                heap.settle()
                if len(passes) > before:
                    ran.append(n)
            return ran

        assert settles_with_a_pass(15) == [1, 3, 7, 15] and passes == [0, 0, 0, 0]  # 1, 2, 4, 8 settles apart
        for _ in range(15):
            heap.settle()  # the 16th to the 30th: the gap is at its longest, 16
        Node()  # a cycle made in the second before the next pass (the 31st settle)
        heap.settle()
        assert passes[-1] >= 1
        assert settles_with_a_pass(4) == [1, 3]  # found one: the next settle walks again, then backs off anew
    finally:
        gc.enable()


async def test_the_host_gives_everything_back_to_the_collector_when_it_closes(tmp_path, monkeypatch):
    monkeypatch.setattr(startup, "_TUNED", True)  # the policy a program turns on (the CLI does)
    monkeypatch.setattr(host_module, "Heap", lambda: Heap(every=0.01))
    store = await Store.open(tmp_path / "heap.db")
    model = Relay()
    before = gc.get_threshold()
    try:
        async with RoomHost.open(store, lambda _m: (model, "relay"), team=_team()) as host:
            await host.ask(None, "a line", workspace=tmp_path)
            with trio.fail_after(10):
                while not gc.get_freeze_count():  # the rooms' state is frozen within a settle or two
                    await trio.sleep(0.01)
            # while it runs, every pass is the heap's own (a young one each settle, a full one each thaw)
            assert gc.get_threshold()[0] == 0
        assert gc.get_freeze_count() == 0 and gc.get_threshold() == before
    finally:
        await store.close()


def test_growth_thaws_at_most_once_a_gap():
    used = [1_000]
    heap = Heap(used=lambda: used[0], gap=3600)
    refs = _frozen_garbage(heap)
    used[0] = 10_000  # rooms opening: memory grows fast, most of it alive
    heap.settle()
    assert all(r() is not None for r in refs)  # no full pass yet: the last one (the first freeze) was just now


def test_a_process_freezes_what_it_holds_once_as_its_first_room_opens(monkeypatch):
    """Its modules and configuration live as long as it does: collected once, then frozen out of every full pass;
    the rooms it opens later change nothing, and a process that manages its collector itself is left alone."""
    from orchestrator.room import heap

    calls: list[str] = []
    monkeypatch.setattr(gc, "collect", lambda *args: calls.append("collect") or 0)
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    monkeypatch.setattr(heap, "_STARTED", False)
    monkeypatch.setattr(startup, "_TUNED", False)
    heap.freeze_startup()  # a process whose program did not ask for it is left alone
    assert calls == []
    monkeypatch.setattr(startup, "_TUNED", True)
    heap.freeze_startup()
    heap.freeze_startup()
    assert calls == ["collect", "freeze"]

    calls.clear()
    monkeypatch.setattr(heap, "_STARTED", False)
    thresholds = gc.get_threshold()
    gc.set_threshold(0)  # as a running Heap leaves it
    try:
        heap.freeze_startup()
    finally:
        gc.set_threshold(*thresholds)
    assert calls == []


async def test_opening_a_room_freezes_the_process_once(tmp_path, monkeypatch):
    from orchestrator.room import heap
    from orchestrator.room.room import Room

    monkeypatch.setattr(heap, "_STARTED", False)
    monkeypatch.setattr(startup, "_TUNED", True)
    store = await Store.open(tmp_path / "r.db")
    try:
        before = gc.get_freeze_count()
        async with Room.create(store, _team(), lambda _m: (Relay(0), "relay"), workspace=tmp_path):
            pass
        frozen = gc.get_freeze_count()
        assert frozen > before
        async with Room.create(store, _team(), lambda _m: (Relay(0), "relay"), workspace=tmp_path):
            pass
        assert gc.get_freeze_count() == frozen
    finally:
        await store.close()

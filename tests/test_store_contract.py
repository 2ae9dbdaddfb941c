"""The store's contract (store/contract.py): both stores offer every method it lists, with its signature, and
none is left to the protocol's empty body; their records say the same; the lookup errors are input errors."""
from __future__ import annotations

import inspect

import pytest

from orchestrator.core.errors import AmbiguousRoom, InputError, RoomNotFound
from orchestrator.core.types import Draft, TextBlock
from orchestrator.store.contract import Store
from orchestrator.store.db import SqliteStore
from orchestrator.store.postgres import PgStore

MEMBERS = sorted(name for name, value in vars(Store).items() if not name.startswith("_") and callable(
    value.__func__ if isinstance(value, classmethod) else value))


def _shape(fn) -> list[tuple]:
    """The parameters as a caller sees them: positional-only ones by place, the rest by name too."""
    return [(p.kind, None if p.kind is p.POSITIONAL_ONLY else p.name, p.default)
            for p in inspect.signature(fn).parameters.values()]


def test_the_contract_lists_the_stores_methods():
    assert len(MEMBERS) >= 28 and {"append", "load", "acquire", "inbox", "call", "open"} <= set(MEMBERS)


@pytest.mark.parametrize("cls", [SqliteStore, PgStore])
@pytest.mark.parametrize("name", MEMBERS)
def test_each_store_implements_each_method_as_the_contract_says(cls, name):
    promised, offered = getattr(Store, name), getattr(cls, name)
    assert inspect.getsource(offered) != inspect.getsource(promised), f"{cls.__name__}.{name} is the protocol's stub"
    assert inspect.iscoroutinefunction(offered) == inspect.iscoroutinefunction(promised), name
    shape = _shape(offered)
    if name == "open":  # the target is the first parameter, whatever each store calls it
        shape = [(kind if i else inspect.Parameter.POSITIONAL_ONLY, None if i == 0 else n, d)
                 for i, (kind, n, d) in enumerate(shape)]
    assert shape == _shape(promised), name
    assert inspect.getdoc(offered), f"{cls.__name__}.{name} has no docstring, not even the contract's"


def test_room_lookups_fail_as_input_errors_with_their_own_types():
    assert issubclass(RoomNotFound, InputError) and issubclass(AmbiguousRoom, InputError)
    assert str(RoomNotFound("no room 'x' in this database")) == "no room 'x' in this database"


async def test_a_rooms_record_says_its_last_seq_and_activity_on_either_store(backend):
    store = await backend.open()
    try:
        room = await store.create_room("r")
        assert (await store.room(room.id)).last_seq == 0
        drafts = [Draft(author="user", kind="user", blocks=[TextBlock(t)], visible_to=["*"]) for t in "ab"]
        last = (await store.append_many(room.id, drafts))[-1]
        found = await store.room(room.id)
        assert (found.last_seq, found.last_ts, found.messages) == (2, last.ts, 2)
        assert [(r.last_seq, r.last_ts) for r in await store.rooms()] == [(2, last.ts)]
        assert await store.messages(room.id) == await store.read(room.id) == await store.load(room.id)
    finally:
        await store.close()

"""The floor: who answers a user line that names nobody. The commander holds it unless it handed
it to an interactive member, which keeps it until its message ends with `<handback />`.

Every change is persisted before it is announced, so a reopened room gives the floor to the same member.
"""
from __future__ import annotations

import time
from typing import Callable

from orchestrator.core.events import Event, State
from orchestrator.room.members import COMMANDER
from orchestrator.store.contract import Store


class Floor:
    def __init__(self, store: Store, room_id: str, owner: str, publish: Callable[[Event], None]):
        self._store, self._room, self._publish = store, room_id, publish
        self.owner = owner

    def announce(self) -> None:
        self._publish(State(ts=time.time(), room=self._room, floor=self.owner))

    async def give(self, owner: str) -> None:
        if owner == self.owner:
            return
        self.owner = owner
        await self._store.set_floor(self._room, owner)
        self.announce()

    async def hand_back(self, member: str) -> bool:
        """`member` ended a message with the handback marker: the floor returns to the commander if
        `member` held it (a member that did not hold it has nothing to hand back)."""
        if self.owner != member:
            return False
        await self.give(COMMANDER)
        return True

"""core/passes.py: a free lock or limiter is taken without a pass through the scheduler; a busy one is waited for
in line, and a cancelled task never takes one."""
from __future__ import annotations

import pytest
import trio
import trio.testing

from orchestrator.core.passes import held


def kinds():
    return [trio.Lock(), trio.CapacityLimiter(1)]


class Steps(trio.abc.Instrument):
    """How many times a task was resumed: once more for every pass through the scheduler it made."""

    def __init__(self, task: trio.lowlevel.Task):
        self.task, self.count = task, 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.task:
            self.count += 1


@pytest.mark.parametrize("lock", kinds(), ids=["lock", "limiter"])
async def test_a_free_one_is_taken_without_a_pass_through_the_scheduler(lock):
    steps = Steps(trio.lowlevel.current_task())
    trio.lowlevel.add_instrument(steps)
    try:
        async with held(lock):
            pass
        assert steps.count == 0
        async with lock:  # trio's own acquire yields once, even to a free lock
            pass
        assert steps.count == 1
    finally:
        trio.lowlevel.remove_instrument(steps)


@pytest.mark.parametrize("lock", kinds(), ids=["lock", "limiter"])
async def test_a_busy_one_is_waited_for_in_line(lock):
    order: list[str] = []
    release = trio.Event()

    async def user(name: str, until: trio.Event | None = None) -> None:
        async with held(lock):
            order.append(name)
            if until is not None:
                await until.wait()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(user, "first", release)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(user, "second")
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(user, "third")
        await trio.testing.wait_all_tasks_blocked()
        assert order == ["first"]
        release.set()
    assert order == ["first", "second", "third"]


@pytest.mark.parametrize("lock", kinds(), ids=["lock", "limiter"])
async def test_a_cancelled_task_does_not_take_it(lock):
    taken = False
    with trio.CancelScope() as scope:
        scope.cancel()
        async with held(lock):
            taken = True
    assert scope.cancelled_caught and not taken
    lock.acquire_nowait()  # still free
    lock.release()

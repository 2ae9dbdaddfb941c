"""The chat shell's hold on the room it has open: the room's lease, renewed while the shell talks in it, so a
second shell (or a `serve` worker) on the same room is refused instead of writing beside it.

A shell killed without a goodbye leaves its lease until it runs out; a lease whose holder is a process of this
machine that no longer exists is given up at once, so resuming after a crash never waits.
"""
from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from orchestrator.core.errors import InputError
from orchestrator.core.log import logger
from orchestrator.store.lease import LEASE_SECONDS, Lease

log = logger(__name__)


def me() -> str:
    """This shell in the leases: serve's workers are `HOST:PID`, a shell is `chat@HOST:PID`."""
    return f"chat@{socket.gethostname()}:{os.getpid()}"


def _dead_here(holder: str) -> bool:
    """The holder names a process of this machine that is gone (a pid reused since is taken for alive)."""
    machine, _, pid = holder.rpartition(":")
    if machine.rpartition("@")[2] != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, another user's
        return False
    return False


@asynccontextmanager
async def holding(store, room_id: str, name: str, nursery: trio.Nursery,
                  seconds: float = LEASE_SECONDS) -> AsyncIterator[None]:
    """The block runs holding room `room_id`'s lease (InputError, said in one line, when a live process holds
    it), renewed by a task in `nursery` (not one of its own: the block's errors stay as they are); the lease is
    given up when the block ends, however it ends."""
    lease = await store.acquire(room_id, me(), seconds)
    if lease is None:
        held = next(iter(await store.leases(room_id)), None)
        if held is not None and _dead_here(held.host):
            await store.release(held)  # by its epoch: a holder that took it meanwhile keeps it
            log.info("lease of a dead process given up", room=room_id, holder=held.host)
            lease = await store.acquire(room_id, me(), seconds)
        if lease is None:
            who = f" ({held.host})" if held is not None else ""
            raise InputError(f"room {name} ({room_id}) is open in another chat or server{who}: leave it there "
                             f"first; a session that was killed lets it go within {seconds:.0f} s")
    current, renewal = [lease], trio.CancelScope()
    nursery.start_soon(_renewing, store, current, seconds, renewal)
    try:
        yield
    finally:
        renewal.cancel()
        with trio.CancelScope(shield=True):
            try:
                await store.release(current[0])
            except Exception as exc:  # noqa: BLE001 (the lease then runs out by itself)
                log.warning("lease not released", room=room_id, error=repr(exc))


async def _renewing(store, current: list[Lease], seconds: float, scope: trio.CancelScope) -> None:
    with scope:
        while True:
            await trio.sleep(seconds / 3)
            renewed = await store.renew(current[0], seconds)
            if renewed is None:  # taken over (this process stalled past the lease): its writes are refused now
                log.warning("lease lost", room=current[0].room)
                return
            current[0] = renewed

"""The external agents' private HOMEs kept in the user's state folder, one per room and member: where they are, the
lock a running agent holds on its own, and their removal once their room is gone for good.

An agent wrote everything in its HOME, so a removal never follows a link found there and never leaves the acp
folder, whatever the names it is given say.
"""
from __future__ import annotations

import fcntl
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from orchestrator.core.log import logger
from orchestrator.core.resources import state_dir

if TYPE_CHECKING:
    from orchestrator.store.contract import Store

log = logger(__name__)

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_BLOCKING = trio.CapacityLimiter(1)
_HOLD_TRIES = 5  # a prune removes a HOME at most once while a start waits on it; more is a folder swapped in a loop


def root() -> Path:
    """Where the HOMEs are: the user's state folder, beside the MCP servers' logs."""
    return state_dir() / "acp"


def home(room: str, member: str) -> Path:
    """The member's HOME in this room, kept across the room's restarts (the agent keeps its sessions there)."""
    for name in (room, member):
        if not _plain(name):
            raise ValueError(f"{name!r} cannot name a folder of the agents' HOMEs")
    return root() / room / member


def _plain(name: str) -> bool:
    """A single name inside a folder: no separator, no NUL, not `.` or `..`."""
    return bool(name) and "/" not in name and "\0" not in name and name not in (".", "..")


def hold(folder: Path) -> int:
    """Make the HOME `folder` (owner-only) when missing and take a shared lock on it for as long as the returned
    descriptor is open, so that a prune leaves a running agent's HOME alone. Blocking: a prune removing it
    holds the lock meanwhile, and then it is made again."""
    for _ in range(_HOLD_TRIES):
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(folder, _DIR)  # a link at its place is refused, not followed
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            if os.path.samestat(os.fstat(fd), os.stat(folder, follow_symlinks=False)):
                return fd
        except FileNotFoundError:
            pass  # removed by the prune that held the lock
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    raise OSError(f"{folder} was removed again each time it was made")


@dataclass(frozen=True)
class Outcome:
    """What became of one entry of a room's folder (a member's HOME), or of the room's place itself when no
    folder stood there."""

    path: Path
    kept: str = ""  # why it is still there; "" when it was removed (in a dry run: would be)
    failed: bool = False  # kept because the removal failed or was refused, not because it is in use
    link: bool = False  # not a folder: removed as it is, what it points to untouched


def rooms() -> list[str]:
    """The rooms that have HOMEs, by the names of their folders (a missing acp folder has none)."""
    try:
        return sorted(e.name for e in os.scandir(root()))
    except (FileNotFoundError, NotADirectoryError):
        return []


def remove(names: Iterable[str], *, dry_run: bool = False) -> list[Outcome]:
    """The folders of these rooms with their members' HOMEs, unless an agent of the room is running (the room is
    in use, then, somewhere the caller did not look). A name that is not a plain folder name is refused."""
    outcomes: list[Outcome] = []
    where = root()
    try:
        top = os.open(where, _DIR & ~os.O_NOFOLLOW)  # the state folder is the user's own: a link there is theirs
    except (FileNotFoundError, NotADirectoryError):
        return []
    try:
        for name in names:
            if not _plain(name):
                outcomes.append(Outcome(where / name, f"refused: {name!r} is not the name of a room's folder", True))
                continue
            outcomes += _room(top, where, name, dry_run)
    finally:
        os.close(top)
    return outcomes


def _room(top: int, where: Path, name: str, dry_run: bool) -> list[Outcome]:
    place = where / name
    try:
        st = os.stat(name, dir_fd=top, follow_symlinks=False)
    except FileNotFoundError:
        return []
    if not stat.S_ISDIR(st.st_mode):  # a link (or a file) in the room's place: taken away, never followed
        return [_unlink(top, name, place, dry_run)]
    try:
        folder = _opendir(name, top, fix=not dry_run)
    except OSError as exc:
        if dry_run and isinstance(exc, PermissionError):  # a real run makes it readable first
            return [Outcome(place)]
        return [Outcome(place, exc.strerror or str(exc), True)]
    locks: list[int] = []
    try:
        members: list[tuple[str, bool]] = []
        with os.scandir(folder) as entries:
            for entry in entries:
                members.append((entry.name, entry.is_dir(follow_symlinks=False)))
        busy = []
        for member, is_dir in sorted(members):
            if is_dir:
                try:
                    fd = _opendir(member, folder, fix=not dry_run)
                except OSError as exc:
                    if dry_run and isinstance(exc, PermissionError):  # as above; its lock cannot be looked at
                        continue
                    return [Outcome(place / member, exc.strerror or str(exc), True)]
                locks.append(fd)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    busy.append(member)
        if busy:
            return [Outcome(place / m, f"{'its agent' if m in busy else 'an agent of its room'} is running")
                    for m, _ in sorted(members)]
        outcomes = []
        for member, is_dir in sorted(members):
            if not is_dir:
                outcomes.append(_unlink(folder, member, place / member, dry_run))
                continue
            try:
                if not dry_run:
                    _remove_tree(folder, member)
                outcomes.append(Outcome(place / member))
            except OSError as exc:
                outcomes.append(Outcome(place / member, exc.strerror or str(exc), True))
        if not dry_run:
            try:
                os.rmdir(name, dir_fd=top)
            except OSError:
                pass  # something is left in it (a HOME that could not go, or one made meanwhile): said above
        return outcomes or [Outcome(place)]  # a room's folder with no HOME left in it
    finally:
        for fd in locks:
            os.close(fd)
        os.close(folder)


def _unlink(parent: int, name: str, path: Path, dry_run: bool) -> Outcome:
    try:
        if not dry_run:
            os.unlink(name, dir_fd=parent)
        return Outcome(path, link=True)
    except OSError as exc:
        return Outcome(path, exc.strerror or str(exc), True, link=True)


def _opendir(name: str, parent: int, *, fix: bool = True) -> int:
    """The folder `name` of `parent`, opened without following a link, and (`fix`) made the owner's to list and
    empty: an agent's tools may have left it read-only (Go's module cache is) or unreadable."""
    try:
        fd = os.open(name, _DIR, dir_fd=parent)
    except PermissionError:
        if not fix:
            raise
        handle = os.open(name, os.O_PATH | _DIR, dir_fd=parent)  # needs no permission on the folder
        try:
            os.chmod(f"/proc/self/fd/{handle}", 0o700)  # the folder this handle holds, not a name looked up again
        finally:
            os.close(handle)
        fd = os.open(name, _DIR, dir_fd=parent)
    try:
        if fix and stat.S_IMODE(os.fstat(fd).st_mode) & 0o700 != 0o700:
            os.fchmod(fd, 0o700)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _remove_tree(parent: int, name: str) -> None:
    """The folder `name` of `parent` and everything in it, each entry taken relative to its own folder's
    descriptor: a link is removed as a link, never followed. Without recursion, since an agent can nest
    folders deeper than Python's stack."""
    stack = [(parent, name, _opendir(name, parent))]
    try:
        while stack:
            fd = stack[-1][2]
            deeper = None
            with os.scandir(fd) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        deeper = entry.name
                        break
                    os.unlink(entry.name, dir_fd=fd)
            if deeper is not None:
                stack.append((fd, deeper, _opendir(deeper, fd)))
                continue
            up, done, _ = stack.pop()
            os.close(fd)
            os.rmdir(done, dir_fd=up)
    finally:
        for _, _, fd in stack:
            os.close(fd)


def remove_folder(folder: Path) -> None:
    """`folder` (a fresh HOME of one run, say) and all in it, as `remove` takes a room's: links never followed,
    read-only folders made writable first. What cannot be removed is logged and left."""
    try:
        parent = os.open(folder.parent, _DIR & ~os.O_NOFOLLOW)
    except FileNotFoundError:
        return
    try:
        _remove_tree(parent, folder.name)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("an agent's HOME could not be removed", folder=str(folder), error=str(exc))
    finally:
        os.close(parent)


async def forget(room_ids: Iterable[str]) -> None:
    """The HOMEs of rooms whose store the project is deleting (a temporary one, a pruned run): off the loop and
    shielded, since it runs as the store goes. What stays (an agent still running) `agents prune` finds later."""
    names = list(room_ids)
    if not names:
        return
    try:
        with trio.CancelScope(shield=True):
            outcomes = await trio.to_thread.run_sync(remove, names, limiter=_BLOCKING)
    except OSError as exc:  # the acp folder itself cannot be read: not this store's business to fail on
        log.warning("the agents' HOMEs could not be removed", error=str(exc))
        return
    for o in outcomes:
        if o.kept:
            log.info("an agent's HOME was kept", path=str(o.path), why=o.kept)


async def _any() -> bool:
    """Whether any room has HOMEs at all."""
    return bool(await trio.to_thread.run_sync(rooms, limiter=_BLOCKING))


async def forget_store(store: Store) -> None:
    """The HOMEs of every room of `store`, which is about to be deleted with them. A store that fails to list
    them is passed over: what made it fail is said by its caller, and `agents prune` removes them later."""
    with trio.CancelScope(shield=True):
        if not await _any():
            return
        try:
            ids = [r.id for r in await store.rooms()]
        except Exception as exc:
            log.info("the rooms of a store to delete could not be listed", error=str(exc))
            return
        await forget(ids)


async def forget_dbs(dbs: Iterable[Path | str]) -> None:
    """The HOMEs of every room of these databases, about to be deleted (the oldest kept runs, say); one that
    cannot be read is passed over, and `agents prune` removes its rooms' HOMEs once it is gone."""
    from orchestrator.store.backends import open_store

    if not await _any():  # the common case, no external agent ever ran: no database is opened for nothing
        return
    for db in dbs:
        try:
            store = await open_store(db, readonly=True)
        except Exception as exc:  # a broken file is being deleted anyway: its HOMEs wait for a prune
            log.info("a database to delete could not be read", db=str(db), error=str(exc))
            continue
        try:
            await forget_store(store)
        finally:
            with trio.CancelScope(shield=True):
                await store.close()

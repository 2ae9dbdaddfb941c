"""The path sandbox: which paths tools may touch, and the one way to open, walk and replace them.
Roots are the workspace, the user's grants and, for reading only, the folders of activated skills;
credential, system and app-data folders are never allowed.
"""
from __future__ import annotations

import errno
import os
import pwd
import secrets
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import Literal

from orchestrator.tools import protected
from orchestrator.tools.base import ToolError
from orchestrator.tools.session import ToolSession

MAX_PATH = 4096  # bytes, Linux's PATH_MAX
MAX_NAME = 255  # bytes per component
MAX_LINKS = 40  # symlinks followed while resolving, as the kernel allows

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO that slipped past the pre-check must not hang the open
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK

# Relative to a home folder; as a run of components they are refused anywhere outside the workspace too
# (another user's ~/.ssh), inside it only where they sit in a home folder (a workspace that is $HOME).
CREDENTIALS = tuple(tuple(p.split("/")) for p in (
    ".ssh", ".aws", ".gnupg", ".kube", ".docker", ".azure", ".password-store", ".config/gcloud",
    ".config/gh", ".local/share/keyrings", "Library/Keychains", ".netrc", ".git-credentials", ".pgpass",
    # package registries, infrastructure and model hubs: tokens in plain files
    ".npmrc", ".yarnrc", ".yarnrc.yml", ".pypirc", ".cargo/credentials", ".cargo/credentials.toml",
    ".gem/credentials", ".composer/auth.json", ".gradle/gradle.properties", ".m2/settings.xml",
    ".vault-token", ".terraformrc", ".terraform.d", ".config/hub", ".config/glab-cli", ".huggingface",
    ".cache/huggingface", ".kaggle", ".config/rclone", ".config/op", ".config/doctl", ".oci", ".s3cfg",
    ".boto", ".databrickscfg", ".snowsql", ".wrangler", ".fly", ".my.cnf", ".config/configstore",
    ".config/git/credentials", ".local/share/keyrings",
    # browser profiles (cookies, saved passwords) and shell histories (pasted tokens)
    ".mozilla", ".config/google-chrome", ".config/chromium", ".config/BraveSoftware", ".config/microsoft-edge",
    ".config/vivaldi", "Library/Application Support/Google/Chrome", "Library/Application Support/Firefox",
    "Library/Cookies", ".bash_history", ".zsh_history", ".history", ".python_history", ".psql_history",
    ".mysql_history", ".node_repl_history", ".sqlite_history", ".lesshst", ".local/share/fish/fish_history",
))
_CREDENTIAL_ENDS = frozenset(c[-1] for c in CREDENTIALS)  # a walk only checks names that can end one
SYSTEM = ("/etc", "/proc", "/sys", "/dev", "/boot", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64",
          "/libx32", "/run", "/var/lib", "/var/log", "/var/run", "/var/db", "/private/etc", "/private/var/db",
          "/System")

Mode = Literal["file", "folder", "any", "write", "edit"]


@cache
def _system_folders() -> tuple[Path, ...]:
    # both spellings: /lib is /usr/lib on merged-/usr systems and /etc is /private/etc on macOS
    return tuple(dict.fromkeys(q for p in SYSTEM for q in (Path(p), Path(os.path.realpath(p)))))


def homes() -> tuple[Path, ...]:
    homes = [Path.home()]
    try:
        homes.append(Path(pwd.getpwuid(os.getuid()).pw_dir))  # the real home, should HOME point elsewhere
    except KeyError:
        pass
    return tuple(dict.fromkeys(Path(os.path.realpath(h)) for h in homes))


def app_data_folders() -> tuple[Path, ...]:
    """Where the application keeps what agents must never see: the default data folder (databases, kept
    runs, default workspaces), ORCHESTRATOR_DB's folder, the settings folder (config.toml and the trust
    store: keys, and which folders the user trusts) and the cache (the skill scanner's verdicts)."""
    env = os.environ
    data = Path(env.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    config = Path(env.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    cache = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folders = [data / "orchestrator", config / "orchestrator", cache / "orchestrator"]
    if db := env.get("ORCHESTRATOR_DB"):
        folders.append(Path(db).parent)
    if explicit := env.get("ORCHESTRATOR_CONFIG"):
        folders.append(Path(explicit).expanduser())
    return tuple(dict.fromkeys(Path(os.path.realpath(f)) for f in folders))


STORE_SUFFIXES = ("", "-wal", "-shm", "-journal")  # an SQLite database and the files beside it


def store_files(database: Path) -> tuple[Path, ...]:
    """A database file and the files SQLite keeps beside it, wherever `--db` put it."""
    real = Path(os.path.realpath(database))
    return tuple(dict.fromkeys(p.with_name(p.name + s) for p in (Path(os.path.abspath(database)), real)
                               for s in STORE_SUFFIXES))


@dataclass(frozen=True)
class Rules:
    """The sandbox as it stands for one tool call (grants and environment are read once)."""
    workspace: Path
    roots: tuple[Path, ...]
    homes: tuple[Path, ...]
    areas: tuple[tuple[Path, str], ...]  # folders refused outright, with the reason
    readable: tuple[Path, ...] = ()  # activated skills' folders: read, never written

    @classmethod
    def of(cls, session: ToolSession, *, writing: bool = False) -> Rules:
        areas = [(p, "a system folder") for p in _system_folders()]
        areas += [(p, "the application's own data folder") for p in app_data_folders()]
        areas += [(p, "the room's database") for p in session.private]
        readable = tuple(session.readable)
        roots = (session.workspace, *session.grants, *(() if writing else readable))
        return cls(session.workspace, roots, homes(), tuple(areas), readable)

    def refusal(self, path: Path) -> str | None:
        """Why `path` (absolute, normalized) may never be opened, or None."""
        in_ws = path.is_relative_to(self.workspace)
        parts = path.parts
        for cred in CREDENTIALS:
            for i in range(1, len(parts) - len(cred) + 1):
                if parts[i:i + len(cred)] == cred and (not in_ws or Path(*parts[:i]) in self.homes):
                    return f"{Path(*parts[:i + len(cred)])} holds credentials"
        if not in_ws and (path.name in (".env", ".envrc") or path.name.startswith(".env.")):
            return "a .env file outside the workspace may hold secrets"
        # a skill installed with the package may sit under /usr; its own folder stays readable
        skill = next((r for r in self.readable if path.is_relative_to(r)), None)
        for area, why in self.areas:
            # a workspace the user placed inside such a folder stays usable; nothing else there does
            if path.is_relative_to(area) and not (in_ws and self.workspace.is_relative_to(area)) \
                    and not (skill is not None and skill.is_relative_to(area)):
                return f"{area} is {why}"
        return None

    def child_refusal(self, parent: Path, name: str) -> str | None:
        """refusal(parent / name) for a `parent` that refusal() passed: only a rule that ends at
        `name` can newly apply, so most entries of a walk cost a set lookup, not path arithmetic."""
        if name in _CREDENTIAL_ENDS or name.startswith(".env") or f"{parent}/{name}" in self._area_names:
            return self.refusal(parent / name)
        return None

    @cached_property
    def _area_names(self) -> frozenset[str]:
        return frozenset(str(area) for area, _ in self.areas)

    def admit(self, raw: str, path: Path, via_link: bool) -> None:
        how = f" (it resolves through a symbolic link to {path})" if via_link else ""
        if reason := self.refusal(path):
            raise ToolError(f"{raw}: refused{how}: {reason}; tools can never open it, even when granted")
        if not any(path.is_relative_to(r) for r in self.roots):
            if any(path.is_relative_to(r) for r in self.readable):
                raise ToolError(f"{raw}: a skill's folder{how} is read-only; write in the workspace instead")
            raise ToolError(f"{raw}: outside the workspace{how}; tools may use only the workspace "
                            f"({self.workspace}), what the user granted, and activated skills' folders (reading)")


def _absolute(session: ToolSession, raw: str) -> str:
    if not raw or not raw.strip():
        raise ToolError("the path is empty")
    if "\0" in raw:
        raise ToolError(f"{raw!r}: a path cannot contain a NUL byte")
    encoded = os.fsencode(raw)
    if len(encoded) > MAX_PATH:
        raise ToolError(f"{raw[:80]}...: the path is too long ({len(encoded)} bytes; at most {MAX_PATH})")
    if any(len(c) > MAX_NAME for c in encoded.split(b"/")):
        raise ToolError(f"{raw[:80]}...: a path component is longer than {MAX_NAME} bytes")
    return os.path.join(session.workspace, os.path.expanduser(raw))


def _follow(raw: str, start: str) -> tuple[Path, bool]:
    """The symlink-free path `start` names, and whether a link was followed to get there.

    Like realpath, but `..` applies after each link is expanded, as the kernel does. Only advisory:
    whatever it finds is admitted by the rules and then opened without following anything.
    """
    pending = [c for c in reversed(start.split("/")) if c not in ("", ".")]
    done: list[str] = []
    links = 0
    missing = False
    while pending:
        name = pending.pop()
        if name == "..":
            if done:
                done.pop()
            continue
        if name == ".":
            continue
        if not missing:
            here = "/" + "/".join([*done, name])
            try:
                st = os.lstat(here)
            except OSError:
                missing = True  # the rest is taken as written; opening reports what is wrong
            else:
                if stat.S_ISLNK(st.st_mode):
                    links += 1
                    if links > MAX_LINKS:
                        raise ToolError(f"{raw}: too many symbolic links")
                    try:
                        target = os.readlink(here)
                    except OSError:
                        pending.append(name)  # it stopped being a link meanwhile: look again (still counted)
                        continue
                    if target.startswith("/"):
                        done = []
                    pending.extend(c for c in reversed(target.split("/")) if c not in ("", "."))
                    continue
        done.append(name)
    return Path("/", *done), links > 0


def resolve(session: ToolSession, raw: str, *, writing: bool = False) -> Path:
    """The physical path `raw` names (relative to the workspace), admitted by the sandbox, or ToolError."""
    rules = Rules.of(session, writing=writing)
    start = _absolute(session, raw)
    if reason := rules.refusal(Path(os.path.normpath(start))):  # before probing anything there
        raise ToolError(f"{raw}: refused: {reason}; tools can never open it, even when granted")
    path, via_link = _follow(raw, start)
    rules.admit(raw, path, via_link)
    return path


def shown(session: ToolSession, path: Path) -> str:
    """How to name `path` to the model: relative inside the workspace, absolute elsewhere."""
    return path.relative_to(session.workspace).as_posix() if path.is_relative_to(session.workspace) else str(path)


def root_of(session: ToolSession, path: Path) -> Path:
    """The workspace, grant or skill folder that holds `path` (the innermost, should they nest)."""
    return max((r for r in (session.workspace, *session.grants, *session.readable) if path.is_relative_to(r)),
               key=lambda r: len(r.parts))


def _os_error(raw: str, exc: OSError, folder: int, name: str) -> ToolError:
    if isinstance(exc, FileNotFoundError):
        return ToolError(f"{raw}: no such file or folder")
    try:
        is_link = stat.S_ISLNK(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    except OSError:
        is_link = False
    # O_NOFOLLOW met a link the resolution did not see: one was swapped in meanwhile
    if exc.errno == errno.ELOOP or is_link:
        return ToolError(f"{raw}: {name} turned into a symbolic link while being opened; refused")
    if isinstance(exc, NotADirectoryError):
        return ToolError(f"{raw}: {name} is not a folder (or it changed while being opened)")
    return ToolError(f"{raw}: {exc.strerror or exc}")


def _walk_to(raw: str, folder: Path, create: bool) -> int:
    """An fd of `folder`, reached from / without following any link; missing folders made if `create`.

    Checking a path and then opening it by name would let a link swapped in between lead anywhere,
    so every component is opened relative to its parent's fd with O_NOFOLLOW.
    """
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in folder.parts[1:]:
            try:
                nxt = os.open(name, _DIR, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise ToolError(f"{raw}: no such file or folder") from None
                try:
                    os.mkdir(name, dir_fd=fd)
                except FileExistsError:
                    pass  # another writer made it meanwhile
                except OSError as exc:
                    raise _os_error(raw, exc, fd, name) from None
                try:
                    nxt = os.open(name, _DIR, dir_fd=fd)
                except OSError as exc:
                    raise _os_error(raw, exc, fd, name) from None
            except OSError as exc:
                raise _os_error(raw, exc, fd, name) from None
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_entry(folder: int, name: str) -> tuple[int, os.stat_result] | None:
    """A regular file with a single link in an opened folder, opened without following links; else None."""
    try:
        before = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except OSError:
        return None
    if not stat.S_ISREG(before.st_mode) or before.st_nlink != 1:
        return None
    try:
        fd = os.open(name, _FILE, dir_fd=folder)
    except OSError:
        return None
    st = os.fstat(fd)
    if _identity(st) != _identity(before) or st.st_nlink != 1:
        os.close(fd)
        return None
    return fd, st


def _identity(st: os.stat_result) -> tuple[int, int, int, int]:
    """Which file, of what type, and its inode change time: every link, unlink, rename or write of the
    file moves ctime (at nanosecond grain once someone has looked at it, as the checks here do)."""
    return st.st_dev, st.st_ino, stat.S_IFMT(st.st_mode), st.st_ctime_ns


Listings = dict[tuple[int, int], tuple[int, dict[str, int]]]  # folder (dev, ino) -> (its ctime, name -> inode)


def _listed(folder: int, name: str, ino: int, seen: Listings | None) -> bool:
    """Whether the folder's entries, as the file system holds them, give `name` that inode.

    Not the name cache: an unlink removes the entry on disk and drops the link count before the cached
    name goes, so for a moment a lookup finds a file whose only other name is elsewhere, with one link.
    A listing is re-read whenever the folder changed (its ctime), so one walk lists each folder once."""
    st = os.fstat(folder)
    key = (st.st_dev, st.st_ino)
    entry = seen.get(key) if seen is not None else None
    if entry is None or entry[0] != st.st_ctime_ns:
        own = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=folder)  # its own read offset
        try:
            with os.scandir(own) as it:
                entry = (st.st_ctime_ns, {e.name: e.inode() for e in it})
        finally:
            os.close(own)
        if seen is not None:
            seen[key] = entry
    return entry[1].get(name) == ino


def still_single(folder: int, name: str, fd: int, opened: os.stat_result, seen: Listings | None = None) -> bool:
    """After reading through `fd`: does `name` still name that very file, unchanged since it was opened,
    as its only name, in the folder's entries themselves?

    A look at a link count can race an unlink, so counts alone can be fooled; a hard link swapped in
    and out again also moves the file's ctime, and the folder's own entries show where a name really
    points (see _listed)."""
    try:
        now = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except OSError:
        return False
    st = os.fstat(fd)
    return (_identity(now) == _identity(st) == _identity(opened) and now.st_nlink == st.st_nlink == 1
            and _listed(folder, name, st.st_ino, seen))


@dataclass
class Opened:
    """A checked path: its folder held open, and the object itself unless it does not exist yet."""
    path: Path
    folder: int
    name: str
    fd: int | None
    st: os.stat_result | None

    def held(self) -> tuple[int, os.stat_result]:
        """`fd` and `st`, there unless opened for "write" (whose file may not exist yet)."""
        assert self.fd is not None and self.st is not None, f"{self.path}: not opened"
        return self.fd, self.st


def _hard_links(raw: str, st: os.stat_result) -> ToolError:
    # Another name of the same file may sit anywhere on this file system (a link to ~/.ssh/id_rsa, say),
    # and nothing cheap can show where, so neither its content nor a write to it is allowed.
    return ToolError(f"{raw}: refused: this file has {st.st_nlink} hard links, and another name of it may lie "
                     f"outside the sandbox, so it is neither read nor written (stat_file still works)")


def read_fd(raw: str, fd: int, cap: int, hint: str = "") -> bytes:
    """Everything an opened file holds, refused once past `cap` bytes (whatever its size said)."""
    chunks, total = [], 0
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
        total += len(chunk)
        if total > cap:
            raise ToolError(f"{raw}: larger than {cap >> 20} MiB{hint}")
    return b"".join(chunks)


def read_whole(raw: str, f: Opened, cap: int, hint: str = "") -> bytes:
    """A checked file's whole content; refused when larger than `cap`, or when it changed or gained a name
    while being read (a hard link swapped in and out again)."""
    fd, st = f.held()
    if st.st_size > cap:
        raise ToolError(f"{raw}: {st.st_size} bytes is larger than {cap >> 20} MiB{hint}")
    data = read_fd(raw, fd, cap, hint)
    if not still_single(f.folder, f.name, fd, st):
        raise ToolError(f"{raw}: changed while being read (renamed, replaced or given another name); try again")
    return data


@contextmanager
def open_checked(session: ToolSession, raw: str, mode: Mode, *, allowed: Sequence[Path] = ()) -> Iterator[Opened]:
    """The one way tools open paths. `mode`: "file" an existing regular file; "folder" an existing folder;
    "any" either; "write" the folder (made if missing) with the file opened for reading if it exists;
    "edit" an existing regular file about to be replaced. "write" and "edit" refuse what runs code later
    outside the sandbox (protected.py: git's files, editors' settings, the orchestrator's own, home
    startup files) unless it lies in `allowed`, what the user said yes to. Regular files must have a
    single link. Everything is closed on exit."""
    path = resolve(session, raw, writing=mode in ("write", "edit"))
    if path == Path("/"):
        raise ToolError(f"{raw}: refused: the file system root")
    if mode in ("write", "edit") and not any(path.is_relative_to(a) for a in allowed) \
            and (why := protection(session, path)):
        raise ToolError(f"{raw}: refused: {why}; agents do not write it unless the user allows it")
    folder = _walk_to(raw, path.parent, create=mode == "write")
    fd = None
    try:
        try:
            before = os.stat(path.name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            if mode != "write":
                raise ToolError(f"{raw}: no such file or folder") from None
            before = None
        except OSError as exc:
            raise _os_error(raw, exc, folder, path.name) from None
        if before is not None:
            kind = before.st_mode
            # Before opening, as open_entry does: checked only after, a hard link to an outside file could be
            # swapped in, opened, and its workspace name removed again before the fstat.
            if stat.S_ISREG(kind) and before.st_nlink > 1:
                raise _hard_links(raw, before)
            if stat.S_ISLNK(kind):
                raise ToolError(f"{raw}: became a symbolic link while being opened; refused")
            if stat.S_ISDIR(kind) and mode in ("file", "write", "edit"):
                raise ToolError(f"{raw}: is a folder, not a file; search_files lists a folder")
            if stat.S_ISREG(kind) and mode == "folder":
                raise ToolError(f"{raw}: is a file, not a folder")
            if not (stat.S_ISDIR(kind) or stat.S_ISREG(kind)):  # never open a device, FIFO or socket
                raise ToolError(f"{raw}: is not a regular file (a device, pipe or socket)")
            try:
                fd = os.open(path.name, _FILE | (os.O_DIRECTORY if stat.S_ISDIR(kind) else 0), dir_fd=folder)
            except OSError as exc:
                raise _os_error(raw, exc, folder, path.name) from None
            st = os.fstat(fd)
            if _identity(st) != _identity(before) or st.st_nlink == 0:  # replaced, relinked or deleted since
                raise ToolError(f"{raw}: changed while being opened; try again")
            if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                raise _hard_links(raw, st)
        yield Opened(path, folder, path.name, fd, None if fd is None else st)
    finally:
        if fd is not None:
            os.close(fd)
        os.close(folder)


def protection(session: ToolSession, path: Path) -> str | None:
    """Why writing `path` would plant something that runs later outside the sandbox, or None: a protected
    name in a workspace or grant (protected.reason), or a home's startup or settings file."""
    for root in (session.workspace, *session.grants):
        if why := protected.reason(root, path):
            return why
    for target in protected.home_targets((session.workspace, *session.grants), homes()):
        if path.is_relative_to(target):
            return f"{target}: {protected.WHY['home']}"
    return None


def walk_to_folder(folder: Path) -> int:
    """An fd of `folder`, reached from / without following any link (OSError-free: ToolError)."""
    return _walk_to(str(folder), folder, create=False)


def stat_checked(session: ToolSession, raw: str) -> tuple[Path, os.stat_result]:
    """Where `raw` leads and its metadata, without opening it (so hard-linked files can be looked at)."""
    path = resolve(session, raw)
    folder = _walk_to(raw, path.parent, create=False)
    try:
        st = os.stat(path.name, dir_fd=folder, follow_symlinks=False)
    except OSError as exc:
        raise _os_error(raw, exc, folder, path.name) from None
    finally:
        os.close(folder)
    if stat.S_ISLNK(st.st_mode):
        raise ToolError(f"{raw}: became a symbolic link while being looked at; refused")
    return path, st


def replace(opened: Opened, data: bytes) -> os.stat_result:
    """Write `data` as the file's whole new content: a temp file beside it, flushed, renamed over it.

    Readers see the old or the new content, never half; the rename replaces the directory entry, so a
    link swapped in at the last moment is replaced, not written through. Returns the new file's stat.
    """
    tmp = f".{opened.name[:200]}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666,
                 dir_fd=opened.folder)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if opened.st is not None:
                os.fchmod(fd, stat.S_IMODE(opened.st.st_mode))
            os.fsync(fd)
            st = os.fstat(fd)
        finally:
            os.close(fd)
        os.replace(tmp, opened.name, src_dir_fd=opened.folder, dst_dir_fd=opened.folder)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=opened.folder)
        except OSError:
            pass
        raise
    return st


def walk(session: ToolSession, top: Opened) -> Iterator[tuple[Path, int, list[str], list[str]]]:
    """(folder, its fd, subfolder names, regular file names) from `top` down, like os.walk: prune the
    subfolder list in place. Links are never followed and refused paths never listed."""
    yield from _walk(Rules.of(session), top.path, top.held()[0])


def _walk(rules: Rules, path: Path, fd: int) -> Iterator[tuple[Path, int, list[str], list[str]]]:
    folders: list[str] = []
    files: list[str] = []
    try:
        with os.scandir(fd) as entries:
            for e in entries:
                if e.is_dir(follow_symlinks=False):
                    folders.append(e.name)
                elif e.is_file(follow_symlinks=False):
                    files.append(e.name)
    except OSError:
        return  # unreadable folder: nothing to list
    folders = sorted(n for n in folders if rules.child_refusal(path, n) is None)
    files = sorted(n for n in files if rules.child_refusal(path, n) is None)
    yield path, fd, folders, files
    for name in folders:
        try:
            child = os.open(name, _DIR, dir_fd=fd)
        except OSError:
            continue  # gone, or turned into a link, since the listing
        try:
            yield from _walk(rules, path / name, child)
        finally:
            os.close(child)


# --- the orchestrator's own steps -----------------------------------------------------------------------------
# What the orchestrator itself reads and writes outside the jail in folders agents can write (an export, the
# knowledge base's files, skills and the proposals of the self-improvement pass) goes through the same checked
# open as the tools, so a link an agent planted cannot lead it elsewhere. A refusal names the link, in one line.

def named(raw: str, base: Path | None = None) -> Path:
    """The path a person typed (relative to `base`, else the current folder), taken as written: ToolError naming
    the first symbolic link on the way, or a file with other hard links, since an agent may have planted either
    to lead the step elsewhere. The system's own links (root's, in root's folders: /tmp on macOS) are followed."""
    if "\0" in raw:
        raise ToolError(f"{raw!r}: a path cannot contain a NUL byte")
    start = os.path.join(base or os.getcwd(), os.path.expanduser(raw))
    pending = [c for c in reversed(start.split("/")) if c not in ("", ".")]
    done, st, links = Path("/"), None, 0
    while pending:
        name = pending.pop()
        if name == "..":
            done, st = done.parent, None
            continue
        here = done / name
        try:
            st = os.lstat(here)
        except OSError:
            return Path(os.path.normpath(Path(here, *reversed(pending))))  # missing: the rest as written
        if stat.S_ISLNK(st.st_mode):
            target = os.readlink(here)
            if not _systems(st, done):
                raise ToolError(f"{raw}: refused: {here} is a symbolic link (to {target}); name the real path")
            links += 1
            if links > MAX_LINKS:
                raise ToolError(f"{raw}: too many symbolic links")
            if target.startswith("/"):
                done = Path("/")
            pending.extend(c for c in reversed(target.split("/")) if c not in ("", "."))
            continue
        done = here
    if st is not None and stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        raise ToolError(f"{raw}: refused: {done} has {st.st_nlink} hard links, and another name of it may lie "
                        "anywhere")
    return done


def _systems(link: os.stat_result, folder: Path) -> bool:
    # agents run as the user, so a link root made in root's folder is none of theirs (unless we are root)
    return os.getuid() != 0 and link.st_uid == 0 and os.lstat(folder).st_uid == 0


def _first_link(start: str) -> str:
    """The first component of `start` that is a symbolic link ("" when none is), to name it."""
    here = "/"
    for name in start.split("/"):
        if name not in ("", "."):
            here = os.path.normpath(os.path.join(here, name))
            if os.path.islink(here):
                return here
    return ""


def confined(session: ToolSession, raw: str, *, writing: bool = False) -> Path:
    """resolve() for one of the orchestrator's own steps in a folder agents can write (the session's workspace:
    a room's, or a folder the user named): a symbolic link on the way that leads out of it, or a file with other
    hard links, is refused in a line naming it; links that stay inside are followed, as for the tools."""
    start = _absolute(session, raw)
    path, via_link = _follow(raw, start)
    root = session.workspace
    if not path.is_relative_to(root):
        link = _first_link(start) if via_link else ""
        why = f"the symbolic link {link} leads out of {root} (to {path})" if link else f"it lies outside {root}"
        raise ToolError(f"{raw}: refused: {why}")
    try:
        st = os.lstat(path)
    except OSError:
        st = None
    if st is not None and stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        raise ToolError(f"{raw}: refused: it has {st.st_nlink} hard links, and another name of it may lie "
                        f"outside {root}")
    return resolve(session, raw, writing=writing)


@contextmanager
def open_own(session: ToolSession, raw: str, mode: Mode) -> Iterator[Opened]:
    """open_checked for the orchestrator's own steps, after confined(): what is protected from agents' writes
    (the orchestrator's own .agents, say) is the orchestrator's to write, this one path."""
    path = confined(session, raw, writing=mode in ("write", "edit"))
    with open_checked(session, raw, mode, allowed=(path,)) as opened:
        yield opened


def read_own(session: ToolSession, raw: str, cap: int) -> tuple[Path, bytes]:
    """A whole file, through open_own() and read_whole()."""
    with open_own(session, raw, "file") as f:
        data = read_whole(raw, f, cap)
    return f.path, data


def write_own(session: ToolSession, raw: str, data: bytes) -> Path:
    """A file's whole new content, through open_own() and replace(); its folder is made if missing."""
    with open_own(session, raw, "write") as f:
        replace(f, data)
    return f.path


def made_folder(session: ToolSession, raw: str) -> Path:
    """A folder (and its parents) made if missing, never through a link that leads out (confined())."""
    path = confined(session, raw, writing=True)
    os.close(_walk_to(raw, path, create=True))
    return path


def write_named(raw: str, data: bytes, base: Path | None = None) -> Path:
    """Write a file a person named (an export): named(), then write_own() in its folder."""
    path = named(raw, base)
    return write_own(ToolSession(path.parent), str(path), data)

"""The path sandbox under attack: every escape is refused with a clear error, through the real tools."""
from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path

import pytest
import trio

from orchestrator.tools.base import ToolContext, ToolError
from orchestrator.tools.builtin import BUILTIN
from orchestrator.tools.sandbox import open_checked, replace, resolve, walk
from orchestrator.tools.session import ToolSession

SECRET = "TOP-SECRET-OUTSIDE"


@pytest.fixture(autouse=True)
def hermetic_env(tmp_path, monkeypatch):
    # the app-data rule reads these; a developer's own values must not change what is refused here
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("ORCHESTRATOR_DB", raising=False)


@pytest.fixture
def ws(tmp_path) -> Path:
    outside = tmp_path / "outside"
    (outside / "inner").mkdir(parents=True)
    (outside / "secret.txt").write_text(SECRET)
    (outside / "inner" / "deep.txt").write_text(SECRET)
    ws = tmp_path / "ws"
    (ws / "sub" / "deeper").mkdir(parents=True)
    (ws / "inside.txt").write_text("inside content")
    (ws / "sub" / "deeper" / "note.txt").write_text("deep inside")
    (tmp_path / "ws-evil").mkdir()
    (tmp_path / "ws-evil" / "secret.txt").write_text(SECRET)
    os.symlink(outside / "secret.txt", ws / "link_file")
    os.symlink("../outside/secret.txt", ws / "rel_link")
    os.symlink(outside, ws / "link_dir")
    os.symlink("../../../outside", ws / "sub" / "deeper" / "up_link")
    os.symlink(outside / "inner", ws / "in_link")
    os.symlink("chain2", ws / "chain1")
    os.symlink("chain3", ws / "chain2")
    os.symlink(outside / "secret.txt", ws / "chain3")
    os.symlink("/etc", ws / "etc_link")
    os.symlink("loop2", ws / "loop1")
    os.symlink("loop1", ws / "loop2")
    os.symlink("/proc/self/root/etc/passwd", ws / "proc_link")
    os.link(outside / "secret.txt", ws / "hard_link")
    os.symlink("inside.txt", ws / "good_link")  # a link that stays inside is followed
    return ws


async def call(session: ToolSession, name: str, agent: str = "a", **args) -> tuple[str, bool]:
    tool = BUILTIN[name]
    try:
        return await tool.run(tool.parse(args), ToolContext(agent, "call", session)), False
    except ToolError as exc:
        return str(exc), True


ESCAPES = [
    ("../outside/secret.txt", "outside the workspace"),
    ("../../../../../../../../../../outside/secret.txt", "outside the workspace"),
    ("sub/../../outside/secret.txt", "outside the workspace"),
    ("./sub/deeper/../../../outside/secret.txt", "outside the workspace"),
    ("{tmp}/outside/secret.txt", "outside the workspace"),
    ("{tmp}/ws-evil/secret.txt", "outside the workspace"),  # shares the workspace's name as a prefix
    ("{tmp}/ws/../outside/secret.txt", "outside the workspace"),
    ("../ws/../outside/secret.txt", "outside the workspace"),
    ("/etc/passwd", "system folder"),
    ("/etc/shadow", "system folder"),
    ("../../../../../../../../etc/passwd", "system folder"),
    ("/proc/self/environ", "system folder"),
    ("/proc/self/root/etc/passwd", "system folder"),
    ("/proc/self/cwd/pyproject.toml", "system folder"),
    ("/proc/self/fd/0", "system folder"),
    ("/dev/zero", "system folder"),
    ("/sys/kernel/hostname", "system folder"),
    ("/usr/lib/os-release", "system folder"),
    ("/boot", "system folder"),
    ("link_file", "symbolic link"),
    ("rel_link", "symbolic link"),
    ("link_dir/secret.txt", "symbolic link"),
    ("link_dir/inner/deep.txt", "symbolic link"),
    ("sub/deeper/up_link/secret.txt", "symbolic link"),
    ("in_link/../secret.txt", "symbolic link"),  # `..` applies after the link, as the kernel does it
    ("chain1", "symbolic link"),
    ("etc_link/passwd", "system folder"),
    ("proc_link", "system folder"),
    ("loop1", "too many symbolic links"),
    ("hard_link", "hard links"),
    ("a\x00b", "NUL byte"),
    ("../outside/secret.txt\x00.txt", "NUL byte"),
    ("a/" * 2100 + "x", "too long"),
    ("x" * 300, "longer than 255 bytes"),
    ("", "empty"),
]


@pytest.mark.parametrize("path,why", ESCAPES)
async def test_escapes_are_refused_for_reading(ws, tmp_path, path, why):
    session = ToolSession(ws)
    text, is_error = await call(session, "read_file", path=path.format(tmp=tmp_path))
    assert is_error and why in text
    assert SECRET not in text


@pytest.mark.parametrize("path,why", [e for e in ESCAPES if e[0] not in ("hard_link", "loop1")])
async def test_escapes_are_refused_for_stat(ws, tmp_path, path, why):
    text, is_error = await call(ToolSession(ws), "stat_file", path=path.format(tmp=tmp_path))
    assert is_error and why in text


@pytest.mark.parametrize("path", ["../outside/new.txt", "{tmp}/outside/new.txt", "link_dir/new.txt",
                                  "link_dir/newsub/new.txt", "sub/deeper/up_link/new.txt", "link_file",
                                  "rel_link", "chain1", "hard_link", "/etc/orchestrator-test", "/proc/self/comm"])
async def test_escapes_are_refused_for_writing(ws, tmp_path, path):
    session = ToolSession(ws)
    before = sorted(p.name for p in (tmp_path / "outside").rglob("*"))
    text, is_error = await call(session, "write_file", path=path.format(tmp=tmp_path), content="PWNED")
    assert is_error and ("refused" in text or "outside" in text), text
    assert (tmp_path / "outside" / "secret.txt").read_text() == SECRET
    assert sorted(p.name for p in (tmp_path / "outside").rglob("*")) == before


@pytest.mark.parametrize("path", ["link_file", "hard_link", "link_dir/secret.txt", "../outside/secret.txt"])
async def test_escapes_are_refused_for_editing(ws, tmp_path, path):
    text, is_error = await call(ToolSession(ws), "edit_file", path=path, old="TOP", new="PWNED")
    assert is_error
    assert (tmp_path / "outside" / "secret.txt").read_text() == SECRET


async def test_a_link_that_stays_inside_is_followed(ws):
    session = ToolSession(ws)
    assert await call(session, "read_file", path="good_link") == ("inside content", False)
    assert resolve(session, "good_link") == ws / "inside.txt"
    assert resolve(session, "sub/deeper/../../inside.txt") == ws / "inside.txt"
    assert resolve(session, str(ws / "inside.txt")) == ws / "inside.txt"


@pytest.mark.parametrize("tool,args", [("search_files", {"pattern": "*", "path": "../outside"}),
                                       ("search_files", {"pattern": "*", "path": "link_dir"}),
                                       ("grep_files", {"pattern": "SECRET", "path": "/etc"}),
                                       ("grep_files", {"pattern": "SECRET", "path": "link_dir"}),
                                       ("grep_files", {"pattern": "SECRET", "path": "hard_link"})])
async def test_search_and_grep_cannot_start_outside(ws, tool, args):
    text, is_error = await call(ToolSession(ws), tool, **args)
    assert is_error and SECRET not in text


async def test_walks_never_follow_links_out(ws):
    session = ToolSession(ws)
    text, is_error = await call(session, "grep_files", pattern="SECRET|inside", include_ignored=True)
    assert not is_error and SECRET not in text and "inside content" in text
    assert "hard-linked" in text  # the hard link was skipped, and said so
    listed, _ = await call(session, "search_files", pattern="**/*", include_ignored=True)
    assert "link_dir" not in listed and "deep.txt" not in listed and "secret" not in listed


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "home"
    for rel in (".ssh/id_rsa", ".aws/credentials", ".gnupg/private.key", ".config/gcloud/creds.json",
                ".kube/config", ".docker/config.json", ".local/share/keyrings/login.keyring", ".netrc",
                "project/code.py"):
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(SECRET)
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.mark.parametrize("rel", [".ssh/id_rsa", ".aws/credentials", ".gnupg/private.key", ".config/gcloud/creds.json",
                                 ".kube/config", ".docker/config.json", ".local/share/keyrings/login.keyring",
                                 ".netrc", ".ssh"])
async def test_credential_folders_are_refused_even_when_granted(ws, home, rel):
    session = ToolSession(ws, grants=[home])
    for path in (f"~/{rel}", str(home / rel)):
        text, is_error = await call(session, "read_file", path=path)
        assert is_error and "holds credentials" in text and "even when granted" in text
    text, is_error = await call(session, "write_file", path=f"~/{rel}", content="x")
    assert is_error and "holds credentials" in text
    assert await call(session, "read_file", path="~/project/code.py") == (SECRET, False)  # the rest of the grant works


async def test_credentials_are_refused_in_a_workspace_that_is_home(home):
    session = ToolSession(home)
    text, is_error = await call(session, "read_file", path=".ssh/id_rsa")
    assert is_error and "holds credentials" in text
    listed, _ = await call(session, "search_files", pattern="*", include_ignored=True)
    assert "project/code.py" in listed and ".ssh" not in listed and ".aws" not in listed and ".netrc" not in listed
    grepped, _ = await call(session, "grep_files", pattern="SECRET", include_ignored=True)
    assert grepped.splitlines() == [f"project/code.py:1:{SECRET}"]


async def test_another_users_credentials_are_refused(ws, tmp_path):
    (tmp_path / "others" / "bob" / ".ssh").mkdir(parents=True)
    (tmp_path / "others" / "bob" / ".ssh" / "id_ed25519").write_text(SECRET)
    text, is_error = await call(ToolSession(ws, grants=[tmp_path / "others"]), "read_file",
                                path=str(tmp_path / "others" / "bob" / ".ssh" / "id_ed25519"))
    assert is_error and "holds credentials" in text


@pytest.mark.parametrize("name", [".env", ".env.production", ".envrc"])
async def test_env_files_outside_the_workspace_are_refused(ws, tmp_path, name):
    (tmp_path / "outside" / name).write_text(f"API_KEY={SECRET}")
    (ws / name).write_text("API_KEY=workspace")
    session = ToolSession(ws, grants=[tmp_path / "outside"])
    text, is_error = await call(session, "read_file", path=str(tmp_path / "outside" / name))
    assert is_error and ".env file outside the workspace" in text
    assert await call(session, "read_file", path=name) == ("API_KEY=workspace", False)


async def test_the_app_data_folder_is_refused_even_when_granted(ws, tmp_path, monkeypatch):
    data = tmp_path / "xdg" / "orchestrator"
    data.mkdir(parents=True)
    (data / "orchestrator.db").write_text(SECRET)
    session = ToolSession(ws, grants=[tmp_path / "xdg"])
    text, is_error = await call(session, "read_file", path=str(data / "orchestrator.db"))
    assert is_error and "the application's own data folder" in text

    monkeypatch.setenv("ORCHESTRATOR_DB", str(tmp_path / "db" / "rooms.sqlite"))
    (tmp_path / "db").mkdir()
    (tmp_path / "db" / "rooms.sqlite").write_text(SECRET)
    session = ToolSession(ws, grants=[tmp_path / "db"])
    text, is_error = await call(session, "write_file", path=str(tmp_path / "db" / "rooms.sqlite"), content="x")
    assert is_error and "the application's own data folder" in text
    assert (tmp_path / "db" / "rooms.sqlite").read_text() == SECRET


async def test_a_workspace_inside_the_data_folder_stays_usable(tmp_path, monkeypatch):
    monkeypatch.setenv("ORCHESTRATOR_DB", str(tmp_path / "orchestrator.db"))  # its folder holds the workspace
    (tmp_path / "orchestrator.db").write_text(SECRET)
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "a.txt").write_text("fine")
    session = ToolSession(tmp_path / "ws")
    assert await call(session, "read_file", path="a.txt") == ("fine", False)
    text, is_error = await call(session, "read_file", path="../orchestrator.db")
    assert is_error and "data folder" in text


async def test_system_folders_are_refused_even_when_granted(ws):
    session = ToolSession(ws, grants=[Path("/etc"), Path("/usr")])
    for path in ("/etc/hostname", "/usr/lib/os-release"):
        text, is_error = await call(session, "read_file", path=path)
        assert is_error and "system folder" in text


async def test_grants_and_attachments_are_roots(ws, tmp_path):
    (tmp_path / "granted").mkdir()
    (tmp_path / "granted" / "g.txt").write_text("granted")
    (tmp_path / "attached.txt").write_text("attached")
    (tmp_path / "not-attached.txt").write_text(SECRET)
    session = ToolSession(ws, grants=[tmp_path / "granted", tmp_path / "attached.txt"])
    assert await call(session, "read_file", path=str(tmp_path / "granted" / "g.txt")) == ("granted", False)
    assert await call(session, "read_file", path="../attached.txt") == ("attached", False)
    text, is_error = await call(session, "read_file", path="../not-attached.txt")
    assert is_error and "outside the workspace" in text


async def test_a_fifo_is_refused_without_hanging(ws):
    os.mkfifo(ws / "pipe")
    with trio.fail_after(5):
        text, is_error = await call(ToolSession(ws), "read_file", path="pipe")
    assert is_error and "not a regular file" in text


def test_open_checked_modes(ws):
    session = ToolSession(ws)
    with open_checked(session, "inside.txt", "file") as f:
        assert f.path == ws / "inside.txt" and os.read(f.fd, 100) == b"inside content"
    with open_checked(session, "sub", "folder") as f:
        assert f.st.st_mode and f.fd is not None
    with open_checked(session, "brand/new/file.txt", "write") as f:
        assert f.fd is None and (ws / "brand" / "new").is_dir()
        replace(f, b"made")
    assert (ws / "brand" / "new" / "file.txt").read_text() == "made"
    for mode, path, why in [("file", "sub", "is a folder"), ("folder", "inside.txt", "not a folder"),
                            ("file", "missing.txt", "no such file"), ("folder", "missing/x", "no such file")]:
        with pytest.raises(ToolError, match=why):
            with open_checked(session, path, mode):
                pass


def test_replace_keeps_permissions_and_leaves_no_temp_file(ws):
    os.chmod(ws / "inside.txt", 0o640)
    with open_checked(ToolSession(ws), "inside.txt", "write") as f:
        replace(f, b"new")
    assert (ws / "inside.txt").read_text() == "new"
    assert oct((ws / "inside.txt").stat().st_mode & 0o777) == oct(0o640)
    assert not [p for p in ws.iterdir() if p.name.endswith(".tmp")]


def test_walk_lists_no_links(ws):
    with open_checked(ToolSession(ws), ".", "folder") as top:
        seen = {(folder / name).relative_to(ws).as_posix()
                for folder, _, _, files in walk(ToolSession(ws), top) for name in files}
    assert seen == {"inside.txt", "hard_link", "sub/deeper/note.txt"}  # the walk lists it; opening refuses it


class Swapper:
    """Runs `step` over and over in a thread until stopped: the attacker racing the tools."""

    def __init__(self, step):
        self.step = step
        self.stop = threading.Event()
        self.swaps = 0
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.is_set():
            self.step()
            self.swaps += 1

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


async def test_a_file_swapped_for_a_symlink_never_leaks_or_is_written_through(ws, tmp_path):
    session = ToolSession(ws)
    outside = tmp_path / "outside" / "secret.txt"
    target, link, real = ws / "race.txt", ws / "swap.link", ws / "swap.real"
    target.write_text("inside")

    def step():  # both swaps are atomic renames: the name always exists, as a file or as a link out
        os.symlink(outside, link)
        os.replace(link, target)
        real.write_text("inside")
        os.replace(real, target)

    reads = writes = 0
    with Swapper(step) as swapper:
        for i in range(400):
            text, is_error = await call(session, "read_file", path="race.txt")
            assert SECRET not in text
            if not is_error:
                reads += 1
                assert text == "inside" or text.startswith("written ")  # the swapper's file or our last write
                text, is_error = await call(session, "write_file", path="race.txt", content=f"written {i}")
                assert SECRET not in text
                writes += not is_error
            if swapper.swaps > 100 and reads > 10 and writes > 3:
                break
    assert outside.read_text() == SECRET
    assert sorted(p.name for p in outside.parent.iterdir()) == ["inner", "secret.txt"]
    assert swapper.swaps > 0 and reads > 0


def _exchange():
    """renameat2(RENAME_EXCHANGE): swaps a folder and a link in one step, so the name never goes missing."""
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "renameat2"):
        pytest.skip("renameat2 is Linux-only")

    def exchange(a: Path, b: Path):
        if libc.renameat2(-100, os.fsencode(a), -100, os.fsencode(b), 2) != 0:  # AT_FDCWD, RENAME_EXCHANGE
            raise OSError(ctypes.get_errno(), "renameat2")
    return exchange


async def test_a_folder_swapped_for_a_symlink_never_leaks_or_is_written_through(ws, tmp_path):
    exchange = _exchange()
    session = ToolSession(ws)
    outside = tmp_path / "outside"
    target, link = ws / "racedir", ws / "swaplink"
    target.mkdir()
    (target / "secret.txt").write_text("inside")
    os.symlink(outside, link)
    leaked = []
    with Swapper(lambda: exchange(target, link)) as swapper:
        for i in range(400):
            text, is_error = await call(session, "read_file", path="racedir/secret.txt")
            leaked += [text] if SECRET in text else []
            await call(session, "write_file", path="racedir/secret.txt", content="PWNED")
            await call(session, "write_file", path=f"racedir/sub{i}/new.txt", content="PWNED")
            if swapper.swaps > 100 and i > 20:
                break
    assert not leaked
    assert (outside / "secret.txt").read_text() == SECRET
    assert sorted(p.name for p in outside.rglob("*")) == ["deep.txt", "inner", "secret.txt"]
    assert swapper.swaps > 0

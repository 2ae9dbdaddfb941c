"""External packages end to end: real repositories served over file:// and a real `git daemon`, installed
with `orchestrator packages`; their skills listed in the untrusted tier, their commands run by the bash
tool inside the sandbox, unsafe ones refused in one line, and the dependency step asked once."""
from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pexpect
import pytest

from orchestrator.core.errors import InputError
from orchestrator.packages import git as safe_git
from orchestrator.packages import tree
from orchestrator.tools.base import ToolContext, ToolOutput
from orchestrator.tools.jail import backend
from orchestrator.tools.session import ToolSession
from orchestrator.tools.shell import BASH

ENTRY = [sys.executable, "-m", "orchestrator"]
WHY = backend().unavailable()
needs_jail = pytest.mark.skipif(WHY is not None, reason=f"no OS sandbox here: {WHY}")
GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}

SKILL = """\
---
name: greeter
description: Greets people warmly. Use when someone says hello.
---
Answer a greeting with GREETER-BODY-7 and a smile.
"""


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A home, data and config folder of the test's own, here and for the commands it runs."""
    values = {"HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "data"),
              "XDG_CONFIG_HOME": str(tmp_path / "config")}
    for key, value in values.items():
        Path(value).mkdir(exist_ok=True)
        monkeypatch.setenv(key, value)
    return values


def run(env: dict[str, str], *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    keep = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("GIT_")}
    return subprocess.run([*ENTRY, *args], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                          env={**keep, **env}, cwd=cwd or env["HOME"])


def commit(repo: Path, files: dict[str, str], *, executable: tuple[str, ...] = (), links: dict[str, str] | None = None,
           removed: tuple[str, ...] = (), message: str = "change") -> str:
    """Write `files` (and `links`) into the repository, make a commit, return its id."""
    if not (repo / ".git").exists():
        repo.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True, env={**os.environ, **GIT_ENV})
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(textwrap.dedent(text))
    for rel in executable:
        (repo / rel).chmod(0o755)
    for rel, target in (links or {}).items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, repo / rel)
    for rel in removed:
        (repo / rel).unlink()
    gitenv = {**os.environ, **GIT_ENV}
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, env=gitenv)
    subprocess.run(["git", "commit", "-qm", message], cwd=repo, check=True, env=gitenv)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True, text=True,
                          env=gitenv).stdout.strip()


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A real `git daemon` on 127.0.0.1 serving tmp_path/served, started and stopped here."""
    served = tmp_path / "served"
    served.mkdir()
    with socket.socket() as s:  # a port free now; the daemon says when it listens on it
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(["git", "daemon", "--verbose", "--export-all", "--reuseaddr", f"--base-path={served}",
                             "--listen=127.0.0.1", f"--port={port}", str(served)],
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **GIT_ENV})
    assert proc.stderr is not None
    for line in proc.stderr:  # "[pid] Ready to rumble" once it listens
        if "Ready to rumble" in line:
            break
    else:
        pytest.fail(f"git daemon did not start (exit {proc.wait()})")
    drain = threading.Thread(target=proc.stderr.read)  # its log, read so the pipe never fills
    drain.start()
    try:
        yield served, port
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        drain.join()
        proc.stderr.close()


def packages_dir(env: dict[str, str]) -> Path:
    return Path(env["XDG_DATA_HOME"]) / "orchestrator" / "packages"


def registry(env: dict[str, str]) -> dict:
    path = packages_dir(env) / "registry.json"
    return json.loads(path.read_text())["packages"] if path.exists() else {}


async def bash(workspace: Path, command: str) -> ToolOutput:
    session = ToolSession(workspace)
    out = await BASH.run(BASH.parse({"command": command}), ToolContext(agent="dev", call_id="c1", session=session))
    return out if isinstance(out, ToolOutput) else ToolOutput(out)


def skills(env: dict[str, str], workspace: Path) -> dict[str, dict]:
    listed = run(env, "skills", "list", "--json", "--workspace", str(workspace))
    assert listed.returncode == 0, listed.stderr
    return {row["name"]: row for row in map(json.loads, listed.stdout.splitlines())}


def test_a_skill_package_from_a_git_daemon_is_listed_untrusted_and_usable_until_disabled(tmp_path, env, daemon):
    served, port = daemon
    commit(served / "greeting.git", {"skills/greeter/SKILL.md": SKILL, "README.md": "# greeting skills\n"})
    ws = tmp_path / "ws"
    ws.mkdir()

    added = run(env, "packages", "add", f"git://127.0.0.1:{port}/greeting.git")
    assert added.returncode == 0, added.stderr
    assert "added greeting at" in added.stdout and "untrusted tier" in added.stdout
    folder = packages_dir(env) / "enabled" / "greeting"
    assert (folder / "skills" / "greeter" / "SKILL.md").read_text() == SKILL
    entry = registry(env)["greeting"]
    assert entry["kinds"] == ["skills"] and entry["skill_roots"] == ["skills"] and len(entry["commit"]) == 40
    assert not (folder / "registry.json").exists()  # the registry is kept beside the packages, not in one

    found = skills(env, ws)["greeter"]
    assert (found["root"], found["tier"], found["status"]) == ("package", "untrusted", "loaded")
    shown = run(env, "skills", "show", "greeter", "--workspace", str(ws))
    assert shown.returncode == 0 and "GREETER-BODY-7" in shown.stdout and "[package, untrusted]" in shown.stdout
    listed = run(env, "packages", "list", "--json")
    assert json.loads(listed.stdout)["name"] == "greeting"

    assert run(env, "packages", "disable", "greeting").returncode == 0
    assert "greeter" not in skills(env, ws)
    assert run(env, "packages", "enable", "greeting").returncode == 0
    assert skills(env, ws)["greeter"]["status"] == "loaded"
    assert run(env, "packages", "remove", "greeting").returncode == 0
    assert "greeter" not in skills(env, ws) and not folder.exists() and registry(env) == {}


def test_a_commit_id_pins_the_package_over_file_and_git_daemon(tmp_path, env, daemon):
    served, port = daemon
    repo = served / "kit.git"
    first = commit(repo, {"skills/greeter/SKILL.md": SKILL}, message="first")
    commit(repo, {"README.md": "# later\n"}, message="second")
    # a git daemon sends only what a branch or tag names; a local source sends a commit by its id
    for source, ref, name in ((f"git://127.0.0.1:{port}/kit.git", first, "whole"),
                              (f"git://127.0.0.1:{port}/kit.git", first[:10], "short"),
                              (f"file://{repo}", first, "local")):
        added = run(env, "packages", "add", source, "--name", name, "--ref", ref)
        assert added.returncode == 0, added.stderr
        entry = registry(env)[name]
        assert (entry["commit"], entry["ref"]) == (first, ref)
        folder = packages_dir(env) / "enabled" / name
        assert not (folder / "README.md").exists()  # the second commit is not checked out
        refs = subprocess.run(["git", "-C", str(folder), "for-each-ref"], capture_output=True, text=True).stdout
        assert "orchestrator-source" not in refs  # the source's branches were looked through, not kept
        updated = run(env, "packages", "update", name)
        assert updated.returncode == 0 and "up to date" in updated.stdout, updated.stdout + updated.stderr
    missing = run(env, "packages", "add", f"git://127.0.0.1:{port}/kit.git", "--name", "nope", "--ref", "0" * 40)
    assert missing.returncode != 0 and missing.stderr.count("\n") == 1, missing.stderr
    assert f"no commit {'0' * 40} is on a branch or tag of the source" in missing.stderr
    for bad in ("main:refs/heads/mine", "-upload-pack=touch", "+refs/heads/*:refs/x/*", "a..b"):
        refused = run(env, "packages", "add", f"file://{repo}", "--name", "bad", f"--ref={bad}")
        assert refused.returncode == 2 and "give a branch, a tag or a commit id" in refused.stderr, refused.stderr
    assert set(registry(env)) == {"whole", "short", "local"}


@needs_jail
async def test_a_cli_package_runs_from_the_bash_tool_in_the_sandbox_read_only(tmp_path, env):
    repo = tmp_path / "tools"
    commit(repo, {"bin/wave": "#!/bin/sh\necho \"wave from the package: $*\"\n", "bin/notes.txt": "not a command\n",
                  "package.json": '{"name": "@me/tools", "bin": {"jswave": "cli/wave.js"}}\n',
                  "cli/wave.js": "console.log('jswave', process.argv.slice(2).join(' '))\n"},
           executable=("bin/wave",))
    added = run(env, "packages", "add", repo.as_uri())
    assert added.returncode == 0, added.stderr
    ws = tmp_path / "ws"
    ws.mkdir()
    out = await bash(ws, "wave hello && jswave there; touch \"$(command -v wave)\" 2>&1; "
                         f"ls {packages_dir(env)}; echo x > {packages_dir(env)}/enabled/tools/bin/wave")
    assert "wave from the package: hello" in out.text
    assert "jswave there" in out.text or shutil.which("node") is None
    assert out.text.count("Read-only file system") == 2
    listed = out.text.split("\n")
    assert "registry.json" not in out.text and "bin" in listed and "enabled" in listed
    assert (packages_dir(env) / "enabled" / "tools" / "bin" / "wave").read_text().startswith("#!/bin/sh")
    shown = run(env, "packages", "show", "tools")
    assert "command: wave -> bin/wave (bin/; on PATH)" in shown.stdout and "notes.txt" not in shown.stdout

    assert run(env, "packages", "disable", "tools").returncode == 0
    gone = await bash(ws, "wave hello")
    assert "wave: command not found" in gone.text and gone.is_error


def test_a_package_with_a_symbolic_link_is_refused_in_one_line_and_nothing_is_kept(tmp_path, env):
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET-TOKEN-91\n")
    repo = tmp_path / "linked"
    commit(repo, {"skills/greeter/SKILL.md": SKILL}, links={"skills/greeter/references/key.txt": str(secret)})

    refused = run(env, "packages", "add", str(repo))
    assert refused.returncode == 2
    assert refused.stderr.strip().count("\n") == 0, refused.stderr
    assert "refused" in refused.stderr and "symbolic link (skills/greeter/references/key.txt)" in refused.stderr
    assert "SECRET-TOKEN-91" not in refused.stdout + refused.stderr
    root = packages_dir(env)
    assert registry(env) == {} and list((root / "enabled").iterdir()) == [] and list((root / "staging").iterdir()) == []
    assert "greeter" not in skills(env, tmp_path)


def test_sources_over_other_protocols_are_refused_and_git_cannot_be_steered_to_them(tmp_path, env):
    marker = tmp_path / "ran"
    for source, said in ((f"ext::sh -c touch% {marker}", "ext:: transport is refused"),
                         ("http://127.0.0.1:1/x.git", "the http protocol is refused"),
                         ("ftp://host/x.git", "the ftp protocol is refused"),
                         ("fd::3", "fd:: transport"), ("--upload-pack=touch", "not a repository address")):
        refused = run(env, "packages", "add", "--", source)
        assert refused.returncode == 2 and said in refused.stderr, (source, refused.stderr)
        assert "allowed protocols: https, ssh, git, file" in refused.stderr or "not a repository" in refused.stderr
        assert refused.stderr.strip().count("\n") == 0
    # below the address check, git itself allows only the source's own protocol
    folder = tmp_path / "probe"
    safe_git.init(folder)
    with pytest.raises(InputError, match="git fetch failed"):
        safe_git.fetch(folder, f"ext::sh -c touch% {marker}", "", "file", most=tree.MAX_HISTORY)
    with pytest.raises(InputError, match="git fetch failed"):
        # file:// when only git is allowed
        safe_git.fetch(folder, (tmp_path / "nowhere").as_uri(), "", "git", most=tree.MAX_HISTORY)
    assert not marker.exists()
    # a submodule pointing at a refused transport refuses the package
    repo = tmp_path / "withsub"
    commit(repo, {"README.md": "x\n", ".gitmodules": f'[submodule "evil"]\n\tpath = evil\n\turl = ext::sh -c touch% {marker}\n'})
    subprocess.run(["git", "update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},evil"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "sub"], cwd=repo, check=True, env={**os.environ, **GIT_ENV})
    refused = run(env, "packages", "add", str(repo))
    assert refused.returncode == 2 and "a submodule points at 'ext::sh" in refused.stderr, refused.stderr
    assert not marker.exists() and registry(env) == {}


def test_an_update_that_adds_a_link_is_refused_and_a_clean_one_fast_forwards(tmp_path, env):
    repo = tmp_path / "kit"
    first = commit(repo, {"skills/greeter/SKILL.md": SKILL})
    assert run(env, "packages", "add", str(repo)).returncode == 0
    folder = packages_dir(env) / "enabled" / "kit"
    commit(repo, {"skills/greeter/extra.md": "more\n"}, links={"skills/greeter/passwd": "/etc/passwd"})

    refused = run(env, "packages", "update", "kit")
    assert refused.returncode == 2 and refused.stderr.strip().count("\n") == 0, refused.stderr
    assert "kit: update refused: the package holds a symbolic link (skills/greeter/passwd)" in refused.stderr
    assert f"kit stays at {first[:12]}" in refused.stderr
    assert not os.path.lexists(folder / "skills" / "greeter" / "passwd")
    assert not (folder / "skills" / "greeter" / "extra.md").exists()  # nothing of that commit was written
    assert registry(env)["kit"]["commit"] == first

    clean = commit(repo, {"skills/greeter/extra.md": "more, cleanly\n"}, removed=("skills/greeter/passwd",))
    updated = run(env, "packages", "update")
    assert updated.returncode == 0 and f"kit: {first[:12]} -> {clean[:12]}" in updated.stdout, updated.stderr
    assert (folder / "skills" / "greeter" / "extra.md").read_text() == "more, cleanly\n"
    assert registry(env)["kit"]["commit"] == clean
    assert "up to date" in run(env, "packages", "update", "kit").stdout

    subprocess.run(["git", "commit", "-q", "--amend", "-m", "rewritten"], cwd=repo, check=True,
                   env={**os.environ, **GIT_ENV})
    rewritten = run(env, "packages", "update", "kit")
    assert rewritten.returncode == 2 and "history was rewritten" in rewritten.stderr


def test_files_are_kept_as_they_are_and_git_settings_of_the_repository_never_run(tmp_path, env):
    repo = tmp_path / "raw"
    marker = tmp_path / "filtered"
    commit(repo, {".gitattributes": "* text eol=crlf\n*.md filter=evil\n", "notes.md": "one\ntwo\n",
                  "bin/raw": "#!/bin/sh\necho raw\n"}, executable=("bin/raw",))
    subprocess.run(["git", "config", "filter.evil.smudge", f"touch {marker}"], cwd=repo, check=True)
    assert run(env, "packages", "add", repo.as_uri()).returncode == 0
    folder = packages_dir(env) / "enabled" / "raw"
    assert (folder / "notes.md").read_bytes() == b"one\ntwo\n" and not marker.exists()
    config = subprocess.run(["git", "config", "--list", "--local"], cwd=folder, capture_output=True, text=True).stdout
    assert "core.hookspath=/dev/null" in config and "core.symlinks=false" in config and "core.fsmonitor=false" in config


async def test_a_tree_over_the_size_limit_is_refused(tmp_path, env, monkeypatch):
    from orchestrator.packages import lifecycle

    repo = tmp_path / "big"
    commit(repo, {"data.txt": "x" * 4096})
    monkeypatch.setattr(tree, "MAX_BYTES", 1024)
    with pytest.raises(tree.PackageRefused, match=r"big: refused: the package's files hold 4,096 bytes, over the 1,024 bytes a package may have"):
        await lifecycle.add(str(repo), None, "")
    assert registry(env) == {} and list((packages_dir(env) / "staging").iterdir()) == []


CAP = 256 * 1024  # the history cap the tests below patch in: a few random commits pass it, a small package does not


def heavy(repo: Path, commits: int, size: int = 96 * 1024) -> str:
    """`commits` commits, each replacing one file with `size` random bytes: a history about commits × size (random
    bytes do not compress) behind a tree of one such file, far below the tree cap."""
    last = ""
    for i in range(commits):
        repo.mkdir(parents=True, exist_ok=True)
        (repo / "blob.bin").write_bytes(os.urandom(size))
        last = commit(repo, {"skills/greeter/SKILL.md": SKILL}, message=f"random {i}")
    return last


@pytest.fixture
def marked(monkeypatch: pytest.MonkeyPatch) -> Callable[[], list[str]]:
    """Every process started from here on carries a mark in its environment (git passes it to its children);
    the function returns those still running. A zombie has no environment left, so it is not counted."""
    if not Path("/proc/self/environ").exists():
        pytest.skip("no /proc here to see which processes are left")
    key, value = "ORCHESTRATOR_TEST_MARK", secrets.token_hex(8)
    monkeypatch.setenv(key, value)
    mark = f"{key}={value}".encode()

    def running() -> list[str]:
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                environ, cmdline = (entry / "environ").read_bytes(), (entry / "cmdline").read_bytes()
            except OSError:  # gone, or not ours
                continue
            if mark in environ.split(bytes(1)):
                found.append(f"{entry.name}: {cmdline.replace(bytes(1), b' ').decode(errors='replace')}")
        return found

    def survivors() -> list[str]:
        # A SIGKILL takes effect when its process next runs: one that holds none of git's pipes (pack-objects
        # on the serving side) may still be on its way out when the fetch returns. What the kill missed (the
        # stand-in ssh's `sleep 600`) is still there after the wait.
        for _ in range(100):
            if not (found := running()):
                break
            time.sleep(0.05)
        return found

    probe = subprocess.Popen(["sleep", "30"])  # the check must see a marked process, or it proves nothing
    try:
        assert any(line.startswith(f"{probe.pid}:") for line in running())
    finally:
        probe.kill()
        probe.wait()
    assert survivors() == []
    return survivors


def objects(folder: Path) -> list[tuple[str, int]]:
    root = folder / ".git" / "objects"
    return sorted((str(p.relative_to(root)), p.stat().st_size if p.is_file() else 0) for p in root.rglob("*"))


async def test_a_history_over_the_cap_is_refused_on_add_over_file_and_git_daemon(tmp_path, env, daemon, monkeypatch,
                                                                                  marked):
    from orchestrator.packages import lifecycle

    served, port = daemon
    heavy(served / "heavy.git", commits=4)  # one tree of 96 KiB, a history of 384 KiB
    monkeypatch.setattr(tree, "MAX_HISTORY", CAP)
    root = packages_dir(env)
    for source in ((served / "heavy.git").as_uri(), f"git://127.0.0.1:{port}/heavy.git"):
        with pytest.raises(tree.PackageRefused) as refused:
            await lifecycle.add(source, None, "")
        said = str(refused.value)
        assert "\n" not in said, said
        assert said.startswith("heavy: refused: its git history passed 262,144 bytes, the cap on a package's "
                               "history, so the download was stopped (to take only its current files, commit a copy "
                               "of them to a new repository and add that); nothing of it was kept"), said
        assert registry(env) == {} and list((root / "enabled").iterdir()) == []
        assert list((root / "staging").iterdir()) == []
        assert marked() == []

    # under the same cap, a package with a short history installs as before
    commit(served / "small.git", {"skills/greeter/SKILL.md": SKILL})
    pkg = await lifecycle.add(f"git://127.0.0.1:{port}/small.git", None, "")
    assert registry(env)["small"]["commit"] == pkg.commit and (root / "enabled" / "small" / "skills").is_dir()
    assert marked() == []


async def test_an_update_over_the_cap_is_refused_and_the_package_stays_as_it_was(tmp_path, env, monkeypatch, marked):
    from orchestrator.packages import lifecycle

    repo = tmp_path / "kit"
    first = heavy(repo, commits=1)
    monkeypatch.setattr(tree, "MAX_HISTORY", CAP)
    await lifecycle.add(str(repo), None, "")
    folder = packages_dir(env) / "enabled" / "kit"
    kept, entry = objects(folder), registry(env)["kit"]
    blob = (folder / "blob.bin").read_bytes()
    heavy(repo, commits=2)  # with the 96 KiB there, 288 KiB: over the cap

    with pytest.raises(tree.PackageRefused) as refused:
        await lifecycle.update("kit")
    said = str(refused.value)
    assert "\n" not in said and said.startswith("kit: update refused: its git history passed 262,144 bytes, the cap"), said
    assert said.endswith(f"nothing of it was written, kit stays at {first[:12]}"), said
    assert marked() == []
    assert objects(folder) == kept  # nothing git brought is left in the package's objects
    assert registry(env)["kit"] == entry and (folder / "blob.bin").read_bytes() == blob
    assert safe_git.run(folder, "rev-parse", "HEAD").stdout.decode().strip() == first
    assert safe_git.changed(folder) == []
    safe_git.run(folder, "fsck", "--no-progress")
    found = skills(env, tmp_path)["greeter"]
    assert (found["root"], found["status"]) == ("package", "loaded")

    monkeypatch.setattr(tree, "MAX_HISTORY", 2 * CAP)  # room enough: the same update goes through
    pkg, change = await lifecycle.update("kit")
    assert change.startswith(f"{first[:12]} -> ") and registry(env)["kit"]["commit"] == pkg.commit != first
    assert (folder / "blob.bin").read_bytes() == (repo / "blob.bin").read_bytes()


STALLING_SSH = """\
#!/bin/sh
# Stands in for ssh (GIT_SSH_VARIANT=simple: HOST COMMAND): runs the command here. With STALL_AFTER set it
# passes on only that many bytes of the answer and then holds the connection open without a word.
if [ -z "$STALL_AFTER" ]; then exec sh -c "$2"; fi
sh -c "$2" | { stdbuf -o0 head -c "$STALL_AFTER"; exec sleep 600; }  # unbuffered: each read passed on
"""


@pytest.fixture
def stalling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ssh:// sources reach this machine's own repositories through STALLING_SSH, the user's GIT_SSH_COMMAND."""
    script = tmp_path / "stalling-ssh"
    script.write_text(STALLING_SSH)
    script.chmod(0o755)
    monkeypatch.setenv("GIT_SSH_COMMAND", str(script))
    monkeypatch.setenv("GIT_SSH_VARIANT", "simple")


async def test_a_stalled_download_is_stopped_at_the_cap_or_the_timeout_with_every_process_it_started(
        tmp_path, env, monkeypatch, marked, stalling):
    from orchestrator.packages import lifecycle

    repo = tmp_path / "slow"
    first = heavy(repo, commits=1)
    monkeypatch.setattr(tree, "MAX_HISTORY", CAP)
    monkeypatch.setattr(safe_git, "TIMEOUT", 60.0)  # a watcher that missed the cap shows as this timeout instead
    await lifecycle.add(f"ssh://127.0.0.1{repo}", None, "")
    folder = packages_dir(env) / "enabled" / "slow"
    kept, entry = objects(folder), registry(env)["slow"]
    heavy(repo, commits=4)

    # the source sends well past the cap, then nothing: only the cap ends the fetch, and its pipeline with it
    monkeypatch.setenv("STALL_AFTER", str(3 * CAP))
    with pytest.raises(tree.PackageRefused, match=r"^slow: update refused: its git history passed 262,144 bytes"):
        await lifecycle.update("slow")
    assert marked() == []  # the stand-in's `sleep 600` and head went with git
    assert objects(folder) == kept and registry(env)["slow"] == entry

    # it sends less than the cap, then nothing: the timeout ends it the same way
    monkeypatch.setattr(tree, "MAX_HISTORY", 8 * CAP)
    monkeypatch.setattr(safe_git, "TIMEOUT", 1.0)
    with pytest.raises(safe_git.GitError, match=r"^git fetch took over 1 s and was stopped; try again later$"):
        await lifecycle.update("slow")
    assert marked() == []
    assert objects(folder) == kept and registry(env)["slow"] == entry

    monkeypatch.delenv("STALL_AFTER")
    monkeypatch.setattr(safe_git, "TIMEOUT", 60.0)
    pkg, change = await lifecycle.update("slow")
    assert change.startswith(f"{first[:12]} -> ") and (folder / "blob.bin").read_bytes() == (repo / "blob.bin").read_bytes()
    assert marked() == []

PYPROJECT = """\
[build-system]
requires = []
build-backend = "backend"
backend-path = ["."]

[project]
name = "hello-cli"
version = "{version}"

[project.scripts]
hello-cli = "hello_cli:main"
"""
# A PEP 517 backend that needs nothing installed, so the dependency step runs without an index.
BACKEND = '''\
import base64, hashlib, os, zipfile


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    info = "hello_cli-0.1.dist-info"
    files = {"hello_cli.py": open("hello_cli.py", "rb").read(),
             info + "/METADATA": b"Metadata-Version: 2.1\\nName: hello-cli\\nVersion: 0.1\\n",
             info + "/WHEEL": b"Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
             info + "/entry_points.txt": b"[console_scripts]\\nhello-cli = hello_cli:main\\n"}
    record = "".join("%s,sha256=%s,%d\\n" % (p, base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode(),
                                           len(d)) for p, d in files.items()) + info + "/RECORD,,\\n"
    name = "hello_cli-0.1-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
        for p, d in files.items():
            z.writestr(p, d)
        z.writestr(info + "/RECORD", record)
    return name
'''


@needs_jail
async def test_dependencies_run_only_after_the_question_and_are_not_asked_again_for_the_same_files(tmp_path, env):
    repo = tmp_path / "hello"
    commit(repo, {"pyproject.toml": PYPROJECT.format(version="0.1"), "backend.py": BACKEND,
                  "hello_cli.py": "def main():\n    print('hello-cli one')\n"})
    folder = packages_dir(env) / "enabled" / "hello"
    ws = tmp_path / "ws"
    ws.mkdir()

    # no terminal and no --yes: shown, not run, and not taken as an answer
    added = run(env, "packages", "add", str(repo))
    assert added.returncode == 0, added.stderr
    assert "-m venv .venv && .venv/bin/python -m pip install ." in added.stdout
    assert "nobody to ask (no terminal)" in added.stdout and not (folder / ".venv").exists()
    assert registry(env)["hello"]["deps"]["answer"] == ""

    # on a terminal: y/N, and a no is remembered for these dependency files
    child = pexpect.spawn(ENTRY[0], [*ENTRY[1:], "packages", "deps", "hello"], env={**os.environ, **env},
                          encoding="utf-8", timeout=60)
    child.expect_exact("run it? [y/N] ")
    child.sendline("n")
    child.expect_exact("declined (remembered for these dependency files)")
    child.expect(pexpect.EOF)
    assert not (folder / ".venv").exists()
    again = run(env, "packages", "update", "hello")
    assert "you declined" in again.stdout and "run it?" not in again.stdout and "runs this" not in again.stdout

    # --yes approves the command shown; it runs in the sandbox and its console script gets a shim
    approved = run(env, "packages", "deps", "hello", "--yes")
    assert approved.returncode == 0 and "approved with --yes" in approved.stdout, approved.stderr
    assert "hello: dependencies installed" in approved.stdout
    assert "hello-cli one" in (await bash(ws, "hello-cli")).text

    # a new commit with the same dependency files: installed again without asking
    commit(repo, {"hello_cli.py": "def main():\n    print('hello-cli two')\n"})
    quiet = run(env, "packages", "update", "hello")
    assert quiet.returncode == 0 and "runs this" not in quiet.stdout, quiet.stdout + quiet.stderr
    assert "hello: dependencies installed" in quiet.stdout
    assert "hello-cli two" in (await bash(ws, "hello-cli")).text

    # the dependency files changed: asked again, and until then the console script is not on PATH
    commit(repo, {"pyproject.toml": PYPROJECT.format(version="0.2")})
    asked = run(env, "packages", "update", "hello")
    assert "runs this" in asked.stdout and "nobody to ask" in asked.stdout
    assert "hello-cli: command not found" in (await bash(ws, "hello-cli")).text
    assert "asks again (dependency files changed)" in run(env, "packages", "show", "hello").stdout


async def test_the_dependency_step_may_not_leave_a_link_pointing_out(tmp_path, env):
    from orchestrator.packages import deps

    folder = tmp_path / "pkg"
    (folder / ".venv" / "bin").mkdir(parents=True)
    os.symlink("/usr/bin/python3", folder / ".venv" / "bin" / "python")  # a venv's own links are fine
    assert deps.stray_links(folder) == ""
    (folder / "skills").mkdir()
    os.symlink(str(tmp_path / "secret"), folder / "skills" / "key")
    assert deps.stray_links(folder) == "skills/key"


async def test_two_packages_cannot_take_one_name_and_bad_names_are_refused(tmp_path, env):
    repo = tmp_path / "one"
    commit(repo, {"bin/x": "#!/bin/sh\n"}, executable=("bin/x",))
    assert run(env, "packages", "add", str(repo)).returncode == 0
    again = run(env, "packages", "add", str(repo))
    assert again.returncode == 2 and "already installed" in again.stderr
    bad = run(env, "packages", "add", str(repo), "--name", "../up")
    assert bad.returncode == 2 and "cannot name a package" in bad.stderr
    missing = run(env, "packages", "show", "nope")
    assert missing.returncode == 2 and "no package named 'nope'" in missing.stderr


def test_the_shipped_scenario_plays_a_package_skill_in_the_untrusted_tier(env):
    played = run(env, "run", str(Path(__file__).parents[1] / "scenarios" / "skills-package.yaml"))
    assert played.returncode == 0 and "every expectation held" in played.stdout, played.stdout + played.stderr


def test_a_package_that_is_one_skill_and_two_packages_with_one_command_name(tmp_path, env):
    alpha, beta = tmp_path / "alpha", tmp_path / "beta"
    commit(alpha, {"SKILL.md": SKILL.replace("name: greeter", "name: alpha"), "bin/tool": "#!/bin/sh\necho alpha\n"},
           executable=("bin/tool",))
    commit(beta, {"bin/tool": "#!/bin/sh\necho beta\n"}, executable=("bin/tool",))
    for repo in (alpha, beta):
        assert run(env, "packages", "add", str(repo)).returncode == 0
    assert registry(env)["alpha"]["skill_roots"] == [""]
    assert skills(env, tmp_path)["alpha"]["root"] == "package"
    shim = packages_dir(env) / "bin" / "tool"
    assert "enabled/alpha/bin/tool" in shim.read_text()
    assert "command: tool -> bin/tool (bin/; not on PATH: alpha has that name)" in run(env, "packages", "show",
                                                                                      "beta").stdout
    assert run(env, "packages", "disable", "alpha").returncode == 0
    assert "enabled/beta/bin/tool" in shim.read_text() and "alpha" not in skills(env, tmp_path)
    assert (packages_dir(env) / "disabled" / "alpha" / "SKILL.md").exists()

    # one package's refused update does not keep the others back
    commit(beta, {"bin/more": "x\n"}, links={"bin/link": "/etc/hostname"})
    commit(alpha, {"README.md": "alpha, newer\n"})
    both = run(env, "packages", "update")
    assert both.returncode == 2 and "beta: update refused" in both.stderr and "alpha: " in both.stdout
    assert (packages_dir(env) / "disabled" / "alpha" / "README.md").read_text() == "alpha, newer\n"

"""The workspace is never the home folder, / or a system folder unless the user names it: `chat` started
there refuses in one line, `serve` and `mcp serve` work in a folder of their own, a scenario's
`workspace:` pointing there is refused, and `--workspace ~` is allowed with a warning."""
from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from tests.test_trust import environ, home

ENTRY = [sys.executable, "-m", "orchestrator"]


def cli(tmp: Path, cwd: Path, *args: str, stdin: str = "/exit\n") -> subprocess.CompletedProcess:
    return subprocess.run([*ENTRY, *args], input=stdin, capture_output=True, text=True, timeout=30,
                          env=environ(tmp), cwd=cwd)


@pytest.mark.parametrize("where", ["home", "root"])
def test_chat_started_in_the_home_folder_or_root_refuses_in_one_line(tmp_path, where):
    cwd = home(tmp_path) if where == "home" else Path("/")
    out = cli(tmp_path, cwd, "chat", "--model", "lab/m", "--db", str(tmp_path / "rooms.db"))
    assert out.returncode == 2 and out.stdout == ""
    what = "your home folder" if where == "home" else "the root of the file system"
    assert out.stderr == (f"error: not starting in {cwd}: it is {what}, and agents may change any file in their "
                          f"workspace; pass --workspace DIR (a project folder, or --workspace {cwd} if you mean it)\n")


def test_chat_in_the_home_folder_when_the_user_names_it_is_warned_about(tmp_path):
    h = home(tmp_path)
    out = cli(tmp_path, tmp_path, "chat", "--model", "lab/m", "--db", str(tmp_path / "rooms.db"), "--workspace", "~")
    assert out.returncode == 0, out.stderr
    assert out.stderr.splitlines()[0] == (f"warning: the workspace {h} is your home folder: agents may change any "
                                          "file in it (startup files, git and app settings)")


def test_a_scenario_whose_workspace_is_the_home_folder_is_refused_unless_the_flag_says_so(tmp_path):
    h = home(tmp_path)
    scn = h / "mine.yaml"
    scn.write_text("name: mine\nworkspace: .\nmodels:\n  commander:\n    - say: Hi.\nturns:\n  - user: hi\n")
    out = cli(tmp_path, tmp_path, "run", str(scn))
    assert out.returncode == 2
    assert out.stderr.strip() == (f"error: {scn}: workspace '.' is your home folder; give it a project folder, or "
                                  f"pass --workspace {h} if you mean it")
    out = cli(tmp_path, tmp_path, "run", str(scn), "--workspace", str(h))
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stderr.startswith(f"warning: the workspace {h} is your home folder")


@pytest.mark.parametrize("where", ["home", "root"])
def test_serve_started_in_the_home_folder_or_root_works_in_its_own_folder(tmp_path, where):
    cwd = home(tmp_path) if where == "home" else Path("/")
    workers = "1" if where == "home" else "2"  # one process, and the supervisor of two
    proc = subprocess.Popen([*ENTRY, "serve", "--db", str(tmp_path / "rooms.db"), "--port", "0", "--json",
                             "--workers", workers, "--model", "lab/m"], cwd=cwd, env=environ(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        said = json.loads(proc.stdout.readline())
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        proc.stdout.close()
        proc.stderr.close()
    own = home(tmp_path) / ".data" / "orchestrator" / "workspaces" / "serve"
    assert said["workspace"] == str(own)
    assert stat.S_IMODE(own.stat().st_mode) == 0o700


async def test_mcp_serve_started_in_the_home_folder_or_root_works_in_its_own_folder(tmp_path):
    pytest.importorskip("mcp", reason="the MCP extra is not installed: pip install -e '.[mcp]'")
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from orchestrator.store.db import Store

    own = home(tmp_path) / ".data" / "orchestrator" / "workspaces" / "mcp-serve"
    for cwd in (home(tmp_path), Path("/")):
        db = tmp_path / f"{cwd.name or 'root'}.db"
        params = StdioServerParameters(command=sys.executable, cwd=str(cwd), env=environ(tmp_path),
                                       args=["-m", "orchestrator", "mcp", "serve", "--model", "lab/m", "--db", str(db)])
        with open(tmp_path / "serve.log", "w") as errlog, trio.fail_after(30):
            async with Client(stdio_client(params, errlog=errlog)) as client:
                await client.call_tool("ask_team", {"line": "where are you?"})  # nothing answers the model
        store = await Store.open(db)
        try:
            [record] = await store.rooms()
            assert (await store.room(record.id)).meta["workspace"] == str(own)
        finally:
            await store.close()
    assert stat.S_IMODE(own.stat().st_mode) == 0o700


def test_what_may_not_be_a_default_workspace(tmp_path, monkeypatch):
    from orchestrator.team.trust import unsafe_workspace

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home" / "project").mkdir(parents=True)
    assert unsafe_workspace(Path("/")) == "the root of the file system"
    assert unsafe_workspace(tmp_path / "home") == "your home folder"
    assert unsafe_workspace(tmp_path) == f"a folder holding your home folder {tmp_path / 'home'}"
    assert unsafe_workspace(Path("/etc")) == "a system folder (/etc)"
    assert unsafe_workspace(Path("/usr/lib")).startswith("a system folder")
    assert unsafe_workspace(Path("/var")).startswith("a folder holding the system folder /var/")
    assert unsafe_workspace(tmp_path / "home" / "project") is None
    (tmp_path / "elsewhere").mkdir()
    assert unsafe_workspace(tmp_path / "elsewhere") is None

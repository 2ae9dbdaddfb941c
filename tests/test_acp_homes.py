"""The external agents' private HOMEs in the state folder: `orchestrator agents prune` removes those whose room is
in no database the project knows, never following a link an agent left and never leaving the acp folder; a running
agent's HOME is kept; and the HOMEs of a store the project deletes go with it."""
from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from orchestrator.acp import homes
from orchestrator.store.backends import open_store

ROOT = Path(__file__).resolve().parent.parent
AGENT = ROOT / "tests" / "acpdata" / "agent.py"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The state and data folders of a user of our own, for this process and the commands it runs."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("ORCHESTRATOR_DB", raising=False)
    return {k: v for k, v in os.environ.items() if k != "ORCHESTRATOR_DB"}


def prune(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchestrator", "agents", "prune", *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=120)


async def database(path: Path, *names: str) -> list[str]:
    """A database at `path` with a room of each name; their ids."""
    path.parent.mkdir(parents=True, exist_ok=True)
    store = await open_store(path)
    try:
        return [(await store.create_room(n)).id for n in names]
    finally:
        await store.close()


def agent_home(room: str, member: str, *files: str) -> Path:
    """A HOME as an agent leaves it: its config, and what it was told to put there."""
    home = homes.home(room, member)
    (home / ".config" / "agent").mkdir(parents=True)
    (home / ".config" / "agent" / "settings.json").write_text("{}")
    for name in files:
        (home / name).write_text(name)
    return home


def nest(folder: Path, depth: int) -> None:
    """Folders in folders, deeper than Python's stack and longer than a path may be: made one by one."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)


async def test_prune_removes_the_homes_of_rooms_in_no_database(env, tmp_path: Path):
    data = tmp_path / "data" / "orchestrator"
    chat, = await database(data / "orchestrator.db", "chat room")
    run, = await database(data / "runs" / "20260101-000000-1-demo.db", "a kept run")
    served, = await database(data / "mcp-serve.db", "an mcp client's room")
    own, = await database(tmp_path / "elsewhere.db", "chat --db elsewhere.db")
    for room in (chat, run, served, own):
        agent_home(room, "claude")
    gone = "0123456789ab"
    # what the agent of a gone room left: links to the user's files (one a folder), a read-only tree as Go's
    # module cache is, and folders nested deeper than a recursive walk could go
    users = tmp_path / "user"
    (users / "projects").mkdir(parents=True)
    (users / "notes.txt").write_text("keep me")
    (users / "projects" / "plan.md").write_text("keep me too")
    claude = agent_home(gone, "claude", "transcript.jsonl")
    (claude / "notes").symlink_to(users / "notes.txt")
    (claude / ".config" / "projects").symlink_to(users / "projects")
    (claude / "dangling").symlink_to(tmp_path / "nothing-here")
    cache = claude / "go" / "pkg" / "mod" / "example.com@v1"
    cache.mkdir(parents=True)
    (cache / "mod.go").write_text("package x")
    for folder in (cache, cache.parent):
        folder.chmod(0o555)
    (cache / "mod.go").chmod(0o444)
    await trio.to_thread.run_sync(nest, claude, 2100)
    codex = agent_home(gone, "codex")
    homes.root().joinpath(gone, "stray").symlink_to(users)  # an entry of the room's folder that is no HOME

    listed = prune(env, "--dry-run", "--db", str(tmp_path / "elsewhere.db"))
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert listed.stdout.splitlines() == [
        f"would remove {claude}", f"would remove {codex}",
        f"would remove {codex.parent / 'stray'} (a link: removed as one, what it points to untouched)",
        "would remove 3 agent HOMEs (1 room gone from every database); run it without --dry-run to remove them"]
    assert claude.is_dir() and (cache / "mod.go").exists()  # a dry run removes nothing

    done = prune(env, "--db", str(tmp_path / "elsewhere.db"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[0] == f"removed {claude}"
    assert done.stdout.splitlines()[-1] == "removed 3 agent HOMEs (1 room gone from every database)"
    assert not homes.root().joinpath(gone).exists()
    assert (users / "notes.txt").read_text() == "keep me"  # the links were removed, not followed
    assert (users / "projects" / "plan.md").read_text() == "keep me too"
    assert sorted(homes.rooms()) == sorted([chat, run, served, own])

    again = prune(env)  # without --db, the room of elsewhere.db is known nowhere
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == [f"removed {homes.home(own, 'claude')}",
                                         "removed 1 agent HOME (1 room gone from every database)"]
    assert sorted(homes.rooms()) == sorted([chat, run, served])
    assert prune(env).stdout.startswith(f"nothing to remove in {homes.root()}")
    homes.remove([chat, run, served])
    assert prune(env).stdout == f"no agent HOMEs in {homes.root()}\n"


async def test_a_database_that_cannot_be_read_stops_the_prune(env, tmp_path: Path):
    agent_home("0123456789ab", "claude")
    (tmp_path / "broken.db").write_text("not a database")
    for args in (["--db", str(tmp_path / "broken.db")], ["--db", str(tmp_path / "missing.db")]):
        run = prune(env, *args)
        assert run.returncode == 2 and run.stdout == "", run.stdout
        assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr, run.stderr
    assert "nothing was removed" in run.stderr or "no such database" in run.stderr
    assert homes.home("0123456789ab", "claude").is_dir()


def test_a_crafted_name_never_leads_out_of_the_acp_folder(env, tmp_path: Path):
    outside = tmp_path / "outside"
    (outside / "room" / "claude").mkdir(parents=True)
    (outside / "room" / "claude" / "keep.txt").write_text("keep")
    agent_home("0123456789ab", "claude")
    homes.root().joinpath("linked").symlink_to(outside / "room")  # a link as a room's folder
    refused = homes.remove(["..", str(outside), "../outside", "a/../..", ".", ""])
    assert all(o.failed and o.kept.startswith("refused") for o in refused) and len(refused) == 6
    assert homes.remove(["linked"]) == [homes.Outcome(homes.root() / "linked", link=True)]
    assert (outside / "room" / "claude" / "keep.txt").read_text() == "keep"
    assert not homes.root().joinpath("linked").exists()
    assert homes.root().joinpath("0123456789ab", "claude").is_dir()  # none of it touched the others
    with pytest.raises(ValueError):
        homes.home("..", "claude")
    with pytest.raises(ValueError):
        homes.home("0123456789ab", "../../x")


def test_a_home_removed_while_its_start_waited_is_made_again(env):
    """A start waits while a prune holds a HOME's lock, then makes it again if the prune removed it."""
    home = homes.home("0123456789ab", "claude")
    home.mkdir(parents=True)
    pruning = os.open(home, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(pruning, fcntl.LOCK_EX)
    held: list[int] = []

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            async def start() -> None:
                held.append(await trio.to_thread.run_sync(homes.hold, home))
            nursery.start_soon(start)
            await trio.sleep(0.3)
            assert not held  # waiting on the prune
            home.rmdir()
            os.close(pruning)

    trio.run(main)
    try:
        assert home.is_dir() and os.path.samestat(os.fstat(held[0]), os.stat(home))
        assert homes.remove(["0123456789ab"])[0].kept == "its agent is running"
    finally:
        os.close(held[0])
    assert homes.remove(["0123456789ab"]) == [homes.Outcome(home)]


async def test_a_running_agents_home_is_kept_and_goes_once_it_ends(env, tmp_path: Path):
    pytest.importorskip("acp", reason="the test agent needs the ACP SDK (agent-client-protocol)")
    from orchestrator.providers.scripted import Reply, ScriptedProvider
    from orchestrator.room.room import Room
    from orchestrator.team.schema import AcpSpec, AgentDef, Team

    workspace = tmp_path / "ws"
    workspace.mkdir()
    team = Team(commander=AgentDef(name="commander", model="scripted"), agents=[
        AgentDef(name="coder", description="the coder", acp=AcpSpec(command=[sys.executable, str(AGENT)]))])
    provider = ScriptedProvider({"commander": [
        Reply(calls=[("dispatch_to", {"agent": "coder", "task": "Please do this.\nsay: done"})]), Reply(say="Ok.")]})
    store = await open_store(tmp_path / "room.db")  # a database `prune` does not know
    try:
        async with Room.create(store, team, lambda m: (provider, "scripted"), workspace=workspace) as room:
            await room.post("Work.")
            await room.idle()
            home = homes.home(room.id, "coder")
            assert home.is_dir()  # the agent is still running, between its tasks
            kept = await trio.to_thread.run_sync(prune, env)
            assert kept.returncode == 0, kept.stderr
            assert kept.stdout.splitlines()[0] == f"kept     {home}: its agent is running"
            assert home.is_dir()
        done = await trio.to_thread.run_sync(prune, env)
        assert done.stdout.splitlines()[0] == f"removed {home}", done.stdout
        assert not home.parent.exists()
    finally:
        await store.close()


async def test_a_deleted_stores_rooms_take_their_homes_along(env, tmp_path: Path):
    first, second = await database(tmp_path / "runs" / "old.db", "one", "two")
    other, = await database(tmp_path / "runs" / "new.db", "three")
    for room in (first, second, other):
        agent_home(room, "claude")
    await homes.forget_dbs([tmp_path / "runs" / "old.db", tmp_path / "runs" / "broken.db"])
    assert homes.rooms() == [other]
    store = await open_store(tmp_path / "runs" / "new.db")
    try:
        await homes.forget_store(store)
    finally:
        await store.close()
    assert homes.rooms() == []


async def test_a_scenario_runs_own_database_takes_its_homes_along(env, tmp_path: Path):
    pytest.importorskip("acp", reason="the test agent needs the ACP SDK (agent-client-protocol)")
    from orchestrator.scenario.loader import load_scenario
    from orchestrator.scenario.runner import run_scenario

    scn = load_scenario(ROOT / "scenarios" / "acp-parallel.yaml", trusted=True)
    seen: set[str] = set()
    result = await run_scenario(scn, on_event=lambda ev: seen.update(homes.rooms()))
    assert result.check.ok, result.check.failures
    assert seen == {result.room_id}  # its agents had their HOMEs while it ran
    assert homes.rooms() == []
    kept = await run_scenario(scn, db=tmp_path / "kept.db")  # a database that stays keeps them
    assert homes.rooms() == [kept.room_id]


async def test_a_runtimes_temporary_database_takes_its_homes_along(env, tmp_path: Path):
    pytest.importorskip("acp", reason="the test agent needs the ACP SDK (agent-client-protocol)")
    from orchestrator.providers.scripted import Reply
    from orchestrator import Runtime
    from orchestrator.team.schema import AcpSpec, AgentDef, Team

    team = Team(commander=AgentDef(name="commander", model="scripted"), agents=[
        AgentDef(name="coder", description="the coder", acp=AcpSpec(command=[sys.executable, str(AGENT)]))])
    script = {"commander": [
        Reply(calls=[("dispatch_to", {"agent": "coder", "task": "Please do this.\nsay: done"})]), Reply(say="Ok.")]}
    async with Runtime.open(scripted=script, workspace=tmp_path / "ws") as rt:
        async with rt.room(team) as room:
            await rt.ask(room, "Work.")
        assert homes.rooms() == [room.id]
    assert homes.rooms() == []


def test_the_oldest_run_pruned_takes_its_homes_along(env, tmp_path: Path):
    from orchestrator.cli.paths import KEEP_RUNS

    runs = tmp_path / "data" / "orchestrator" / "runs"
    oldest, = trio.run(database, runs / "20000101-000000-1-old.db", "the oldest run")
    for i in range(KEEP_RUNS - 1):
        trio.run(database, runs / f"20000102-{i:06d}-1-run.db", "a newer run")
    agent_home(oldest, "claude")
    run = subprocess.run([sys.executable, "-m", "orchestrator", "run", "greeting"], capture_output=True, text=True,
                         cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert not (runs / "20000101-000000-1-old.db").exists()
    assert homes.rooms() == []

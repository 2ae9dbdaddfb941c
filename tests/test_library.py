"""The package as a library: importing it, or opening and closing rooms on a host, leaves the host process as
it was: its import system, its modules and its garbage collector (the command line's tricks are its own)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent("""
    import gc, sys
    finders, thresholds = list(sys.meta_path), gc.get_threshold()
    import orchestrator
    assert sys.meta_path == finders, sys.meta_path

    import tempfile, trio
    from pathlib import Path
    from orchestrator.providers.scripted import Reply, ScriptedProvider
    from orchestrator.room.host import RoomHost
    from orchestrator.room.room import Room
    from orchestrator.store.db import Store
    from orchestrator.team.schema import AgentDef, Team

    def nothing_hidden():
        return [name for name, module in sys.modules.items() if module is None]

    async def main():
        team = Team(commander=AgentDef(name="commander", model="scripted"))
        provider = ScriptedProvider({"commander": [Reply(say="hello"), Reply(say="again")]})
        with tempfile.TemporaryDirectory() as tmp:
            store = await Store.open(Path(tmp) / "r.db")
            record = await store.create_room("r", meta={"workspace": tmp})
            async with Room.open(store, record.id, lambda m: (provider, "scripted"), team=team) as room:
                await room.post("hi")
                await room.idle()
                assert gc.get_freeze_count() == 0 and gc.get_threshold() == thresholds
            async with RoomHost.open(store, lambda m: (provider, "scripted"), team=team) as host:
                async with host.room(None, name="other", workspace=Path(tmp)) as room:
                    await room.post("hi")
                    await room.idle()
                    await trio.sleep(1.5)  # a tuned host's heap would have settled by now
                    assert gc.get_freeze_count() == 0 and gc.get_threshold() == thresholds
            await store.close()

    trio.run(main)
    assert sys.meta_path == finders and nothing_hidden() == [], (sys.meta_path, nothing_hidden())
    assert gc.isenabled() and gc.get_freeze_count() == 0 and gc.get_threshold() == thresholds
    print("unchanged")
""")


def test_importing_and_opening_rooms_changes_nothing_in_the_process(tmp_path):
    run = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path, env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0 and run.stdout.strip() == "unchanged", run.stderr[-3000:]


def test_the_command_line_tunes_its_own_process():
    from orchestrator.core import startup

    run = subprocess.run([sys.executable, "-c", "import sys, orchestrator.cli; "
                          "print(any(type(f).__name__ == '_WithoutRich' for f in sys.meta_path))"],
                         capture_output=True, text=True, timeout=60)
    assert run.stdout.strip() == "True", run.stderr
    assert startup.tuned() is ("orchestrator.cli" in sys.modules)

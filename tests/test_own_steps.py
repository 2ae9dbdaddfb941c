"""The orchestrator's own steps outside the jail open files as the tools do: `/export`, `kb add`, skills, the
self-improvement pass's proposals and `skills review` never follow a link an agent planted out of the
workspace (or out of the folder the user named), and say so in one line naming the link."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from orchestrator.cli import kb as kb_cli
from orchestrator.memory.ingest import add_files, find_files
from orchestrator.tools.disk import CheckedDisk
from orchestrator.memory.knowledge import MemoryKnowledgeBase
from orchestrator.skills import proposals
from orchestrator.skills.library import Root, discover
from orchestrator.skills.proposals import Proposal, skill_text, stage
from orchestrator.tools import sandbox
from orchestrator.tools.base import ToolError

ENTRY = [sys.executable, "-m", "orchestrator"]
SECRET = "SENTINEL-never-to-be-read-or-written"
EVOLVE = """
    name: learn
    team:
      evolve: {threshold: 0}
      agents: [{name: helper, description: helps}]
    models:
      commander:
        - say: "Report: total 6."
      evolve:
        - say: |
            <proposal kind="skill" action="create" name="csv-report">
            <rationale>seq 1-2</rationale>
            <description>Turns a CSV file into a short report. Use when asked for a CSV report.</description>
            <instructions>
            Read the file, sum the columns.
            </instructions>
            </proposal>
    turns:
      - user: report please
    """


def orchestrator(tmp_path: Path, *args: str, stdin: str = "", cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k not in
           ("OLLAMA_HOST", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "ORCHESTRATOR_MODEL", "ORCHESTRATOR_CONFIG",
            "ORCHESTRATOR_DB")}
    home = tmp_path / "home"
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_DATA_HOME=str(home / ".data"))
    return subprocess.run([*ENTRY, *args], input=stdin, capture_output=True, text=True, timeout=60, env=env,
                          cwd=cwd or tmp_path)


def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace and, beside it, a folder outside with a file whose content must never move."""
    ws, out = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    out.mkdir()
    (tmp_path / "home").mkdir()
    (out / "secret.md").write_text(SECRET)
    return ws, out


def untouched(out: Path, *names: str) -> None:
    assert (out / "secret.md").read_text() == SECRET
    assert sorted(p.name for p in out.iterdir()) == sorted(["secret.md", *names])


def refusals(text: str) -> list[str]:
    return [line for line in text.splitlines() if "refused" in line]


# --- /export ---------------------------------------------------------------------------------------------------

def test_export_writes_no_link_an_agent_planted_and_names_each_one(tmp_path):
    ws, out = layout(tmp_path)
    (ws / "notes.md").symlink_to(out / "secret.md")  # the final component
    (ws / "linked").symlink_to(out)  # a folder on the way
    os.link(out / "secret.md", ws / "hard.md")  # another name of the outside file
    scn = tmp_path / "chat.yaml"
    scn.write_text("name: exp\nmodels:\n  commander:\n    - say: Hello there.\n")
    lines = ["hi", "/export notes.md", "/export linked/x.md", "/export hard.md", "/export mine.md",
             "/export ~/kept.md"]
    done = orchestrator(tmp_path, "chat", "--scripted", str(scn), "--workspace", str(ws), "--db",
                        str(tmp_path / "rooms.db"), stdin="\n".join(lines) + "\n", cwd=ws)
    assert done.returncode == 0, done.stderr
    untouched(out)
    assert refusals(done.stdout) == [
        f"! notes.md: refused: {ws / 'notes.md'} is a symbolic link (to {out / 'secret.md'}); name the real path",
        f"! linked/x.md: refused: {ws / 'linked'} is a symbolic link (to {out}); name the real path",
        f"! hard.md: refused: {ws / 'hard.md'} has 2 hard links, and another name of it may lie anywhere"]
    # what the user named plainly is written, outside the workspace too
    assert "Hello there." in (ws / "mine.md").read_text() and "Hello there." in (tmp_path / "home/kept.md").read_text()


@pytest.mark.parametrize("swapped", ["file", "folder"])
def test_a_link_swapped_in_after_every_check_is_not_written_through(tmp_path, monkeypatch, swapped):
    ws, out = layout(tmp_path)
    (ws / "sub").mkdir()
    target = ws / "sub" / "notes.md"
    target.write_text("old")
    real, looks = sandbox.resolve, []

    def resolve_then_swap(*args, **kwargs):
        path = real(*args, **kwargs)
        looks.append(path)
        if len(looks) == 2:  # open_checked's own look, the last before it opens: the swap comes after it
            if swapped == "file":
                target.unlink()
                target.symlink_to(out / "secret.md")
            else:
                (ws / "sub").rename(ws / "moved")
                (ws / "sub").symlink_to(out)
        return path

    monkeypatch.setattr(sandbox, "resolve", resolve_then_swap)
    with pytest.raises(ToolError, match="symbolic link while being opened; refused"):
        sandbox.write_named(str(target), b"the transcript")
    untouched(out)


# --- kb add ----------------------------------------------------------------------------------------------------

def kb_args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="orchestrator")
    kb_cli.add_parser(p.add_subparsers(dest="command", required=True))
    return p.parse_args(argv)


def kb_tree(tmp_path: Path, monkeypatch) -> tuple[Path, Path, Path]:
    """docs/ holding a real file and links to credentials and outside files; HOME is the fake home."""
    ws, out = layout(tmp_path)
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.delenv("ORCHESTRATOR_EMBED_MODEL", raising=False)
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text(f"[default]\naws_secret_access_key = {SECRET}\n")
    docs = ws / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text("# Guide\nThe walnut setting lives here.\n")
    (docs / "creds.md").symlink_to(home / ".aws" / "credentials")
    (docs / "elsewhere").symlink_to(out)
    os.link(out / "secret.md", docs / "hard.md")
    (ws / "linked").symlink_to(docs)
    return docs, home, out


async def test_kb_add_never_follows_a_link_and_never_reads_credentials(tmp_path, monkeypatch, capsys):
    docs, home, out = kb_tree(tmp_path, monkeypatch)
    ws, db = docs.parent, str(tmp_path / "kb.db")
    named = [str(docs), str(ws / "linked"), str(docs / "creds.md"), str(home / ".aws" / "credentials")]
    args = kb_args("kb", "add", *named, "--db", db, "--embed", "none")
    assert await args.fn(args) == 1  # the named links were skipped
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        f"SKIPPED   {ws / 'linked'}: refused: {ws / 'linked'} is a symbolic link (to {docs}); name the real path",
        f"SKIPPED   {docs / 'creds.md'}: refused: {docs / 'creds.md'} is a symbolic link (to "
        f"{home / '.aws/credentials'}); name the real path",
        f"added     {docs / 'guide.md'} (1 chunk)",
        f"SKIPPED   {home / '.aws/credentials'}: refused: {home / '.aws'} holds credentials; tools can never open "
        "it, even when granted",
        "3 skipped, 1 added; 3 links skipped (symbolic and hard links in the folders given are not followed)"]
    for query in (SECRET, "aws_secret_access_key"):
        args = kb_args("kb", "search", query, "--db", db, "--json", "--mode", "fts")
        assert await args.fn(args) == 0 and capsys.readouterr().out == ""
    args = kb_args("kb", "list", "--db", db, "--json")
    await args.fn(args)
    assert [json.loads(line)["path"] for line in capsys.readouterr().out.splitlines()] == [str(docs / "guide.md")]
    untouched(out)


async def test_kb_a_file_swapped_for_a_link_after_the_walk_is_not_read(tmp_path, monkeypatch):
    docs, home, _ = kb_tree(tmp_path, monkeypatch)
    disk = CheckedDisk()
    files, problems = find_files([str(docs)], disk=disk)
    assert files == [docs / "guide.md"] and problems == []
    (docs / "guide.md").unlink()
    (docs / "guide.md").symlink_to(home / ".aws" / "credentials")
    async with await MemoryKnowledgeBase.open() as kb:
        [result] = [r async for r in add_files(kb, files, disk=disk)]
        assert result.status == "skipped"
        assert result.message == (f"refused: the symbolic link {docs / 'guide.md'} leads out of {docs} "
                                  f"(to {home / '.aws/credentials'})")
        assert await kb.search(SECRET, mode="fts") == []


# --- skills and the self-improvement pass ------------------------------------------------------------------------

def test_project_skills_behind_a_link_out_are_invalid_and_never_read(tmp_path):
    ws, out = layout(tmp_path)
    (out / "theirs").mkdir()
    (out / "theirs" / "SKILL.md").write_text(f"---\nname: theirs\ndescription: {SECRET}\n---\nGo.\n")
    skills = ws / ".agents" / "skills"
    skills.mkdir(parents=True)
    (skills / "theirs").symlink_to(out / "theirs")
    (skills / "file").mkdir()
    (skills / "file" / "SKILL.md").symlink_to(out / "theirs" / "SKILL.md")
    (skills / "hard").mkdir()
    os.link(out / "theirs" / "SKILL.md", skills / "hard" / "SKILL.md")
    lib = discover([Root("project", skills)])
    reasons = {e.name: e.reason for e in lib.entries}
    assert lib.skills == {} and {e.status for e in lib.entries} == {"invalid"}
    assert reasons["theirs"].endswith(f"the symbolic link {skills / 'theirs'} leads out of {ws} "
                                      f"(to {out / 'theirs'})")
    assert reasons["file"].endswith(f"the symbolic link {skills / 'file/SKILL.md'} leads out of {ws} "
                                    f"(to {out / 'theirs/SKILL.md'})")
    assert "refused: it has 2 hard links" in reasons["hard"]
    assert SECRET not in repr(lib.entries)
    # the user's own roots keep their links: a skill folder linked in from elsewhere is theirs to make
    user = tmp_path / "home" / "skills"
    user.mkdir()
    (user / "theirs").symlink_to(out / "theirs")
    assert discover([Root("user", user)]).get("theirs") is not None


@pytest.mark.parametrize("planted", [".agents/proposed", ".agents"])
def test_the_pass_stages_no_proposal_through_a_planted_link(tmp_path, planted):
    ws, out = layout(tmp_path)
    (ws / planted).parent.mkdir(parents=True, exist_ok=True)
    (ws / planted).symlink_to(out)
    (tmp_path / "learn.yaml").write_text(textwrap.dedent(EVOLVE))
    done = orchestrator(tmp_path, "run", str(tmp_path / "learn.yaml"), "--workspace", str(ws), "--db",
                        str(tmp_path / "runs.db"), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    [evolution] = [e for e in map(json.loads, done.stdout.splitlines()) if e["type"] == "evolution"]
    assert evolution["status"] == "refused"
    assert f"refused: the symbolic link {ws / planted} leads out of {ws}" in evolution["reason"]
    untouched(out)


def staged_create(ws: Path, tmp_path: Path) -> proposals.Staged:
    text = skill_text("csv-report", "Turns a CSV file into a report. Use for CSV reports.", "Sum the columns.",
                      {"created_by": "agent"})
    return stage(ws, discover([]), Proposal(kind="skill", action="create", target="csv-report"), text)


@pytest.mark.parametrize("planted", [".agents/skills", ".agents/proposed/accepted"])
def test_review_accept_writes_nothing_through_a_planted_link(tmp_path, planted):
    ws, out = layout(tmp_path)
    staged = staged_create(ws, tmp_path)
    (ws / planted).symlink_to(out)
    done = orchestrator(tmp_path, "skills", "review", "--accept", "all", "--workspace", str(ws))
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert f"refused: the symbolic link {ws / planted} leads out of {ws}" in line
    untouched(out)
    assert not (ws / ".agents/skills/csv-report").exists()  # not applied, and still waiting for a decision
    assert [s.id for s in proposals.pending(ws)] == [staged.id]


def test_accepting_an_update_refuses_a_skill_file_hard_linked_since_the_room_read_it(tmp_path):
    ws, out = layout(tmp_path)
    text = skill_text("mine", "Mine, made by the pass. Use for tests.", "Step one.", {"created_by": "agent"})
    (ws / ".agents/skills/mine").mkdir(parents=True)
    (ws / ".agents/skills/mine/SKILL.md").write_text(text)
    lib = discover([Root("project", ws / ".agents/skills")])
    staged = stage(ws, lib, Proposal(kind="skill", action="update", target="mine"), text.replace("one", "two"))
    (out / "secret.md").write_text(text)  # same bytes, so only the link itself can stop it
    (ws / ".agents/skills/mine/SKILL.md").unlink()
    os.link(out / "secret.md", ws / ".agents/skills/mine/SKILL.md")
    with pytest.raises(proposals.InputError, match="refused: it has 2 hard links"):
        proposals.apply_skill(ws, lib, staged)
    assert (out / "secret.md").read_text() == text


@pytest.mark.parametrize("where", ["home", "/"])
def test_review_refuses_to_write_in_a_default_workspace_that_is_home_or_root(tmp_path, where):
    (tmp_path / "home").mkdir()
    cwd = tmp_path / "home" if where == "home" else Path("/")
    listed = orchestrator(tmp_path, "skills", "review", cwd=cwd)
    assert listed.returncode == 0 and "no pending proposals" in listed.stdout
    done = orchestrator(tmp_path, "skills", "review", "--accept", "all", cwd=cwd)
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert f"not writing in {cwd}" in line and "pass --workspace DIR" in line


def test_a_trace_file_is_not_written_through_a_planted_link(tmp_path):
    import subprocess
    import sys

    outside = tmp_path / "outside.jsonl"
    outside.write_text("the user's\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "trace.jsonl").symlink_to(outside)
    env = {**os.environ, "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}
    done = subprocess.run([sys.executable, "-m", "orchestrator", "run", "greeting", "--trace", "trace.jsonl"],
                          cwd=ws, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "is a symbolic link" in done.stderr
    assert outside.read_text() == "the user's\n"

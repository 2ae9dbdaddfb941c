"""The skills commands end to end: `skills check|list|show|review`, the shell's /skills, /skill and
/proposals, and an evolve run whose proposal `skills review --accept` turns into a skill the next room sees."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from orchestrator.team import trust

DATA = Path(__file__).parent / "data" / "skills"
ENTRY = [sys.executable, "-m", "orchestrator"]


def orchestrator(tmp_path: Path, *args: str, stdin: str = "", cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k not in
           ("OLLAMA_HOST", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "ORCHESTRATOR_MODEL", "ORCHESTRATOR_CONFIG")}
    env.update(HOME=str(tmp_path / "home"), XDG_CONFIG_HOME=str(tmp_path / "config"))
    return subprocess.run([*ENTRY, *args], input=stdin, capture_output=True, text=True, timeout=60, env=env,
                          cwd=cwd or tmp_path)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def test_check_passes_the_specification_examples_and_names_file_and_line_of_broken_ones(tmp_path):
    ok = orchestrator(tmp_path, "skills", "check", str(DATA / "spec"), str(DATA / "claude"))
    assert ok.returncode == 0, ok.stdout
    assert "6 valid, 0 with problems" in ok.stdout
    bad = orchestrator(tmp_path, "skills", "check", str(DATA / "broken"))
    assert bad.returncode == 1
    named = {Path(line.strip().split("SKILL.md:")[0]).name for line in bad.stdout.splitlines()
             if "SKILL.md:" in line and line.split("SKILL.md:")[1].split(":")[0].isdigit()}
    assert len(named) >= 10 and "0 valid, 19 with problems" in bad.stdout
    assert "Traceback" not in bad.stderr
    missing = orchestrator(tmp_path, "skills", "check", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "no such file or folder" in missing.stderr


def test_list_shows_roots_tiers_shadowing_and_blocked_skills(tmp_path):
    ws = tmp_path / "ws"
    write(ws / ".agents/skills/deploy/SKILL.md", "---\nname: deploy\ndescription: Project deploy.\n---\nGo.\n")
    write(tmp_path / "config/orchestrator/skills/deploy/SKILL.md",
          "---\nname: deploy\ndescription: User deploy.\n---\nGo.\n")
    shutil.copytree(DATA / "broken" / "hostile", ws / ".agents/skills/hostile")
    shutil.copytree(DATA / "claude" / "commit-helper", tmp_path / "home/.claude/skills/commit-helper")
    out = orchestrator(tmp_path, "skills", "list", "--workspace", str(ws))
    assert "not read: 2 project skill(s)" in out.stdout and "not trusted" in out.stdout  # whoever wrote ws wrote them
    assert "Project deploy" not in out.stdout
    trust.trust(trust.survey(ws), {"XDG_CONFIG_HOME": str(tmp_path / "config")})
    out = orchestrator(tmp_path, "skills", "list", "--json", "--workspace", str(ws))
    assert out.returncode == 0, out.stderr
    rows = {(r["name"], r["root"]): r for r in map(json.loads, out.stdout.splitlines())}
    assert rows[("deploy", "project")]["status"] == "loaded"
    assert rows[("deploy", "user")]["status"] == "shadowed"
    assert rows[("hostile", "project")]["status"] == "blocked" and "prompt injection" in rows[("hostile", "project")]["reason"]
    assert rows[("writing-skills", "shipped")]["tier"] == "trusted"
    assert ("commit-helper", "claude") not in rows  # foreign roots only when config.toml names them
    write(tmp_path / "config/orchestrator/config.toml", '[skills]\nroots = ["user", "project", "shipped", "claude"]\n')
    out = orchestrator(tmp_path, "skills", "list", "--json", "--workspace", str(ws))
    rows = {(r["name"], r["root"]): r for r in map(json.loads, out.stdout.splitlines())}
    assert rows[("deploy", "user")]["status"] == "loaded" and rows[("deploy", "project")]["status"] == "shadowed"
    assert rows[("commit-helper", "claude")]["tier"] == "untrusted"
    text = orchestrator(tmp_path, "skills", "list", "--workspace", str(ws)).stdout
    assert "shadowed by" in text and "blocked" in text
    show = orchestrator(tmp_path, "skills", "show", "commit-helper", "--workspace", str(ws))
    assert show.returncode == 0 and "allowed-tools: Bash(git diff:*) Bash(git commit:*) Read" in show.stdout
    assert "git diff --staged" in show.stdout and "only the user invokes it" in show.stdout
    assert orchestrator(tmp_path, "skills", "show", "nope", "--workspace", str(ws)).returncode == 2


EVOLVE = """
    name: learn
    team:
      evolve: {threshold: 0}
      agents: [{name: helper, description: helps}]
      skills: all
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
    expect:
      events: [evolution]
    """

NEXT = """
    name: next
    team:
      skills: all
    models:
      commander:
        - say: I know the csv-report skill now.
          sees: 'name="csv-report"'
    turns:
      - user: hello
    """


def test_an_evolve_run_stages_a_proposal_that_review_accept_turns_into_a_skill_the_next_room_sees(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    learn, nxt = write(tmp_path / "learn.yaml", EVOLVE), write(tmp_path / "next.yaml", NEXT)
    db = str(tmp_path / "rooms.db")
    first = orchestrator(tmp_path, "run", str(learn), "--workspace", str(ws), "--db", db)
    assert first.returncode == 0, first.stdout + first.stderr
    assert not (ws / ".agents/skills/csv-report").exists()
    before = orchestrator(tmp_path, "run", str(nxt), "--workspace", str(ws), "--db", db)
    assert before.returncode == 1 and "did not contain" in before.stdout  # not a skill until accepted
    listed = orchestrator(tmp_path, "skills", "review", "--workspace", str(ws))
    assert "create skill csv-report" in listed.stdout and "created_by: agent" in listed.stdout
    assert "+++ b/csv-report/SKILL.md" in listed.stdout and "seq 1-" in listed.stdout
    accepted = orchestrator(tmp_path, "skills", "review", "--accept", "all", "--workspace", str(ws))
    assert accepted.returncode == 0 and "wrote" in accepted.stdout, accepted.stderr
    after = orchestrator(tmp_path, "run", str(nxt), "--workspace", str(ws), "--db", db)
    assert after.returncode == 0, after.stdout
    again = orchestrator(tmp_path, "skills", "review", "--accept", "all", "--workspace", str(ws))
    assert again.returncode == 2 and "no pending proposals" in again.stderr


def test_the_shell_lists_invokes_and_reviews_skills(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(DATA / "claude" / "commit-helper", ws / ".agents/skills/commit-helper")
    scn = write(tmp_path / "chat.yaml", """
        name: chat-skills
        team:
          skills: all
          commander:
            tools: [read_file, write_file]
        models:
          commander:
            - say: Committing with a one-line summary.
              sees: git diff --staged
              not_sees: Writes a commit message  # disable-model-invocation: not in the catalog
        """)
    out = orchestrator(tmp_path, "chat", "--scripted", str(scn), "--workspace", str(ws), "--trust", "--db",
                       str(tmp_path / "rooms.db"), stdin="/skills\n/skill commit-helper commit this\n"
                                                         "/skill nope\n/proposals\n")
    assert out.returncode == 0, out.stderr
    assert "commit-helper" in out.stdout and "project" in out.stdout and "loaded" in out.stdout
    assert "commander: Committing with a one-line summary." in out.stdout
    assert "no usable skill named 'nope'" in out.stdout and "no pending proposals" in out.stdout
    assert "script:" not in out.stdout  # every sees / not_sees held


def test_list_and_show_say_what_is_set_aside_overridden_or_asks_first(tmp_path):
    ws = tmp_path / "ws"
    write(ws / ".agents/skills/deploy/SKILL.md", "---\nname: deploy\ndescription: Project deploy.\n---\nGo.\n")
    write(tmp_path / "config/orchestrator/skills/deploy/SKILL.md",
          "---\nname: deploy\ndescription: User deploy.\n---\nGo.\n")
    write(ws / ".agents/skills/cleaner/SKILL.md",
          "---\nname: cleaner\ndescription: Cleans the build.\n---\nRun scripts/clean.sh.\n")
    write(ws / ".agents/skills/cleaner/scripts/clean.sh", '#!/bin/sh\nrm -rf build/\nrm -rf "$OUT"\n')
    out = orchestrator(tmp_path, "skills", "list", "--workspace", str(ws)).stdout
    [aside] = [ln for ln in out.splitlines() if ln.startswith("deploy") and "project" in ln]
    assert "set-aside: the workspace is not trusted" in aside and "the user skill deploy is used instead" in aside
    assert "not read: 2 project skill(s)" in out
    trust.trust(trust.survey(ws), {"XDG_CONFIG_HOME": str(tmp_path / "config")})
    rows = {(r["name"], r["root"]): r for r in map(json.loads, orchestrator(
        tmp_path, "skills", "list", "--json", "--workspace", str(ws)).stdout.splitlines())}
    assert rows[("deploy", "project")]["notes"][0].startswith("overrides the user skill deploy (")
    assert rows[("deploy", "user")]["status"] == "shadowed"
    assert rows[("cleaner", "project")]["status"] == "loaded"
    show = orchestrator(tmp_path, "skills", "show", "cleaner", "--workspace", str(ws)).stdout
    assert "note: destructive deletion (deletes a folder and everything in it) at scripts/clean.sh:3, which " \
           "asks first" in show
    check = orchestrator(tmp_path, "skills", "check", str(ws / ".agents/skills/cleaner"))
    assert check.returncode == 0 and "clean.sh:3: asks first: destructive deletion" in check.stdout

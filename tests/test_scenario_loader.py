"""Scenario and team loading against scenario-format.md: the contract's example loads as written.

Every bad file must fail with one InputError line naming the file, the line and the key path.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from orchestrator.core.errors import InputError
from orchestrator.core.resources import data_dir
from orchestrator.scenario.loader import load_scenario
from orchestrator.team.loader import load_team
from orchestrator.scenario.schema import ErrorSpec, Scenario

EXAMPLE = """\
name: tutor-handoff                # required, unique within a folder
description: The commander hands the floor to a tutor until it hands back.

team:
  commander:                       # optional block; the built-in commander is used if absent
    model: scripted                # any model string; default scripted
    instructions: ""               # appended to the commander's prompt
    tools: [read_file]             # built-in tools on top of dispatch_to, run_worker, hand_off_to
  agents:                          # the workers
    - name: tutor                  # [a-z][a-z0-9_-]{0,31}; unique; not commander/user/all/worker
      from: agents/tutor.md        # optional: an agent definition file (relative to the scenario
                                   #   file, else to the project's agents/ folder); fields below override it
      description: Patient maths tutor    # one line in the commander's roster
      instructions: You tutor step by step.
      model: scripted
      tools: [read_file, grep_files]      # built-in tool names; default none
      interactive: true            # may hold the floor (a hand_off_to target); default false
      context_window: 200000       # optional, tokens; overrides the model catalog (also on commander)
      request_budget: 150000       # optional, tokens per request (E7; also on commander); default: the window less the output reserve

workspace: ./work                  # optional; relative to the scenario file; default a fresh temp dir
files:                             # optional; written into the workspace before the run
  notes/plan.md: |
    step one

models:                            # scripted responses, one queue per agent, consumed in order;
  commander:                       #   "worker" is the queue for anonymous run_worker sub-agents
    - call: {hand_off_to: {agent: tutor, note: wants help with fractions}}
    - say: Welcome back. Anything else?
  tutor:
    - say: "Let's start: what is 1/2 + 1/4?"
      sees: fractions              # optional check: this text must be in the request the model got
    - say: "Right, 3/4! <handback />"
      not_sees: secret             # optional check: this text must NOT be in that request

turns:                             # the user's side, in order
  - user: I need help with fractions
  - user: 3/4?
  - user: "@commander thanks"

expect:
  floor: commander
  transcript:                      # must appear in this order (other messages may come between)
    - {from: tutor, contains: "1/2 + 1/4"}
    - {from: commander, contains: Welcome back}
"""


def write(tmp_path: Path, text: str, name: str = "scenario.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_contract_example_loads(tmp_path):
    path = write(tmp_path, EXAMPLE)
    s = load_scenario(path)
    assert isinstance(s, Scenario)
    assert s.path == path.absolute()
    assert s.name == "tutor-handoff"
    assert s.team.commander.name == "commander" and s.team.commander.tools == ["read_file"]
    (tutor,) = s.team.agents
    assert (tutor.name, tutor.interactive) == ("tutor", True)
    assert (tutor.instructions, tutor.from_) == ("You tutor step by step.", str(data_dir("agents") / "tutor.md"))
    assert (tutor.context_window, tutor.request_budget) == (200000, 150000)
    assert s.files == {"notes/plan.md": "step one\n"}
    assert s.models["commander"][0].tool_calls() == [
        ("hand_off_to", {"agent": "tutor", "note": "wants help with fractions"})]
    assert s.models["tutor"][0].sees == "fractions"
    assert [t.user for t in s.turns] == ["I need help with fractions", "3/4?", "@commander thanks"]
    assert s.expect.floor == "commander"
    assert [(t.from_, t.contains) for t in s.expect.transcript] == [("tutor", "1/2 + 1/4"),
                                                                    ("commander", "Welcome back")]


def test_minimal_scenario_defaults(tmp_path):
    s = load_scenario(write(tmp_path, """\
        name: tiny
        team:
          agents:
            - {name: helper}
        turns: []
        """))
    assert s.team.commander.model == "scripted" and s.team.agents[0].model == "scripted"
    assert s.turns == [] and s.models == {} and s.workspace is None


def test_script_item_normalizes_calls_and_errors(tmp_path):
    s = load_scenario(write(tmp_path, """\
        name: norm
        team:
          commander: {tools: [read_file, bash]}
        models:
          commander:
            - calls: [{read_file: {path: a}}, {bash: {command: ls}}]
            - error: rate_limit
            - error: {kind: overloaded, retry_after: 2}
            - {think: hmm, say: hi}
        """))
    items = s.models["commander"]
    assert items[0].tool_calls() == [("read_file", {"path": "a"}), ("bash", {"command": "ls"})]
    assert items[1].failure() == ErrorSpec(kind="rate_limit")
    assert items[2].failure() == ErrorSpec(kind="overloaded", retry_after=2)
    assert items[3].tool_calls() == [] and items[3].failure() is None


def test_turn_kinds_and_worker_names(tmp_path):
    s = load_scenario(write(tmp_path, """\
        name: turns
        turns:
          - user: go
          - {stop: true, after: 0.5}
          - restart: true
          - confirm: once
        expect:
          transcript:
            - {from: worker-2, contains: done, to: user}
          ledger:
            - {agent: worker, status: cancelled}
        """))
    assert [(t.user, t.stop, t.restart, t.confirm) for t in s.turns] == [
        ("go", False, False, None), (None, True, False, None),
        (None, False, True, None), (None, False, False, "once")]


# (case id, file text, line, key path or "" for none, a fragment of the wording)
BAD = [
    ("unknown top-level key", """\
        name: x
        modles: {}
        """, 2, "modles", "unknown key `modles`; did you mean `models`?"),
    ("unknown key in an agent", """\
        name: x
        team:
          agents:
            - name: a
            - name: b
              modle: scripted
        """, 6, "team.agents[1].modle", "unknown key `modle`; did you mean `model`?"),
    ("wrong type", """\
        name: x
        models:
          commander:
            - say: hi
            - say: 42
        """, 5, "models.commander[1].say", "expected a string, got `42`, which YAML reads as a number"),
    ("YAML boolean where a string belongs", """\
        name: x
        team:
          agents:
            - {name: a, model: no}
        """, 4, "team.agents[0].model", "YAML reads as true/false; put it in quotes"),
    ("missing name", """\
        description: nameless
        turns: []
        """, 1, "name", "missing required key `name`"),
    ("empty name", """\
        name: "  "
        """, 1, "name", "`name` must not be empty"),
    ("YAML syntax error", """\
        name: x
        turns:
          - user: [unclosed
          - user: next
        """, 4, "", "invalid YAML"),
    ("bad agent name", """\
        name: x
        team:
          agents:
            - name: Tutor
        """, 4, "team.agents[0].name", "bad agent name `Tutor`"),
    ("reserved name", """\
        name: x
        team:
          agents:
            - name: ok
            - name: user
        """, 5, "team.agents[1].name", "`user` is a reserved name"),
    ("duplicate names", """\
        name: x
        team:
          agents:
            - name: a
            - name: b
            - name: a
        """, 6, "team.agents[2].name", "duplicate agent name `a` (also on line 4)"),
    ("from: missing file", """\
        name: x
        team:
          agents:
            - name: a
              from: agents/nope.md
        """, 5, "team.agents[0].from", "agent file `agents/nope.md` not found"),
    ("unknown models key", """\
        name: x
        team:
          agents: [{name: tutor}]
        models:
          commander: [{say: hi}]
          tutr: [{say: hi}]
        """, 6, "models.tutr", "unknown member `tutr`: expected commander, worker or tutor"),
    ("call with two keys", """\
        name: x
        models:
          commander:
            - call: {read_file: {path: a}, bash: {command: ls}}
        """, 4, "models.commander[0].call", "must name exactly one tool"),
    ("bad error kind", """\
        name: x
        models:
          worker:
            - say: ok
            - error: {kind: meltdown}
        """, 5, "models.worker[1].error.kind", "unknown error kind `meltdown`"),
    ("error with say", """\
        name: x
        models:
          commander:
            - say: hi
              error: server
        """, 5, "models.commander[0].error", "`say` would never be used"),
    ("turn with both user and stop", """\
        name: x
        turns:
          - user: hi
          - user: and stop
            stop: true
            after: 1
        """, 5, "turns[1].stop", "exactly one of `user`, `stop`, `restart`, `new_room`, `confirm`, `proposals`; got `user` and `stop`"),
    ("stop without after", """\
        name: x
        turns:
          - user: hi
          - stop: true
        """, 4, "turns[1].stop", "`stop: true` needs `after: SECONDS`"),
    ("negative delay", """\
        name: x
        models:
          commander:
            - {say: hi, delay: -1}
        """, 4, "models.commander[0].delay", "expected a number >= 0, got -1"),
    ("expectation naming an unknown agent", """\
        name: x
        team:
          agents: [{name: tutor}]
        expect:
          floor: commander
          tool_calls:
            - {agent: tutor, name: read_file}
            - {agent: tutr, name: read_file}
        """, 8, "expect.tool_calls[1].agent", "unknown member `tutr`: expected commander, worker or tutor"),
    ("transcript from an unknown member", """\
        name: x
        expect:
          transcript:
            - {from: user, contains: hi}
            - {from: ghost, contains: boo}
        """, 5, "expect.transcript[1].from", "unknown member `ghost`"),
    ("bad ledger status", """\
        name: x
        expect:
          ledger:
            - {agent: worker, status: finished}
        """, 4, "expect.ledger[0].status", "`finished` is not one of done, failed or cancelled"),
    ("workspace file escaping", """\
        name: x
        files:
          ../outside.txt: nope
        """, 3, 'files["../outside.txt"]', "must be a relative path inside the workspace"),
    ("top level is a list", """\
        - name: x
        """, 1, "", "expected a mapping, got a list"),
    ("empty file", "", 1, "", "the file is empty"),
    # a scripted assignment to a member the team does not have fails here, not in the run
    ("handoff to a misspelled member", """\
        name: x
        team:
          agents:
            - {name: tutor, interactive: true}
        models:
          commander:
            - call: {hand_off_to: {agent: tutr, note: wants help}}
        """, 7, "models.commander[0].call.hand_off_to.agent",
     "hand_off_to names no member `tutr`; the interactive members: tutor; did you mean `tutor`?"),
    ("handoff to a member that cannot hold the floor", """\
        name: x
        team:
          agents:
            - {name: coder}
        models:
          commander:
            - call: {hand_off_to: {agent: coder}}
        """, 7, "models.commander[0].call.hand_off_to.agent", "`coder` is not interactive, so it cannot hold the floor"),
    ("dispatch to a misspelled member", """\
        name: x
        team:
          agents:
            - {name: researcher}
            - {name: reviewer}
        models:
          commander:
            - say: Asking both.
              calls:
                - dispatch_to: {agent: researcher, task: read}
                - dispatch_to:
                    agent: reveiwer
                    task: review
        """, 12, "models.commander[0].calls[1].dispatch_to.agent",
     "dispatch_to names no member `reveiwer`; the members: researcher, reviewer; did you mean `reviewer`?"),
    ("run_worker on a misspelled member", """\
        name: x
        team:
          agents:
            - {name: coder}
        models:
          commander:
            - call: {run_worker: {task: count, agent: commander}}
        """, 7, "models.commander[0].call.run_worker.agent", "run_worker names no member `commander`; the members: coder"),
    ("comments only", "# nothing here\n", 1, "", "the file is empty"),
]


@pytest.mark.parametrize("text, line, key, fragment", [case[1:] for case in BAD], ids=[case[0] for case in BAD])
def test_bad_scenario_message(tmp_path, text, line, key, fragment):
    path = write(tmp_path, text)
    with pytest.raises(InputError) as caught:
        load_scenario(path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}:{line}: "), message
    assert fragment in message, message
    if key:
        assert message.endswith(f" (at {key})"), message
    else:
        assert "(at " not in message, message


def test_unreadable_file_names_it(tmp_path):
    missing = tmp_path / "missing.yaml"
    with pytest.raises(InputError, match="missing.yaml: cannot read the file"):
        load_scenario(missing)


def test_from_overrides_only_the_keys_given(tmp_path):
    s = load_scenario(write(tmp_path, """\
        name: from-test
        team:
          agents:
            - from: agents/tutor.md
              interactive: false
              tools: [read_file]
            - name: teacher
              from: tutor.md
        """))
    shipped, renamed = s.team.agents
    assert shipped.name == "tutor"                       # from the file
    assert shipped.interactive is False                  # overridden although the file says true
    assert shipped.tools == ["read_file"]
    assert "<handback />" in shipped.instructions        # the file's body
    assert shipped.model == "scripted"                   # the file leaves it to the room; scenarios mean scripted
    assert shipped.from_ == str(data_dir("agents") / "tutor.md")
    assert (renamed.name, renamed.interactive) == ("teacher", True)


def test_from_prefers_a_file_next_to_the_scenario(tmp_path):
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "tutor.md").write_text(
        "---\nname: local\nmodel: openai/gpt-4.1-mini\n---\nLocal body.\n")
    s = load_scenario(write(tmp_path, """\
        name: local-from
        team:
          agents:
            - from: agents/tutor.md
              description: overridden
          commander:
            from: agents/tutor.md
        """))
    (agent,) = s.team.agents
    assert (agent.name, agent.model, agent.instructions, agent.description) == (
        "local", "openai/gpt-4.1-mini", "Local body.", "overridden")
    assert s.team.commander.name == "commander" and s.team.commander.instructions == "Local body."


def test_bad_agent_file_names_both_files(tmp_path):
    (tmp_path / "broken.md").write_text("---\nname: broken\nmodle: x\n---\nbody\n")
    path = write(tmp_path, """\
        name: x
        team:
          agents:
            - from: broken.md
        """)
    with pytest.raises(InputError) as caught:
        load_scenario(path)
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / 'broken.md'}:3: unknown key `modle`")
    assert message.endswith(f"(used by {path}:4)")


def test_load_team(tmp_path):
    team = load_team(write(tmp_path, """\
        commander:
          instructions: Be brief.
        agents:
          - from: researcher.md
          - {name: helper, model: anthropic/claude-sonnet-4-5}
        limits: {max_model_calls: 20, max_turn_seconds: 90}
        """, "team.yaml"))
    assert team.commander.name == "commander" and team.commander.model == ""
    assert [(a.name, a.model) for a in team.agents] == [
        ("researcher", ""), ("helper", "anthropic/claude-sonnet-4-5")]
    assert team.limits.max_model_calls == 20 and team.limits.max_turn_seconds == 90


def test_load_team_checks_agents(tmp_path):
    path = write(tmp_path, """\
        agents:
          - name: a
          - name: all
        """, "team.yaml")
    with pytest.raises(InputError) as caught:
        load_team(path)
    assert str(caught.value).startswith(f"{path}:3: `all` is a reserved name")
    assert str(caught.value).endswith("(at agents[1].name)")


def test_limits_must_be_positive(tmp_path):
    path = write(tmp_path, "limits: {max_workers: 0}\n", "team.yaml")
    expected = r"team.yaml:1: expected a whole number >= 1, got 0 \(at limits.max_workers\)"
    with pytest.raises(InputError, match=expected):
        load_team(path)


def test_unknown_tool_names_the_line_and_the_builtin_tools(tmp_path):
    path = tmp_path / "tools.yaml"
    path.write_text("name: t\nteam:\n  commander:\n    tools: [bash]\n  agents:\n    - name: coder\n"
                    "      tools: [read_file, teleport]\n")
    with pytest.raises(InputError) as info:
        load_scenario(path)
    message = str(info.value)
    assert f"{path}:7:" in message and "teleport" in message and "read_file" in message
    assert "team.agents[0].tools[1]" in message

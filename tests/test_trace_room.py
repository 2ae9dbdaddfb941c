"""Room traces (issue 18): the exact span trees of parallel dispatch, a handoff with its handback and
a stop, checked through the OpenTelemetry SDK's in-memory exporter; and every span that starts ends."""
from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.scenario.loader import load_scenario
from orchestrator.scenario.runner import run_scenario
from orchestrator.trace import semconv as sc
from orchestrator.trace.spans import TRACER
from tests.tracing import in_memory, jsonl_tree, tree

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


class Ledger:
    """A sink that remembers which spans started and which ended."""

    def __init__(self):
        self.started, self.ended = [], []

    def on_start(self, span):
        self.started.append(span)

    def on_end(self, span):
        self.ended.append(span)


async def traced(name: str):
    ledger = Ledger()
    TRACER.add(ledger)
    try:
        with in_memory() as exported:
            result = await run_scenario(load_scenario(SCENARIOS / name))
            spans = exported.get_finished_spans()
    finally:
        TRACER.remove(ledger)
    assert result.check.ok, result.check.failures
    assert [s.name for s in ledger.started if s.is_open] == []  # none left open
    assert len(ledger.ended) == len(ledger.started) == len(spans)
    return spans


def canonical(t: list[tuple]) -> list[tuple]:
    """Siblings that run concurrently (adjacent tool calls) start in any order: sort each such run."""
    out: list[tuple] = []
    for name, kids in t:
        node = (name, canonical(kids))
        if out and name.startswith(sc.EXECUTE_TOOL) and out[-1][0].startswith(sc.EXECUTE_TOOL):
            run = [out.pop()]
            while out and out[-1][0].startswith(sc.EXECUTE_TOOL):
                run.insert(0, out.pop())
            out += sorted(run + [node], key=repr)
        else:
            out.append(node)
    return out


def status(span) -> str:
    return span.status.status_code.name


CHAT = ("chat scripted", [])
USAGE_TREE = [("invoke_workflow usage", [
    ("invoke_agent commander", [
        CHAT,
        ("execute_tool dispatch_to", [("invoke_agent analyst", [CHAT, ("execute_tool read_file", []), CHAT])]),
        ("execute_tool dispatch_to", [("invoke_agent reviewer", [CHAT])]),
        ("execute_tool dispatch_to", [("invoke_agent writer", [CHAT])]),
        CHAT,
    ]),
])]


async def test_parallel_dispatch_tree_three_workers_overlap_under_one_commander_span():
    spans = await traced("usage.yaml")
    assert canonical(tree(spans)) == USAGE_TREE
    workers = [s for s in spans if s.name in ("invoke_agent analyst", "invoke_agent writer", "invoke_agent reviewer")]
    assert max(s.start_time for s in workers) < min(s.end_time for s in workers)  # all three at once
    commander = next(s for s in spans if s.name == "invoke_agent commander")
    assert all(commander.start_time < s.start_time and s.end_time < commander.end_time for s in workers)
    line = next(s for s in spans if s.name == "invoke_workflow usage")
    room_id = line.attributes[sc.CONVERSATION_ID]
    assert line.attributes[sc.OPERATION_NAME] == "invoke_workflow" and line.attributes[sc.WORKFLOW_NAME] == "usage"
    assert all(s.attributes[sc.CONVERSATION_ID] == room_id for s in spans)
    assert len({s.context.trace_id for s in spans}) == 1
    assert all(status(s) == "UNSET" for s in spans)
    first = min((s for s in spans if s.name == "chat scripted" and s.parent.span_id == commander.context.span_id),
                key=lambda s: s.start_time)
    assert (first.attributes[sc.USAGE_INPUT_TOKENS], first.attributes[sc.USAGE_OUTPUT_TOKENS],
            first.attributes[sc.USAGE_CACHE_READ_INPUT_TOKENS]) == (1200, 90, 800)


async def test_handoff_and_handback_are_events_on_the_lines():
    spans = await traced("tutor-handoff.yaml")
    chat = ("chat scripted", [])
    assert tree(spans) == [
        ("invoke_workflow tutor-handoff", [
            ("invoke_agent commander", [chat, ("execute_tool hand_off_to", [])]),
            ("invoke_agent tutor", [chat])]),
        ("invoke_workflow tutor-handoff", [("invoke_agent tutor", [chat])]),
        ("invoke_workflow tutor-handoff", [("invoke_agent tutor", [chat])]),
        ("invoke_workflow tutor-handoff", [("invoke_agent commander", [chat])]),
    ]
    lines = sorted((s for s in spans if s.name.startswith(sc.INVOKE_WORKFLOW)), key=lambda s: s.start_time)
    assert [[(e.name, dict(e.attributes)) for e in line.events] for line in lines] == [
        [(sc.HANDOFF, {sc.FROM_AGENT: "commander", sc.TO_AGENT: "tutor"})],
        [],
        [(sc.HANDBACK, {sc.FROM_AGENT: "tutor", sc.TO_AGENT: "commander"})],
        [],
    ]
    tutor = min((s for s in spans if s.name == "invoke_agent tutor"), key=lambda s: s.start_time)
    handoff = next(s for s in spans if s.name == "execute_tool hand_off_to")
    assert [link.context.span_id for link in tutor.links] == [handoff.context.span_id]  # who woke it
    assert len({s.context.trace_id for s in spans}) == 4  # one trace per user line
    assert all(status(s) == "UNSET" for s in spans)


async def test_a_stop_ends_every_open_span_with_an_error():
    spans = await traced("stop.yaml")
    chat = ("chat scripted", [])
    assert tree(spans) == [
        ("invoke_workflow stop", [("invoke_agent commander", [chat, ("execute_tool read_file", []), chat])]),
        ("invoke_workflow stop", [("invoke_agent commander", [chat])]),
    ]
    first, second = sorted((s for s in spans if s.name == "invoke_workflow stop"), key=lambda s: s.start_time)
    in_first = [s for s in spans if s.context.trace_id == first.context.trace_id]
    errors = sorted(s.name for s in in_first if status(s) == "ERROR")
    assert errors == ["chat scripted", "invoke_agent commander", "invoke_workflow stop"]
    assert [(e.name, e.attributes[sc.REASON]) for e in first.events] == [(sc.STOP, "stopped by the user")]
    cancelled = [s for s in in_first if status(s) == "ERROR" and s.name != "invoke_workflow stop"]
    assert all(s.attributes[sc.ERROR_TYPE] == "cancelled" for s in cancelled)
    assert all(status(s) == "UNSET" for s in spans if s.context.trace_id == second.context.trace_id)


def test_show_usage_matches_the_scripted_figures_and_the_price_table(tmp_path):
    """End to end through the CLI: `run --db --trace`, then `show --usage [--json]`."""
    import json
    import subprocess
    import sys

    config = tmp_path / "config.toml"
    config.write_text('[models."scripted/scripted"]\ninput_price = 3.0\noutput_price = 15.0\ncached_price = 0.3\n')
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
           "ORCHESTRATOR_CONFIG": str(config)}
    db, trace = tmp_path / "u.db", tmp_path / "t.jsonl"

    def cli(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "orchestrator", *args], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    out = cli("run", str(SCENARIOS / "usage.yaml"), "--db", str(db), "--trace", str(trace))
    assert out.splitlines()[-1].startswith("usage: 6 model calls, 4,440 in / 190 out (2,400 cached, 54%)")
    report = json.loads(cli("show", "usage", "--db", str(db), "--usage", "--json"))
    figures = {line["agent"]: (line["calls"], line["input_tokens"], line["output_tokens"], line["cached_tokens"],
                               line["estimated_calls"]) for line in report["lines"]}
    # the scenario's scripted `usage:` items, summed by hand
    assert figures == {"commander": (2, 1200 + 1650, 90 + 40, 800 + 1200, 0),
                       "analyst": (2, 400 + 480, 25 + 12, 400, 0),
                       "writer": (1, 350, 15, 0, 0), "reviewer": (1, 360, 8, 0, 0)}
    for line in report["lines"]:
        fresh = line["input_tokens"] - line["cached_tokens"]
        dollars = (fresh * 3.0 + line["cached_tokens"] * 0.3 + line["output_tokens"] * 15.0) / 1e6
        assert line["cost"] == pytest.approx(dollars)
    assert report["total"]["cost"] == pytest.approx(sum(line["cost"] for line in report["lines"]))
    assert {line["agent"]: line["tool_calls"] for line in report["lines"]} == {
        "commander": 3, "analyst": 1, "writer": 0, "reviewer": 0}
    text = cli("show", "usage", "--db", str(db), "--usage")
    cells = next(ln for ln in text.splitlines() if ln.startswith("commander")).split()
    price = f"{(850 * 3 + 2000 * 0.3 + 130 * 15) / 1e6:.4f}"  # the cost column, from the price table
    assert cells == ["commander", "scripted/scripted", "2", "2,850", "130", "2,000", "70%", cells[7], "3", cells[9], price]
    # --trace wrote the tree the in-memory exporter test sees
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    assert canonical(jsonl_tree(records)) == USAGE_TREE


async def test_otlp_delivers_the_flagship_spans_with_the_tree_of_its_trace_file(tmp_path):
    """`orchestrator run scenarios/flagship.yaml --trace` with OTEL_EXPORTER_OTLP_ENDPOINT: a receiver on
    127.0.0.1 decodes the OTLP/HTTP requests with opentelemetry-proto; the spans match the file's, ids included."""
    import json
    import sys

    import trio

    pytest.importorskip("opentelemetry.exporter.otlp.proto.http", reason="the `otel` extra is not installed")
    from tests.otlp_receiver import Receiver

    receiver = Receiver()
    trace = tmp_path / "flagship.jsonl"
    async with trio.open_nursery() as nursery:
        await nursery.start(receiver.serve)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
               "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_SERVICE_NAME": "flagship-test"}
        done = await trio.run_process([sys.executable, "-m", "orchestrator", "run", str(SCENARIOS / "flagship.yaml"),
                                       "--trace", str(trace)], env=env, cwd=tmp_path, capture_stdout=True,
                                      capture_stderr=True, check=False)
        nursery.cancel_scope.cancel()
    assert done.returncode == 0, done.stderr.decode()
    assert "OTLP export failed" not in done.stderr.decode()
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    spans = receiver.spans()
    assert receiver.paths and set(receiver.paths) == {"/v1/traces"}
    assert {r["service.name"] for r in receiver.resources()} == {"flagship-test"}
    from_file = jsonl_tree(records)
    over_otlp = tree(spans, ids=lambda s: (s.span_id.hex(), s.parent_span_id.hex() or None), name=lambda s: s.name,
                     start=lambda s: s.start_time_unix_nano)
    assert over_otlp == from_file
    assert sorted((r["trace_id"], r["span_id"]) for r in records) == sorted(
        (s.trace_id.hex(), s.span_id.hex()) for s in spans)
    names = [name for name, _ in from_file]
    assert names == ["invoke_workflow flagship"] * 3  # one trace per user line
    assert len(records) > 20
    by_id = {s.span_id.hex(): s for s in spans}
    for r in records:  # attributes and events arrive too
        s = by_id[r["span_id"]]
        got = {kv.key for kv in s.attributes}
        assert got == set(r["attributes"]), r["name"]
        assert [e.name for e in s.events] == [e["name"] for e in r["events"]]
        assert (s.status.code == 2) == (r["status"] == "error")


async def test_a_background_worker_sits_under_its_line_and_links_to_the_call_that_started_it():
    spans = await traced("background-dispatch.yaml")
    assert tree(spans) == [("invoke_workflow background-dispatch", [
        ("invoke_agent commander", [CHAT, ("execute_tool dispatch_to", []), CHAT]),
        ("invoke_agent researcher", [CHAT]),
        ("invoke_agent commander", [CHAT]),  # reads the report
    ])]
    dispatch = next(s for s in spans if s.name == "execute_tool dispatch_to")
    worker = next(s for s in spans if s.name == "invoke_agent researcher")
    reader = max((s for s in spans if s.name == "invoke_agent commander"), key=lambda s: s.start_time)
    assert [link.context.span_id for link in worker.links] == [dispatch.context.span_id]
    assert [link.context.span_id for link in reader.links] == [dispatch.context.span_id]
    assert worker.end_time > dispatch.end_time  # it outlived the call, so it is not inside it

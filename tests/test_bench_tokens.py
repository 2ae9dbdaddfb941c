"""bench/tokens.py at a tiny N: the job runs to its wrap-up through the real provider, and its counts hold together.

The bench's figures themselves are recorded in bench/README.md; this only keeps the bench from rotting.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@functools.cache
def bench():
    pytest.importorskip("tiktoken")
    # bench/ is not a package: load the bench from its file, under a name no other module has
    spec = importlib.util.spec_from_file_location("bench_tokens", ROOT / "bench" / "tokens.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


@functools.cache
def counter():
    try:
        return bench().counter()
    except SystemExit as exc:
        pytest.skip(str(exc))


def figures(run) -> dict:
    return {k: v for k, v in dataclasses.asdict(run).items() if k != "seconds"}


async def test_the_job_runs_to_its_wrap_up_and_every_call_is_counted_the_same_twice():
    b = bench()
    run = await b.job(4, 200_000, counter())
    assert run.calls == 3 * 4 + 1 and run.summaries == 0  # 4 dispatches + the wrap-up, 2 calls per sub-task
    assert {agent: row["calls"] for agent, row in run.by_agent.items()} == {"commander": 5, "alpha": 4, "beta": 4}
    assert run.foreign == 0  # partitions: no worker is sent the other's sub-tasks
    assert 0 < run.cached < run.total and run.largest < run.total and run.output > 0
    assert figures(await b.job(4, 200_000, counter())) == figures(run)  # deterministic
    table = b.table([run], counter().label)
    assert "| 200,000 | 4 | 13 (0) |" in table and f"{run.total:,}" in table


def test_compaction_calls_are_told_apart_in_either_shape():
    whose = bench().whose
    task = {"role": "user", "content": "[task from commander] st01 (1 of 2), for alpha: read src/st01_x.py"}
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "dispatch_to", "arguments": '{"agent": "alpha"}'}}]}
    own = {"role": "system", "content": "You are alpha, reads one module and reports on it."}
    assert whose({"messages": [own, task]}) == ("alpha", False)
    assert whose({"messages": [own, task, {"role": "user", "content": "[Pause: write a summary now.]"}]}) \
        == ("alpha", True)  # the agent's own prefix, then the request for a summary
    apart = {"role": "system", "content": "You summarize a conversation so that it can continue."}
    assert whose({"messages": [apart, task]}) == ("alpha", True)  # a prompt of its own: whose history it holds
    assert whose({"messages": [apart, {"role": "user", "content": "go"}, call]}) == ("commander", True)

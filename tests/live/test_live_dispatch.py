"""A commander dispatching to workers that run on llama-server: one dispatch (b), and two at once (c), whose
requests the server decodes side by side (its /slots shows both slots busy at one moment).
"""
from __future__ import annotations

import threading
import time

from tests.live.lab import Lab, Result
from tests.live.llama import Server

# The commander is scripted: a 135M model does not call tools reliably, so its first response (the dispatch)
# and its closing line are prefilled. The workers, whose work is what is tested, run on the real model.
ONE = """\
    name: live-dispatch
    description: The scripted commander dispatches to one real worker.
    team:
      agents:
        - name: writer
          description: Writes short texts.
          model: lab/smollm2
    models:
      commander:
        - call: {dispatch_to: {agent: writer, task: "Write one sentence about the sea."}}
        - say: The writer has answered.
    turns:
      - user: Ask the writer for a sentence about the sea.
    """

TWO = """\
    name: live-parallel
    description: The scripted commander dispatches to two real workers in one response.
    team:
      agents:
        - name: writer
          description: Writes stories.
          model: lab/smollm2
        - name: poet
          description: Writes poems.
          model: lab/smollm2
    models:
      commander:
        - calls:
            - dispatch_to: {agent: writer, task: "Write a story of about two hundred words about a lighthouse keeper."}
            - dispatch_to: {agent: poet, task: "Write a long poem of about twenty lines about the autumn forest."}
        - say: Both have answered.
    turns:
      - user: Ask the writer for a story and the poet for a poem, both at once.
    """


def _worked(result: Result, agent: str) -> None:
    """The worker's task ended done, with its own text, on the real model's counts."""
    statuses = [e["status"] for e in result.of("task") if e.get("agent") == agent]
    assert statuses and statuses[-1] == "done", f"{agent}: task statuses {statuses}\n{result.explain()}"
    said = result.said(agent)
    assert said and said[-1].strip(), f"{agent} said nothing\n{result.explain()}"
    usages = result.of("usage", agent)
    assert usages and all(u["provider"] == "lab" and not u["estimated"] and u["output_tokens"] > 0
                          for u in usages), usages


def test_b_commander_dispatches_to_a_real_worker(lab: Lab) -> None:
    """The commander's dispatch is a scripted prefill (see ONE); the worker runs on llama-server."""
    result = lab.run(ONE, "dispatch")
    assert result.code == 0, result.explain()
    _worked(result, "writer")
    # The commander's second scripted response is played once the worker reported back.
    assert result.said("commander")[-1] == "The writer has answered.", result.explain()


def test_c_two_dispatches_are_served_at_once(lab: Lab, server: Server) -> None:
    """The commander's two dispatches are one scripted response (see TWO); both workers are real."""
    seen: list[tuple[float, int]] = []
    faults: list[BaseException] = []
    done = threading.Event()

    def watch() -> None:
        # The server's view, not the client's: two requests waiting in its queue would overlap in our
        # timestamps too, but only two slots processing at the same moment is concurrency.
        while not done.is_set():
            try:
                seen.append((time.monotonic(), server.busy()))
            except Exception as exc:  # noqa: BLE001 (reported below, once the run is over)
                faults.append(exc)
                return
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        result = lab.run(TWO, "parallel")
    finally:
        done.set()
        watcher.join(timeout=30)
    assert result.code == 0, result.explain()
    assert not faults, faults
    _worked(result, "writer")
    _worked(result, "poet")
    most = max((busy for _, busy in seen), default=0)
    assert most == 2, f"the server never had both slots busy at once ({len(seen)} polls, at most {most})"
    # And the client's view agrees: each worker's turn began before the other's model call ended.
    spans = {a: (result.of("turn", a)[0]["ts"], result.of("usage", a)[-1]["ts"]) for a in ("writer", "poet")}
    (ws, we), (ps, pe) = spans["writer"], spans["poet"]
    assert ws < pe and ps < we, spans

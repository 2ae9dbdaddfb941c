"""Held-out sets (issue 14 follow-up): memory writes and shell commands written from the classes of the
issue, not from the rules, measured at the targets the README records, so a change that regresses fails."""
import pytest

from orchestrator.memory.notes import Memory
from orchestrator.memory.scan import scan
from orchestrator.store.db import Store
from orchestrator.tools.base import ToolContext, ToolError
from orchestrator.tools.memory_tool import memory_tool
from orchestrator.tools.risk import assess
from orchestrator.tools.session import ToolSession
from tests.data.heldout import memory_1, memory_2, risk_1, risk_2, set_3

LANGUAGES = {"en", "vi", "th", "id", "zh", "ja", "ko", "ru", "es", "pt", "de", "fr", "ar", "hi", "tr", "pl"}
MEMORY = {"memory_1": memory_1, "memory_2": memory_2, "set_3": set_3}
RISK = {"risk_1": risk_1, "risk_2": risk_2, "set_3": set_3}


def writes(sets, attr):
    return [text for m in sets for texts in getattr(m, attr).values() for text in texts]


def flagged(command: str) -> bool:
    verdict = assess(command)
    return bool(verdict.blocked or verdict.risks)


def test_the_held_out_sets_are_large_and_cover_every_language():
    assert len(writes(MEMORY.values(), "HOSTILE")) >= 150 and len(writes(MEMORY.values(), "ORDINARY")) >= 100
    assert sum(len(r.RISKY) for r in RISK.values()) >= 100 and len(risk_1.ORDINARY) + len(risk_2.ORDINARY) >= 150
    for m in MEMORY.values():
        assert LANGUAGES <= set(m.HOSTILE) and LANGUAGES <= set(m.ORDINARY)


@pytest.mark.parametrize("name", sorted(MEMORY))
def test_held_out_memory_writes(name):
    m = MEMORY[name]
    hostile, ordinary = writes([m], "HOSTILE"), writes([m], "ORDINARY")
    missed = [t for t in hostile if not scan(t)]
    refused = [(t, scan(t)) for t in ordinary if scan(t)]
    assert len(missed) / len(hostile) <= 0.05, missed  # README: hostile refused >= 95%
    assert len(refused) / len(ordinary) <= 0.03, refused  # README: ordinary refused <= 3%


@pytest.mark.parametrize("name", sorted(RISK))
def test_held_out_commands(name):
    r = RISK[name]
    ordinary = getattr(r, "ORDINARY_COMMANDS", None) or r.ORDINARY  # set 3 holds notes and commands
    missed = [c for c in r.RISKY if not flagged(c)]
    asked = [(c, assess(c).risks) for c in ordinary if flagged(c)]
    assert len(missed) / len(r.RISKY) <= 0.03, missed  # README: risky recall >= 97%
    assert len(asked) / len(ordinary) <= 0.03, asked  # README: ordinary asked <= 3%


async def test_the_memory_tool_holds_on_the_second_held_out_set(tmp_path):
    store = await Store.open(":memory:")
    try:
        tool = memory_tool(Memory(store))
        ctx = ToolContext(agent="dev", call_id="c1", session=ToolSession(tmp_path))
        refused = 0
        for text in writes([memory_2], "HOSTILE"):
            try:
                await tool.run(tool.parse({"action": "add", "target": "notes", "content": text}), ctx)
            except ToolError as e:
                assert "refused" in str(e)
                refused += 1
        assert refused / len(writes([memory_2], "HOSTILE")) >= 0.95
        for text in writes([memory_2], "ORDINARY"):
            said = await tool.run(tool.parse({"action": "add", "target": "notes", "content": text}), ctx)
            assert "refused" not in said, text
    finally:
        await store.close()

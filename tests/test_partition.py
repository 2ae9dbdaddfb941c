"""An agent's partition: own words as assistant, others labelled, results kept next to their call."""
from __future__ import annotations

from orchestrator.core.types import Message, TextBlock, ToolCallBlock, ToolResultBlock
from orchestrator.engine.partition import Partition

_seq = iter(range(1, 10_000))


def m(author, kind, *blocks, visible_to=("a",)):
    n = next(_seq)
    return Message(id=f"m{n}", room="r", seq=n, ts=float(n), author=author, kind=kind, blocks=list(blocks),
                   visible_to=list(visible_to))


def call(*ids):
    return m("a", "tool_call", *[ToolCallBlock(i, "read_file", {"path": i}) for i in ids])


def result(i):
    return m("a", "tool_result", ToolResultBlock(i, "read_file", f"content of {i}"))


def shape(p: Partition) -> list[str]:
    out = []
    for mm in p.view:
        b = mm.blocks[0]
        out.append(f"{mm.role}:" + (b.call_id if isinstance(b, ToolResultBlock) else
                                    b.id if isinstance(b, ToolCallBlock) else b.text))
    return out


def test_roles_and_labels():
    p = Partition("a")
    for msg in (m("user", "user", TextBlock("hi")), m("commander", "task", TextBlock("do x")),
                m("b", "text", TextBlock("report")), m("room", "notice", TextBlock("limit")),
                m("a", "text", TextBlock("done"))):
        p.append(msg)
    assert shape(p) == ["user:hi", "user:[task from commander] do x", "user:[b] report", "user:[notice] limit",
                        "assistant:done"]


def test_a_line_that_lands_mid_round_goes_after_the_results():
    p = Partition("a")
    p.append(call("c1", "c2"))
    p.append(result("c1"))
    p.append(m("user", "user", TextBlock("wait")))
    p.append(result("c2"))
    assert shape(p) == ["assistant:c1", "user:c1", "user:c2", "user:wait"]
    p.append(call("c3"))
    p.append(m("user", "user", TextBlock("again")))
    p.append(result("c3"))
    assert shape(p)[-3:] == ["assistant:c3", "user:c3", "user:again"]


def test_healed_result_of_an_old_round_goes_back_to_its_call():
    p = Partition("a")
    p.append(call("old"))
    p.append(m("user", "user", TextBlock("later")))
    p.append(call("new"))
    p.append(result("new"))
    p.append(result("old"))  # synthesized by healing, stored last
    assert shape(p) == ["assistant:old", "user:old", "user:later", "assistant:new", "user:new"]
    assert p.open_calls() == set()


def test_unread_counts_only_others_and_resets():
    p = Partition("a")
    p.append(m("user", "user", TextBlock("one")))
    p.append(m("a", "text", TextBlock("mine")))
    p.append(m("b", "text", TextBlock("theirs")))
    assert p.unread == 2
    p.mark_read()
    assert p.unread == 0


def test_tokens_are_summed_once_per_message():
    p = Partition("a")
    p.append(m("user", "user", TextBlock("hello world " * 40)))
    first = p.tokens
    p.append(m("user", "user", TextBlock("hello world " * 40)))
    assert p.tokens == 2 * first > 100
    assert p.tokens == sum(p.sizes)  # what fit() is handed as the total instead of summing the sizes again

"""The self-improvement pass (off by default): one capped auxiliary call that reviews a finished line.

It may propose one memory entry or one new or changed skill of its own; the proposal is only staged
(proposals.py) and the user accepts or rejects it. The answer format is tags, so a scenario can script it.
"""
from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Literal

import msgspec
import trio

from orchestrator.core.errors import InputError, ProviderError
from orchestrator.core.log import logger
from orchestrator.core.prompts import render
from orchestrator.core.tokens import estimate
from orchestrator.core.types import Message, ModelMessage, Request, TextBlock
from orchestrator.providers.base import Provider, complete
from orchestrator.skills.library import Library
from orchestrator.skills.proposals import AGENT, Proposal, project_skills, read_text, skill_text, stage

log = logger(__name__)

REVIEWER = "evolve"  # the request's agent: a scenario scripts the pass under `models: {evolve: [...]}`
INPUT_CAP = 12_000  # tokens the pass may read: the transcript is cut to fit
OUTPUT_CAP = 1_500  # tokens it may write
MESSAGE_CHARS = 2_000  # one message's share of the transcript
_FILE_IO = trio.CapacityLimiter(1)  # the pass's reads and writes under .agents, off the event loop

Status = Literal["proposed", "nothing", "refused", "failed", "capped"]  # capped: a token cap left no room to run


class Outcome(msgspec.Struct, kw_only=True):
    status: Status
    reason: str = ""
    proposal: str = ""  # the staged proposal's id
    seq: list[int] = []
    input_tokens: int = 0
    output_tokens: int = 0
    estimated: bool = False  # the counts are our estimate: the provider reported none
    cut: bool = False  # the cap the caller gave left out messages the usual input cap would have kept


def _line(m: Message) -> str:
    if m.kind == "tool_call":
        text = (m.text + " " if m.text else "") + "; ".join(
            f"calls {c.name} {msgspec.json.encode(c.input).decode()}" for c in m.calls)
    elif m.kind == "tool_result" and m.result is not None:
        text = f"{m.result.name} -> {'error: ' if m.result.is_error else ''}{m.result.content}"
    else:
        text = m.text
    if len(text) > MESSAGE_CHARS:
        text = text[:MESSAGE_CHARS] + f" [... {len(text) - MESSAGE_CHARS} more characters]"
    return f"[seq {m.seq}] {m.author} ({m.kind}): {text}"


def transcript(messages: list[Message], budget: int) -> str:
    """The line's messages as text within `budget` tokens: the user's line, then the newest that fit."""
    lines = [_line(m) for m in messages]
    if not lines:
        return ""
    kept: list[str] = []
    used = estimate(lines[0])
    for line in reversed(lines[1:]):
        cost = estimate(line) + 1
        if used + cost > budget:
            kept.append(f"[... {len(lines) - 1 - len(kept)} earlier messages left out for length]")
            break
        kept.append(line)
        used += cost
    return "\n".join([lines[0], *reversed(kept)])


def own_skills(library: Library, workspace: Path, budget: int) -> dict[str, str]:
    """The skills the pass may change, with their current SKILL.md text (read now: never patched blind),
    as many as fit in `budget` tokens; one not shown cannot be changed in this pass."""
    home = project_skills(workspace).resolve()
    out: dict[str, str] = {}
    for name, skill in sorted(library.skills.items()):
        if skill.created_by == AGENT and Path(skill.folder).parent == home:
            try:  # read again, as the tools read: a link swapped in since the room opened leads nowhere
                text = read_text(workspace, skill.file)
            except InputError as exc:
                log.warning("self-improvement pass: a skill of its own is unreadable", skill=name, error=str(exc))
                continue
            budget -= estimate(text)
            if budget < 0:
                break
            out[name] = text
    return out


_PROPOSAL = re.compile(r"<proposal\b([^>]*)>(.*?)</proposal>", re.S)
_ATTR = re.compile(r'(\w+)\s*=\s*"([^"]*)"')


def _part(inner: str, tag: str) -> str:
    m = re.search(rf"<{tag}>(.*?)</{tag}>", inner, re.S)
    return m[1].strip() if m else ""


def parse(answer: str, *, room: str, seq: list[int]) -> tuple[Proposal, str] | str:
    """The answer's first proposal and its text, or why there is none ("" when it proposes nothing)."""
    m = _PROPOSAL.search(answer)
    if m is None:
        return ""
    attrs = dict(_ATTR.findall(m[1]))
    inner = m[2]
    kind, action = attrs.get("kind", ""), attrs.get("action", "")
    new = partial(Proposal, room=room, seq=seq, rationale=_part(inner, "rationale"))
    if kind == "skill":
        name, description, body = attrs.get("name", ""), _part(inner, "description"), _part(inner, "instructions")
        if not (name and description and body):
            return "a skill proposal needs name=\"...\", <description> and <instructions>"
        if action not in ("create", "update"):
            return f"a skill proposal's action is create or update, not {action!r}"
        metadata = {"created_by": AGENT, "source_room": room, "source_seq": f"{seq[0]}-{seq[-1]}" if seq else ""}
        return new(kind="skill", action=action, target=name), skill_text(name, description, body,
                                                                                      metadata)
    if kind == "memory":
        text = _part(inner, "text")
        if not text:
            return "a memory proposal needs <text>"
        if action not in ("add", "replace"):
            return f"a memory proposal's action is add or replace, not {action!r}"
        target = attrs.get("target", "notes")
        return new(kind="memory", action=action, target=target, old_text=_part(inner, "old")), text
    return f"unknown proposal kind {kind!r} (skill or memory)"


MIN_TRANSCRIPT = 500  # tokens of transcript below which a pass has too little to review
MIN_OUTPUT = 300  # tokens of answer below which a proposal cannot be written


async def reflect(provider: Provider, model: str, messages: list[Message], *, library: Library, workspace: Path,
                  memory: str, room: str, cap: int | None = None) -> Outcome:
    """Review one user line's messages; stage at most one proposal. Never raises for a model's failure.
    `cap`: the tokens the call may take, input and output together (None: the usual caps); a cap too small for
    the prompt and a useful share of transcript and answer makes no call (status "capped")."""
    seq = [messages[0].seq, messages[-1].seq] if messages else []
    output_cap = OUTPUT_CAP if cap is None else min(OUTPUT_CAP, max(MIN_OUTPUT, cap // 8))
    input_cap = INPUT_CAP if cap is None else min(INPUT_CAP, cap - output_cap)
    mine = await trio.to_thread.run_sync(own_skills, library, workspace, input_cap // 3, limiter=_FILE_IO)
    others = sorted(n for n in library.skills if n not in mine)
    system = render("evolve.md.j2", own=mine, others=others, memory=memory)
    room_left = input_cap - estimate(system)
    if room_left < MIN_TRANSCRIPT:
        need = estimate(system) + MIN_TRANSCRIPT + output_cap
        return Outcome(status="capped", seq=seq, reason=f"it needs about {need:,} tokens, more than the cap allows")
    budget = max(MIN_TRANSCRIPT, room_left)
    text = transcript(messages, budget)
    cut = cap is not None and text != transcript(messages, max(MIN_TRANSCRIPT, INPUT_CAP - estimate(system)))
    request = Request(agent=REVIEWER, model=model, system=system,
                      messages=[ModelMessage("user", [TextBlock(text)])], max_output_tokens=output_cap,
                      auxiliary=True)
    sent = estimate(system) + estimate(text)
    try:
        response = await complete(provider, request)
    except ProviderError as exc:
        log.warning("self-improvement pass failed", error=str(exc), kind=exc.kind)
        return Outcome(status="failed", reason=f"{exc.kind}: {exc}", seq=seq, input_tokens=sent)
    answer = "".join(b.text for b in response.blocks if isinstance(b, TextBlock))
    reported = response.usage  # None: the provider did not say, so our estimates stand in
    outcome = partial(Outcome, seq=seq, input_tokens=reported.input if reported else sent,
                      output_tokens=reported.output if reported else estimate(answer), estimated=reported is None,
                      cut=cut)
    parsed = parse(answer, room=room, seq=seq)
    if parsed == "":
        return outcome(status="nothing")
    if isinstance(parsed, str):
        return outcome(status="refused", reason=parsed)
    proposal, body = parsed
    current = library.get(proposal.target)
    if proposal.kind == "skill" and proposal.action == "update" and proposal.target not in mine \
            and current is not None and current.created_by == AGENT:  # others: stage() says why not
        return outcome(status="refused", reason=f"{proposal.target}: the pass was not shown its current text, "
                                                "so it may not change it")
    try:
        staged = await trio.to_thread.run_sync(stage, workspace, library, proposal, body, limiter=_FILE_IO)
    except InputError as exc:
        return outcome(status="refused", reason=str(exc))
    return outcome(status="proposed", proposal=staged.id, reason=staged.summary())

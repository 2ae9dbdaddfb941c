"""Proposals (M5): changes the self-improvement pass suggests, staged as files until the user decides.

Each lives in the workspace's `.agents/proposed/<id>/` with its new text, a diff and where it came from
(room, seq range, `created_by: agent`); accepting re-checks every rule, rejecting keeps it for the record.
"""
from __future__ import annotations

import difflib
import hashlib
import os
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import msgspec

from orchestrator.core.errors import InputError
from orchestrator.memory import scan
from orchestrator.skills.library import Library, project_folders
from orchestrator.skills.skill import NAME, read_skill

Kind = Literal["skill", "memory"]
Action = Literal["create", "update", "add", "replace"]
AGENT = "agent"  # the `created_by` of everything the pass writes


def proposed_dir(workspace: Path) -> Path:
    return workspace / ".agents" / "proposed"


def project_skills(workspace: Path) -> Path:
    """Where accepted skills go: the workspace's own `.agents/skills`, the highest-priority root."""
    return project_folders(workspace)[0]


class Proposal(msgspec.Struct, kw_only=True):
    """proposal.yaml: everything about one proposal except its text (beside it, in its own file)."""

    kind: Kind
    action: Action
    target: str  # a skill name, or `profile` / `notes`
    rationale: str = ""
    created_by: str = AGENT
    room: str = ""
    seq: list[int] = []  # [first, last]: the room messages it learned from
    created: float = 0.0
    base_sha256: str = ""  # update: the SKILL.md it was written against
    old_text: str = ""  # memory replace: the text it replaces


@dataclass(frozen=True)
class Staged:
    id: str
    folder: Path
    proposal: Proposal

    @property
    def text_file(self) -> Path:
        return self.folder / ("SKILL.md" if self.proposal.kind == "skill" else "memory.txt")

    def text(self) -> str:
        return self.text_file.read_text(encoding="utf-8")

    def diff(self) -> str:
        try:
            return (self.folder / "change.diff").read_text(encoding="utf-8")
        except OSError:
            return ""

    def summary(self) -> str:
        p = self.proposal
        what = f"{p.action} skill {p.target}" if p.kind == "skill" else f"{p.action} a {p.target} entry"
        seq = f"seq {p.seq[0]}-{p.seq[-1]}" if p.seq else "no seq"
        return f"{self.id}: {what} (room {p.room or '?'}, {seq}, created_by: {p.created_by})"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "proposal"


def skill_text(name: str, description: str, body: str, metadata: dict[str, str]) -> str:
    """A SKILL.md written by the pass: its own front matter, so provenance cannot be left out."""
    import yaml  # with the first proposal written, not with every import of the room

    front = yaml.safe_dump({"name": name, "description": description, "metadata": metadata},
                           sort_keys=False, allow_unicode=True, width=1000)
    return f"---\n{front}---\n\n{body.strip()}\n"


def vet_skill(library: Library, workspace: Path, p: Proposal, text: str) -> str:
    """Why this skill proposal may not be staged or applied ("" when it may). The pass may create a new
    skill, or change one it created itself in this workspace; never a shipped, user or foreign one."""
    if not NAME.fullmatch(p.target) or len(p.target) > 64:
        return f"`{p.target}` is not a valid skill name (a-z, 0-9 and single `-`, at most 64 characters)"
    home = project_skills(workspace) / p.target
    existing = [e for e in library.entries if e.name == p.target]
    if p.action == "create":
        if existing or home.exists():
            where = existing[0].folder if existing else str(home)
            return f"a skill named {p.target} already exists ({where}); only a new name can be created"
    elif p.action == "update":
        current = library.get(p.target)
        if current is None or Path(current.folder) != home.resolve():
            return f"{p.target} is not a skill of this workspace's .agents/skills; the pass changes only its own"
        if current.created_by != AGENT:
            return f"{p.target} was not created by an agent (no `created_by: agent`); only its author may change it"
    else:
        return f"`{p.action}` is not an action on a skill (create or update)"
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / p.target
        folder.mkdir()
        (folder / "SKILL.md").write_text(text, encoding="utf-8")
        skill, problems = read_skill(folder)
    failing = [f"line {q.line}: {q.message}" for q in problems if q.failing]
    if skill is None or failing:
        return "the proposed SKILL.md is not a valid skill: " + "; ".join(failing or ["unreadable"])
    if skill.created_by != AGENT:
        return "the proposed SKILL.md lacks `metadata: {created_by: agent}`"
    return ""


def vet_memory(p: Proposal, text: str) -> str:
    if p.target not in ("profile", "notes"):
        return f"`{p.target}` is not a memory part (profile or notes)"
    if p.action not in ("add", "replace"):
        return f"`{p.action}` is not an action on memory (add or replace)"
    if p.action == "replace" and not p.old_text:
        return "a memory replace needs the old text"
    if findings := scan.scan(text):
        return f"the injection scanner flagged {scan.explain(findings)}"
    return ""


def stage(workspace: Path, library: Library, p: Proposal, text: str) -> Staged:
    """Write the proposal under `.agents/proposed/`; InputError when a rule forbids it."""
    why = vet_skill(library, workspace, p, text) if p.kind == "skill" else vet_memory(p, text)
    if why:
        raise InputError(why)
    before = ""
    if p.kind == "skill" and p.action == "update":
        before = (project_skills(workspace) / p.target / "SKILL.md").read_text(encoding="utf-8")
        p = msgspec.structs.replace(p, base_sha256=_sha(before))
    elif p.kind == "memory" and p.action == "replace":
        before = p.old_text
    p = msgspec.structs.replace(p, created=p.created or time.time(), created_by=AGENT)
    ident = time.strftime("%Y%m%d-%H%M%S", time.gmtime(p.created)) + f"-{p.kind}-{_slug(p.target)}"
    root = proposed_dir(workspace)
    root.mkdir(parents=True, exist_ok=True)
    folder = root / ident
    n = 1
    while folder.exists():
        n += 1
        folder = root / f"{ident}-{n}"
    folder.mkdir()
    staged = Staged(folder.name, folder, p)
    staged.text_file.write_text(text, encoding="utf-8")
    label = f"{p.target}/SKILL.md" if p.kind == "skill" else f"memory/{p.target}"
    diff = difflib.unified_diff(before.splitlines(keepends=True), text.splitlines(keepends=True),
                                fromfile=f"a/{label}" if before else "/dev/null", tofile=f"b/{label}")
    (folder / "change.diff").write_text("".join(diff), encoding="utf-8")
    (folder / "proposal.yaml").write_bytes(msgspec.yaml.encode(p))
    return staged


def pending(workspace: Path) -> list[Staged]:
    """Proposals awaiting a decision, oldest first."""
    root = proposed_dir(workspace)
    out = []
    for folder in sorted(root.iterdir()) if root.is_dir() else ():
        if folder.name in ("accepted", "rejected") or not (folder / "proposal.yaml").is_file():
            continue
        try:
            p = msgspec.yaml.decode((folder / "proposal.yaml").read_bytes(), type=Proposal)
        except (msgspec.DecodeError, OSError) as exc:
            raise InputError(f"{folder / 'proposal.yaml'}: unreadable proposal ({exc}); fix or delete it") from None
        out.append(Staged(folder.name, folder, p))
    return out


def find(workspace: Path, ident: str) -> Staged:
    found = [s for s in pending(workspace) if s.id == ident or s.id.startswith(ident)]
    if len(found) != 1:
        names = ", ".join(s.id for s in pending(workspace)) or "none"
        what = "no pending proposal" if not found else "more than one pending proposal"
        raise InputError(f"{what} matches {ident!r}; pending: {names}")
    return found[0]


def _file_away(staged: Staged, decision: str) -> None:
    target = staged.folder.parent / decision
    target.mkdir(parents=True, exist_ok=True)
    os.replace(staged.folder, target / staged.id)


def apply_skill(workspace: Path, library: Library, staged: Staged) -> Path:
    """Accept a skill proposal: every rule checked again, then SKILL.md written. Returns its path."""
    p, text = staged.proposal, staged.text()
    if why := vet_skill(library, workspace, p, text):
        raise InputError(f"{staged.id}: cannot be accepted: {why}")
    path = project_skills(workspace) / p.target / "SKILL.md"
    if p.action == "update" and _sha(path.read_text(encoding="utf-8")) != p.base_sha256:
        raise InputError(f"{staged.id}: {path} changed after the proposal was written; reject it")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".SKILL.md.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    _file_away(staged, "accepted")
    return path


def accepted(staged: Staged) -> None:
    """File away a memory proposal the caller applied through the memory's own checks."""
    _file_away(staged, "accepted")


def reject(staged: Staged) -> None:
    _file_away(staged, "rejected")


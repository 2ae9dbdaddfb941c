"""Proposals: changes the self-improvement pass suggests, staged as files until the user decides.

Each lives in the workspace's `.agents/proposed/<id>/` with its new text, a diff and where it came from
(room, seq range, `created_by: agent`); accepting re-checks every rule, rejecting keeps it for the record.
Everything under `.agents` is read and written as the tools do, never through a link that leads out.
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
from orchestrator.skills.skill import MAX_SKILL_BYTES, NAME, read_skill
from orchestrator.tools.base import ToolError
from orchestrator.tools.sandbox import made_folder, open_own, read_own, write_own
from orchestrator.tools.session import ToolSession

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


def read_text(workspace: Path, path: Path) -> str:
    """A file under the workspace, read as the tools read it (no link out of it, no hard link): InputError."""
    try:
        return read_own(ToolSession(workspace), str(path), MAX_SKILL_BYTES)[1].decode("utf-8", "replace")
    except ToolError as exc:
        raise InputError(str(exc)) from None


def _write_text(workspace: Path, path: Path, text: str) -> None:
    try:
        write_own(ToolSession(workspace), str(path), text.encode("utf-8"))
    except ToolError as exc:
        raise InputError(str(exc)) from None


@dataclass(frozen=True)
class Staged:
    id: str
    folder: Path
    proposal: Proposal
    workspace: Path  # what its files are read in: a link under .agents that leads out of it is refused

    @property
    def text_file(self) -> Path:
        return self.folder / ("SKILL.md" if self.proposal.kind == "skill" else "memory.txt")

    def text(self) -> str:
        return read_text(self.workspace, self.text_file)

    def diff(self) -> str:
        try:
            return read_text(self.workspace, self.folder / "change.diff")
        except InputError:
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
        before = read_text(workspace, project_skills(workspace) / p.target / "SKILL.md")
        p = msgspec.structs.replace(p, base_sha256=_sha(before))
    elif p.kind == "memory" and p.action == "replace":
        before = p.old_text
    p = msgspec.structs.replace(p, created=p.created or time.time(), created_by=AGENT)
    ident = time.strftime("%Y%m%d-%H%M%S", time.gmtime(p.created)) + f"-{p.kind}-{_slug(p.target)}"
    folder = _new_folder(workspace, ident)
    staged = Staged(folder.name, folder, p, workspace)
    label = f"{p.target}/SKILL.md" if p.kind == "skill" else f"memory/{p.target}"
    diff = difflib.unified_diff(before.splitlines(keepends=True), text.splitlines(keepends=True),
                                fromfile=f"a/{label}" if before else "/dev/null", tofile=f"b/{label}")
    _write_text(workspace, staged.text_file, text)
    _write_text(workspace, folder / "change.diff", "".join(diff))
    _write_text(workspace, folder / "proposal.yaml", msgspec.yaml.encode(p).decode())
    return staged


def _new_folder(workspace: Path, ident: str) -> Path:
    """A new folder for one proposal under .agents/proposed (`ident`, else `ident-2`, ...), made in the
    checked folder itself, so two passes never share one and no link leads the folder elsewhere."""
    session = ToolSession(workspace)
    try:
        made_folder(session, str(proposed_dir(workspace)))
        with open_own(session, str(proposed_dir(workspace)), "folder") as root:
            n = 1
            while True:
                name = ident if n == 1 else f"{ident}-{n}"
                try:
                    os.mkdir(name, dir_fd=root.fd)
                    return root.path / name
                except FileExistsError:
                    n += 1
    except ToolError as exc:
        raise InputError(str(exc)) from None


def pending(workspace: Path) -> list[Staged]:
    """Proposals awaiting a decision, oldest first."""
    root = proposed_dir(workspace)
    out = []
    for folder in sorted(root.iterdir()) if root.is_dir() else ():
        if folder.name in ("accepted", "rejected") or not (folder / "proposal.yaml").is_file():
            continue
        try:
            p = msgspec.yaml.decode(read_text(workspace, folder / "proposal.yaml"), type=Proposal)
        except msgspec.DecodeError as exc:
            raise InputError(f"{folder / 'proposal.yaml'}: unreadable proposal ({exc}); fix or delete it") from None
        out.append(Staged(folder.name, folder, p, workspace))
    return out


def find(workspace: Path, ident: str) -> Staged:
    found = [s for s in pending(workspace) if s.id == ident or s.id.startswith(ident)]
    if len(found) != 1:
        names = ", ".join(s.id for s in pending(workspace)) or "none"
        what = "no pending proposal" if not found else "more than one pending proposal"
        raise InputError(f"{what} matches {ident!r}; pending: {names}")
    return found[0]


def _filing(staged: Staged, decision: str) -> Path:
    """The `accepted/` or `rejected/` folder beside the proposal, made if missing (never through a link out)."""
    try:
        return made_folder(ToolSession(staged.workspace), str(staged.folder.parent / decision))
    except ToolError as exc:
        raise InputError(str(exc)) from None


def _file_away(staged: Staged, decision: str) -> None:
    """Move the proposal's folder into `accepted/` or `rejected/`, renamed between the checked folders' own
    fds, so a link swapped in for either cannot move it out of the workspace."""
    session = ToolSession(staged.workspace)
    target = _filing(staged, decision)
    try:
        with open_own(session, str(staged.folder), "folder") as source, \
                open_own(session, str(target), "folder") as into:
            os.replace(source.name, staged.id, src_dir_fd=source.folder, dst_dir_fd=into.fd)
    except ToolError as exc:
        raise InputError(str(exc)) from None


def apply_skill(workspace: Path, library: Library, staged: Staged) -> Path:
    """Accept a skill proposal: every rule checked again, then SKILL.md written. Returns its path."""
    p, text = staged.proposal, staged.text()
    if why := vet_skill(library, workspace, p, text):
        raise InputError(f"{staged.id}: cannot be accepted: {why}")
    path = project_skills(workspace) / p.target / "SKILL.md"
    if p.action == "update" and _sha(read_text(workspace, path)) != p.base_sha256:
        raise InputError(f"{staged.id}: {path} changed after the proposal was written; reject it")
    _filing(staged, "accepted")  # before the skill is written: a proposal that cannot be filed is not applied
    _write_text(workspace, path, text)  # a temp file beside it, renamed over it: readers see old or new
    _file_away(staged, "accepted")
    return path


def accepted(staged: Staged) -> None:
    """File away a memory proposal the caller applied through the memory's own checks."""
    _file_away(staged, "accepted")


def reject(staged: Staged) -> None:
    _file_away(staged, "rejected")


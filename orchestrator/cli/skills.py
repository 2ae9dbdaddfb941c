"""`orchestrator skills list|show|check|review`: the skills agents can use, whether a folder is a valid
skill (file:line), and the proposals the self-improvement pass staged, accepted or rejected here.

list/show read the configured roots for a workspace (default: the current folder), as a room would; review
writes in it only when named, or when the current folder is neither the home folder, / nor a system folder.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from typing import TYPE_CHECKING

import msgspec
import trio

from orchestrator.cli.paths import add_actions, default_db
from orchestrator.core.errors import InputError

if TYPE_CHECKING:
    from orchestrator.skills.library import Library

# The skills modules (and YAML) are imported by the commands, not by `orchestrator --help`.


def _workspace(args, *, writing: bool = False) -> Path:
    """`--workspace`, else the current folder; a step that writes refuses the current folder when it is the
    home folder, / or a system folder: agents' proposals would land in the user's own settings."""
    if args.workspace is not None:
        return args.workspace.expanduser().resolve()
    here = Path.cwd().resolve()
    if writing:
        from orchestrator.team.trust import unsafe_workspace

        if why := unsafe_workspace(here):
            raise InputError(f"not writing in {here}: it is {why}; pass --workspace DIR (the project's folder, "
                             f"or --workspace {here} if you mean it)")
    return here


async def _library(args, workspace: Path | None = None) -> Library:
    """The library a room in `--workspace` would see."""
    from orchestrator.room.skills import default_roots
    from orchestrator.skills.library import discover

    workspace = workspace or _workspace(args)
    return await trio.to_thread.run_sync(lambda: discover(default_roots(workspace)))


async def cmd_list(args) -> int:
    lib = await _library(args)
    if args.json:
        for e in lib.entries:
            row = {"name": e.name, "root": e.root, "tier": e.tier, "status": e.status, "reason": e.reason,
                   "notes": e.notes, "folder": e.folder, "description": e.skill.description if e.skill else ""}
            print(msgspec.json.encode(row).decode())
        return 0
    if not lib.entries:
        print("no skills found; put skill folders in .agents/skills/ (see `orchestrator skills check`)")
        return 0
    width = max(len(e.name) for e in lib.entries)
    for e in lib.entries:
        line = f"{e.name:<{width}}  {e.root:<8} {e.tier:<9} {e.status}"
        if e.reason:
            line += f": {e.reason}"
        elif e.skill and not e.skill.model_invocable:
            line += " (user-invoked only)"
        print(line)
    loaded = sum(e.status == "loaded" for e in lib.entries)
    print(f"{loaded} loaded, {len(lib.entries) - loaded} shadowed, blocked, invalid or set aside")
    if aside := [e for e in lib.entries if e.status == "set-aside"]:
        from orchestrator.room.skills import untrusted

        names = ", ".join(e.name for e in aside[:5]) + (", ..." if len(aside) > 5 else "")
        why = await trio.to_thread.run_sync(untrusted, _workspace(args))
        print(f"not read: {len(aside)} project skill(s) in {_workspace(args)} ({names}): {why}")
    return 0


async def cmd_show(args) -> int:
    from orchestrator.skills.bundle import bundled_files

    lib = await _library(args)
    skill = lib.get(args.name)
    if skill is None:
        entry = lib.entry(args.name)
        if entry is None:
            raise InputError(f"no skill named {args.name!r}; `orchestrator skills list` shows them")
        print(f"{entry.name}: {entry.status} ({entry.folder}): {entry.reason}")
        return 1
    print(f"{skill.name}  [{lib.roots[skill.name]}, {lib.tiers[skill.name]}]  {skill.folder}")
    entry = lib.entry(skill.name)
    assert entry is not None  # the library found this skill, so it has its entry
    for note in entry.notes:  # what it overrides, and what its commands would ask first
        print(f"note: {note}")
    print(f"description: {skill.description}")
    for label, value in (("license", skill.license), ("compatibility", skill.compatibility)):
        if value:
            print(f"{label}: {value}")
    if skill.metadata:
        print("metadata: " + ", ".join(f"{k}={v}" for k, v in skill.metadata.items()))
    if skill.allowed_tools is not None:
        print(f"allowed-tools: {' '.join(skill.allowed_tools)}")
    if not skill.model_invocable:
        print("disable-model-invocation: true (only the user invokes it, with /skill)")
    files = await trio.to_thread.run_sync(bundled_files, Path(skill.folder))
    print(f"files: {', '.join(files) if files else 'none'}")
    print()
    print(skill.body)
    return 0


def _folders(path: Path) -> list[Path]:
    """A skill folder, or every skill folder directly inside a folder of them."""
    from orchestrator.skills.skill import skill_file

    if not path.exists():
        raise InputError(f"{path}: no such file or folder")
    if path.is_file():
        return [path.parent]
    if skill_file(path) is not None:
        return [path]
    inner = sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not inner:
        raise InputError(f"{path}: neither a skill folder (no SKILL.md) nor a folder of skill folders")
    return inner


async def cmd_check(args) -> int:
    from orchestrator.skills.skill import read_skill

    folders = [f for p in args.paths for f in _folders(Path(p))]
    bad = 0
    for folder in folders:
        _, problems = await trio.to_thread.run_sync(read_skill, folder)
        failing = [p for p in problems if p.failing]
        bad += bool(failing)
        print(f"{'FAIL' if failing else 'OK  '}  {folder}")
        for p in problems:
            if p.failing or p.severity == "asks" or args.notes:
                print(f"      {p}")
    print(f"{len(folders) - bad} valid, {bad} with problems")
    return 1 if bad else 0


async def cmd_review(args) -> int:
    from orchestrator.memory.notes import Memory
    from orchestrator.room.skills import decide
    from orchestrator.skills import proposals
    from orchestrator.store.db import Store

    workspace = _workspace(args, writing=bool(args.accept or args.reject))
    waiting = await trio.to_thread.run_sync(proposals.pending, workspace)
    if not args.accept and not args.reject:
        if not waiting:
            print(f"no pending proposals in {proposals.proposed_dir(workspace)}")
            return 0
        for staged in waiting:
            print(staged.summary())
            if staged.proposal.rationale:
                print(f"  why: {staged.proposal.rationale}")
            print("  " + staged.diff().rstrip("\n").replace("\n", "\n  "))
            print()
        print("accept or reject with `orchestrator skills review --accept ID` / `--reject ID` (ID: a prefix, or all)")
        return 0
    ident = args.accept or args.reject
    chosen = waiting if ident == "all" else [await trio.to_thread.run_sync(proposals.find, workspace, ident)]
    if not chosen:
        raise InputError("there are no pending proposals")
    from orchestrator.team import trust

    store = None
    before = await trio.to_thread.run_sync(trust.survey, workspace) if args.accept else None
    try:
        for staged in chosen:
            if store is None and args.accept and staged.proposal.kind == "memory":
                args.db.parent.mkdir(parents=True, exist_ok=True)
                store = await Store.open(args.db)
            print(await decide(staged, bool(args.accept), await _library(args, workspace), workspace,
                               Memory(store) if store else None))
    finally:
        if store is not None:
            await store.close()
        if before is not None:  # what the user accepted is theirs: the folder's trust takes it in
            after = await trio.to_thread.run_sync(trust.survey, workspace)
            await trio.to_thread.run_sync(trust.vouch, before, after)
    return 0


def add_parser(sub: Any) -> None:
    skills = sub.add_parser("skills", help="list, show and check skills; review proposed changes")
    actions = add_actions(skills, "skills_command")

    def workspace(p) -> None:
        p.add_argument("--workspace", type=Path, default=None,
                       help="the project whose .agents/skills count (default: the current folder)")

    ls = actions.add_parser("list", help="every skill found: name, root, tier, status")
    ls.add_argument("--json", action="store_true", help="one JSON object per skill and line")
    workspace(ls)
    ls.set_defaults(fn=cmd_list)
    show = actions.add_parser("show", help="a skill's metadata, files and instructions")
    show.add_argument("name")
    workspace(show)
    show.set_defaults(fn=cmd_show)
    check = actions.add_parser("check", help="validate skill folders against the specification (file:line)")
    check.add_argument("paths", nargs="+", metavar="PATH", help="a skill folder, or a folder of them")
    check.add_argument("--notes", action="store_true", help="print advice too, not only problems")
    check.set_defaults(fn=cmd_check)
    review = actions.add_parser("review", help="show, accept or reject proposals of the self-improvement pass")
    decide = review.add_mutually_exclusive_group()
    decide.add_argument("--accept", metavar="ID", help="accept a proposal (an id prefix, or all)")
    decide.add_argument("--reject", metavar="ID", help="reject a proposal (an id prefix, or all)")
    review.add_argument("--db", type=Path, default=default_db(), help="where memory proposals go (default: %(default)s)")
    workspace(review)
    review.set_defaults(fn=cmd_review)


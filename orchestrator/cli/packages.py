"""`orchestrator packages add|list|show|update|deps|enable|disable|remove`: external packages, kept as
cloned under the data folder, and the question before a package's dependency step runs.

The question is asked on a terminal (y/N); `--yes` approves the exact command shown; with neither, the
step does not run and one line says how to run it. The answer is kept for the package's dependency files.
"""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import msgspec
import trio

from orchestrator.cli.paths import add_actions
from orchestrator.core.errors import InputError

if TYPE_CHECKING:
    from orchestrator.packages.lifecycle import Asker
    from orchestrator.packages.registry import Answer, Package, Registry

# The packages modules (git, the sandbox) are imported by the actions, not by `orchestrator --help`.


def _asker(args: Any) -> Asker:
    async def ask(pkg: Package) -> Answer:
        from orchestrator.packages.places import places

        folder = places().folder(pkg.name, True)
        print(f"{pkg.name}: its dependency step runs this in {folder}, in the sandbox, with the network:")
        print(f"  {pkg.deps.command}")
        if getattr(args, "yes", False):
            print("approved with --yes")
            return "yes"
        if not sys.stdin.isatty():
            return ""
        said = await trio.to_thread.run_sync(input, "run it? [y/N] ", abandon_on_cancel=True)
        return "yes" if said.strip().lower() in ("y", "yes") else "no"
    return ask


def _summary(pkg: Package) -> str:
    from orchestrator.packages.lifecycle import status

    parts = []
    if pkg.skills:
        parts.append(f"skills in {', '.join(r or '.' for r in pkg.skill_roots)}")
    if pkg.commands:
        parts.append(f"commands {', '.join(sorted(pkg.commands))}")
    kind = "; ".join(parts) or "nothing usable"
    return f"{kind}; dependencies: {status(pkg)}"


async def _deps(name: str, args: Any, *, again: bool = False) -> None:
    from orchestrator.packages.lifecycle import dependencies

    print(f"{name}: {await dependencies(name, _asker(args), again=again)}")


async def cmd_add(args: Any) -> int:
    from orchestrator.packages.lifecycle import add

    pkg = await add(args.source, args.name, args.ref or "")
    print(f"added {pkg.name} at {pkg.commit[:12]} from {pkg.source}: {', '.join(pkg.kinds) or 'nothing usable'}")
    for note in pkg.notes:
        print(f"note: {note}")
    if pkg.skills:
        print(f"{pkg.name}: its skills are the untrusted tier (commander only); `orchestrator skills list` "
              "shows them")
    await _deps(pkg.name, args)
    return 0


async def cmd_list(args: Any) -> int:
    from orchestrator.packages.lifecycle import registry, status

    packages = sorted(registry().packages.values(), key=lambda p: p.name)
    if args.json:
        for pkg in packages:
            row = msgspec.to_builtins(pkg)
            row["dependencies"] = status(pkg)
            print(msgspec.json.encode(row).decode())
        return 0
    if not packages:
        print("no packages; `orchestrator packages add URL` adds one")
        return 0
    width = max(len(p.name) for p in packages)
    for pkg in packages:
        state = "enabled " if pkg.enabled else "disabled"
        print(f"{pkg.name:<{width}}  {state}  {pkg.commit[:12]}  {_summary(pkg)}")
    return 0


async def cmd_show(args: Any) -> int:
    from orchestrator.packages.lifecycle import get, status
    from orchestrator.packages.places import places
    from orchestrator.packages.shims import owners

    where = places()
    pkg = get(args.name, where)
    print(f"{pkg.name}  [{'enabled' if pkg.enabled else 'disabled'}]  {where.folder(pkg.name, pkg.enabled)}")
    print(f"source: {pkg.source}" + (f" ({pkg.ref})" if pkg.ref else ""))
    print(f"commit: {pkg.commit}  (added {pkg.added}, updated {pkg.updated})")
    print(f"kind: {', '.join(pkg.kinds) or 'neither skill-form nor CLI-form'}")
    for rel in pkg.skills:
        print(f"skill: {rel}  (untrusted tier)")
    shimmed = await trio.to_thread.run_sync(owners, where, _registry())
    for name, command in sorted(pkg.commands.items()):
        owner = shimmed.get(name)
        state = "on PATH" if owner == pkg.name else f"not on PATH: {owner} has that name" if owner else \
            "not on PATH: needs the dependency step" if command.needs_deps else "not on PATH"
        if not pkg.enabled:
            state = "not on PATH: disabled"
        print(f"command: {name} -> {command.target} ({command.origin}; {state})")
    print(f"dependencies: {status(pkg)}" + (f"\n  {pkg.deps.command}" if pkg.deps.command else ""))
    for note in pkg.notes:
        print(f"note: {note}")
    return 0


def _registry() -> Registry:
    from orchestrator.packages.lifecycle import registry

    return registry()


async def cmd_update(args: Any) -> int:
    from orchestrator.packages.lifecycle import get, update

    names = [get(args.name).name] if args.name else sorted(_registry().packages)
    if not names:
        print("no packages to update")
        return 0
    failed = 0
    for name in names:
        try:
            pkg, change = await update(name)
            print(f"{name}: {change}")
            for note in pkg.notes if change != "up to date" else ():
                print(f"note: {note}")
            if pkg.enabled:
                await _deps(name, args)
        except InputError as exc:
            if len(names) == 1:
                raise
            failed += 1  # one package's refusal does not keep the others back
            print(f"error: {exc}", file=sys.stderr)
    return 2 if failed else 0


async def cmd_deps(args: Any) -> int:
    await _deps(args.name, args, again=True)
    return 0


async def cmd_enable(args: Any) -> int:
    from orchestrator.packages.lifecycle import enable

    on = args.packages_command == "enable"
    pkg = await enable(args.name, on)
    print(f"{pkg.name}: {'enabled' if on else 'disabled: no skills, no commands'}")
    return 0


async def cmd_remove(args: Any) -> int:
    from orchestrator.packages.lifecycle import remove

    await remove(args.name)
    print(f"{args.name}: removed, with its folder")
    return 0


def add_parser(sub: Any) -> None:
    packages = sub.add_parser("packages", help="external packages: add, list, update, enable, remove")
    actions = add_actions(packages, "packages_command")

    def yes(p: Any) -> None:
        p.add_argument("--yes", action="store_true",
                       help="approve the dependency step's command shown (without it a terminal is asked, "
                            "and without a terminal the step does not run)")

    add = actions.add_parser("add", help="clone a repository as it is, check it, and install it")
    add.add_argument("source", help="an https://, ssh://, git:// or file:// URL, git@host:path, or a local folder")
    add.add_argument("--name", help="the package's name (default: the address's last part)")
    add.add_argument("--ref", help="the branch or tag to follow, or a commit id to pin (default: the remote's "
                                   "default branch)")
    yes(add)
    add.set_defaults(fn=cmd_add)
    ls = actions.add_parser("list", help="every package: state, commit, kind, dependencies")
    ls.add_argument("--json", action="store_true", help="one JSON object per package and line")
    ls.set_defaults(fn=cmd_list)
    show = actions.add_parser("show", help="a package's source, commit, skills, commands and dependency step")
    show.add_argument("name")
    show.set_defaults(fn=cmd_show)
    update = actions.add_parser("update", help="fast-forward a package (default: every one), checked as at install")
    update.add_argument("name", nargs="?")
    yes(update)
    update.set_defaults(fn=cmd_update)
    deps = actions.add_parser("deps", help="run a package's dependency step (asks again even after a no)")
    deps.add_argument("name")
    yes(deps)
    deps.set_defaults(fn=cmd_deps)
    for verb, what in (("enable", "its skills listed and its commands on the sandbox's PATH again"),
                       ("disable", "keep it, but give no skills and no commands")):
        p = actions.add_parser(verb, help=what)
        p.add_argument("name")
        p.set_defaults(fn=cmd_enable)
    rm = actions.add_parser("remove", help="remove a package and its folder")
    rm.add_argument("name")
    rm.set_defaults(fn=cmd_remove)

"""The `orchestrator` command: one parser over the command groups (run/check, chat, serve,
rooms/show/export, kb, memory, tokens, models, mcp, skills, agents, bridge, packages, secrets), and the one place errors become exit codes.

Exit codes: 0 ran and held, 1 an expectation failed, 2 bad input, 3 the run failed. A person
sees one or two lines per problem; tracebacks only with --debug.
"""
from __future__ import annotations

import argparse
import copy as _copy
import importlib
import importlib.metadata
import os
import shutil
import sys
import textwrap

import trio

from orchestrator.core.errors import InputError
from orchestrator.core.log import configure, logger
from orchestrator.core.visible import Shown

log = logger(__name__)

# Every command: its module, the function there that adds its parser, and its one-line help. Only the
# module of the command being run is imported (--help lists the others from here, test_cli checks the
# help is the module's own), so that `orchestrator --help` loads no room, store or scenario runner.
COMMANDS = {
    "chat": ("orchestrator.cli.chat.command", "add_parser", "talk with a room interactively"),
    "run": ("orchestrator.cli.run", "add_parsers", "play a scenario and check its expectations"),
    "check": ("orchestrator.cli.run", "add_parsers", "play scenarios and report pass/fail for each"),
    "scenarios": ("orchestrator.cli.run", "add_parsers", "list the shipped scenarios"),
    "models": ("orchestrator.cli.models", "add_parser", "list configured providers and endpoints and check "
                                                          "their keys"),
    "rooms": ("orchestrator.cli.rooms", "add_parsers", "list stored rooms: chat rooms and scenario runs"),
    "show": ("orchestrator.cli.rooms", "add_parsers", "print a stored room's transcript (healed for display)"),
    "export": ("orchestrator.cli.rooms", "add_parsers", "write a stored room's transcript"),
    "tokens": ("orchestrator.cli.tokens", "add_parser", "estimate the tokens of files, as the engine counts them"),
    "kb": ("orchestrator.cli.kb", "add_parser", "the knowledge base: add, search, list and remove documents"),
    "memory": ("orchestrator.cli.memory", "add_parser", "see and change the saved profile and notes"),
    "serve": ("orchestrator.cli.serve", "add_parser", "host every room of the store on a web page"),
    "mcp": ("orchestrator.cli.mcp", "add_parser", "MCP: list the configured servers, or serve the team as an "
                                                  "MCP server"),
    "skills": ("orchestrator.cli.skills", "add_parser", "list, show and check skills; review proposed changes"),
    "agents": ("orchestrator.cli.agents", "add_parser", "external agents (ACP members): check that each starts, "
                                                        "prune their HOMEs"),
    "bridge": ("orchestrator.cli.bridge", "add_parser", "the reverse bridge an external agent runs (internal)"),
    "packages": ("orchestrator.cli.packages", "add_parser", "external packages: add, list, update, enable, remove"),
    "secrets": ("orchestrator.cli.secrets", "add_parser", "secrets in the OS keyring: set, list, remove"),
}


def parser(argv: list[str] | None = None, *, full: bool = False) -> argparse.ArgumentParser:
    """The parser for `argv`: the command named there is built in full, the others only listed
    (`full` builds every command, for tests and documentation)."""
    p = argparse.ArgumentParser(
        prog="orchestrator", description="A multi-agent group-chat orchestrator: a commander hosts a room and "
        "hands work to its agents. Start with `orchestrator chat`, or play a shipped scenario: "
        "`orchestrator scenarios` lists them, `orchestrator run flagship` plays one.")
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    p.add_argument("--debug", action="store_true", help="detailed logs and tracebacks")
    p.add_argument("--log-json", metavar="FILE", help="write logs as JSON lines to FILE")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    named = _command(sys.argv[1:] if argv is None else argv)
    wanted = {entry[:2] for name, entry in COMMANDS.items() if full or name == named}
    for name, (module, adder, help_) in COMMANDS.items():
        if name in sub.choices:  # added with an earlier command of its module
            continue
        if (module, adder) in wanted:
            getattr(importlib.import_module(module), adder)(sub)
        else:
            sub.add_parser(name, help=help_, add_help=False)
    _anywhere(p, [a for a in p._actions if a.dest in ("debug", "log_json")])
    return p


def _command(argv: list[str]) -> str | None:
    """The command word in argv: its first word that is not an option or the value of --log-json."""
    words = iter(argv)
    for word in words:
        if word == "--log-json":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def _anywhere(group: argparse.ArgumentParser, inherited: list[argparse.Action]) -> None:
    """Options are accepted before or after the command that owns them: the global flags on every
    command, and an option all of a group's actions share (`kb --db X list`) on the group too.

    The copies default to SUPPRESS, so an option given early is not reset by a later parser's default.
    """
    subs = next((a for a in group._actions if isinstance(a, argparse._SubParsersAction)), None)
    if subs is None:
        return
    children = list(dict.fromkeys(subs.choices.values()))
    shared = [a for a in children[0]._actions if a.option_strings and a.dest != "help"
              and all(any(b.option_strings == a.option_strings for b in c._actions) for c in children[1:])]
    for action in shared:
        _expand_default(action)
        group.set_defaults(**{action.dest: action.default})
        group._add_action(_suppressed(action))
        for child in children:
            for b in child._actions:
                if b.option_strings == action.option_strings:
                    _expand_default(b)
                    b.default = argparse.SUPPRESS
    for child in children:
        for action in inherited:
            child._add_action(_suppressed(action))
        _anywhere(child, inherited)


def _expand_default(action: argparse.Action) -> None:
    if action.help and "%(default)" in action.help:
        action.help = action.help % {"default": action.default}


def _suppressed(action: argparse.Action) -> argparse.Action:
    copy = _copy.copy(action)
    copy.default = argparse.SUPPRESS
    return copy


def _version() -> str:
    try:
        return importlib.metadata.version("groupchat-orchestrator")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


def main(argv: list[str] | None = None) -> int:
    try:
        p = parser(argv)
        args = p.parse_args(argv)
        if args.command is None:  # bare `orchestrator`: what it can do
            p.print_help()
            return 0
    except SystemExit as exc:  # argparse already printed the usage line
        return 0 if exc.code == 0 else 2
    configure(debug=args.debug, json_file=args.log_json)
    streams = sys.stdout, sys.stderr
    _show_visibly(args)
    try:
        return _run(args)
    finally:
        sys.stdout, sys.stderr = streams


def _run(args: argparse.Namespace) -> int:
    try:
        code = trio.run(args.fn, args)
        sys.stdout.flush()  # here, not at exit: a reader that left (`| head`) is then one more case below
        return code
    except BaseException as raised:  # noqa: BLE001 - sorted into exit codes below
        exc = _single(raised)
        if isinstance(exc, InputError):
            _error(f"error: {exc}")
            return 2
        if isinstance(exc, BrokenPipeError):  # `orchestrator run --json | head`: the reader left
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
        if isinstance(exc, KeyboardInterrupt):
            said = getattr(args, "interrupted", None)  # what the command has to say, e.g. where its room is kept
            sys.stdout.flush()
            print(said() if said else "interrupted", file=sys.stderr, flush=True)
            return 130
        if args.debug or not isinstance(exc, Exception):
            raise
        log.debug("crash", exc_info=True)
        _error(f"error: {type(exc).__name__}: {exc} (run with --debug for details)")
        return 3


def _show_visibly(args: argparse.Namespace) -> None:
    """What a command prints for a person goes through one sanitizer: a note, a skill's text, a tool's
    description or an error quoting a file can carry escape sequences the terminal would act on. The
    printers of `chat`, `run` and `show` sanitize each event themselves and add their own colours; output
    for programs (--json, jsonl, MCP's stdio) is written as it is, unless a person is reading it."""
    machine = getattr(args, "json", False) or getattr(args, "format", None) == "jsonl" \
        or getattr(args, "stdio", False)
    if not getattr(args, "paints", False) and (not machine or sys.stdout.isatty()):
        sys.stdout = Shown(sys.stdout)
    sys.stderr = Shown(sys.stderr)


def _error(text: str) -> None:
    """An error for a person: in a terminal, wrapped between words to its width."""
    if sys.stderr.isatty():
        width = shutil.get_terminal_size().columns
        text = "\n".join(textwrap.fill(line, width, break_long_words=False, break_on_hyphens=False)
                         for line in text.splitlines())
    print(text, file=sys.stderr)


def _single(exc: BaseException) -> BaseException:
    """The one error inside nested exception groups (trio's nurseries wrap them), if there is one."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc

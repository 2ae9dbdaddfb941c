"""`orchestrator chat`: the interactive group-chat shell: its flags, the team and
models it runs, and the terminal it must leave as it found it.

The session itself is shell.py; what it shows is view.py; how it reads lines is prompt.py.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterator

import trio

from orchestrator.cli.chat.shell import Shell
from orchestrator.cli.paths import add_trust_flag, database, default_db, open_db, user_file
from orchestrator.core.errors import InputError, RoomNotFound
from orchestrator.providers.catalog import Catalog
from orchestrator.store.contract import Store
from orchestrator.team.schema import Team
from orchestrator.trace.session import tracing

if TYPE_CHECKING:
    from orchestrator.providers.config import Config
    from orchestrator.runtime.models import Models


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `chat` (with its own `fn`) on the `orchestrator` subparsers."""
    c = subparsers.add_parser("chat", help="talk with a room interactively",
                              description="Talk with a room: a commander and its team. Lines typed while "
                                          "agents work steer them; Ctrl-C stops them all.")
    c.add_argument("--team", type=Path, metavar="TEAM.yaml",
                   help="the team (a scenario's `team:` block on its own); default: the *.md agent files "
                        "of ./agents/ if there are any and you trust this folder (see --trust), else the shipped "
                        "team")
    c.add_argument("--model", default=None, metavar="PROVIDER/MODEL",
                   help="run every agent on this model (default: with --resume, the room's own; else "
                        "$ORCHESTRATOR_MODEL)")
    c.add_argument("--db", type=database, default=default_db(),
                   help="the SQLite file or postgresql:// URL (default: %(default)s)")
    c.add_argument("--resume", metavar="ROOM", help="continue a stored room (id, unique id prefix or name)")
    c.add_argument("--scripted", metavar="SCENARIO",
                   help="play a scenario's scripted models (and team) instead of a real model (a file, or a "
                        "shipped scenario's name); "
                        "its turns are ignored: you type instead")
    c.add_argument("--workspace", type=Path, help="the agents' workspace folder (default: the current folder, "
                                                  "unless that is your home folder, / or a system folder; with "
                                                  "--scripted, the scenario's or a temporary one)")
    add_trust_flag(c, asks=True)
    c.add_argument("--name", default=None, help="the new room's name (default: chat, or the scenario's name)")
    c.add_argument("--trace", type=user_file, metavar="FILE.jsonl",
                   help="write a span (OpenTelemetry GenAI names) per line, agent turn, model call and tool "
                        "run to this file")
    c.add_argument("--evolve", action="store_true",
                   help="after each line's work, let one capped model call propose a memory entry or a skill "
                        "(staged for /proposals; never applied by itself)")
    c.set_defaults(fn=cmd_chat, own_workspace=None, paints=True)
    return c



async def cmd_chat(args: argparse.Namespace) -> int:
    """The `chat` subcommand (called by cli.main through `trio.run(args.fn, args)`)."""
    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    try:
        with _terminal_restored():
            return await _chat(args, interactive)
    except BaseExceptionGroup as group:  # a nursery's single error reads better as itself
        raise _single(group) from None


def _single(group: BaseExceptionGroup) -> BaseException:
    leaves: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for e in exc.exceptions:
                walk(e)
        elif not isinstance(exc, trio.Cancelled):
            leaves.append(exc)

    walk(group)
    return leaves[0] if len(leaves) == 1 else group


@contextmanager
def _terminal_restored() -> Iterator[None]:
    """Whatever happens to the prompt thread, the terminal leaves in the mode it came in."""
    try:
        import termios
        saved = termios.tcgetattr(0) if os.isatty(0) else None
    except (ImportError, OSError):
        saved = None
    try:
        yield
    finally:
        if saved is not None:
            try:
                termios.tcsetattr(0, termios.TCSADRAIN, saved)
            except OSError:
                pass


@contextmanager
def _patched_stdout(interactive: bool, args: argparse.Namespace) -> Iterator[None]:
    """Stray writes (logs, warnings) go above the prompt too; our own lines go through `Lines`."""
    if not interactive:
        yield
        return
    from prompt_toolkit.patch_stdout import patch_stdout

    from orchestrator.core.log import configure

    log_json, debug = getattr(args, "log_json", None), getattr(args, "debug", False)
    try:
        with patch_stdout(raw=True):
            if not log_json:
                configure(debug=debug)  # structlog keeps the stream it was given: give it the proxy
            yield
    finally:
        if not log_json:
            configure(debug=debug)


# --- models and teams -------------------------------------------------------------------------------

@dataclass
class Setup:
    team: Team | None  # None: each room keeps its stored team (--resume without --team/--scripted)
    resolve: Callable[[str], tuple[Any, str]]
    models: Callable[[str], Any] | None  # the catalog: real models' windows (None: scripted only)
    name: str
    workspace: Path | None
    scripted: Any = None  # the ScriptedProvider of --scripted, for its `sees` failures
    mcp: Any = None  # the process's MCP hub: servers start at first use and outlive rooms
    # (provider, model) -> the catalog's prices, for /usage; config overrides when a registry is loaded
    prices: Callable[[str, str], Any] = field(default_factory=lambda: Catalog().price)
    replay: Callable[[], Any] | None = None  # a fresh ScriptedProvider of the same script (one per room)
    config: Config | None = None  # config.toml as read once: every room's sandbox and skills settings


async def load_setup(args: argparse.Namespace, store: Store, stack: AsyncExitStack,
                     ask: Ask | None = None) -> Setup:
    """The team, models and workspace that `--team`, `--model`, `--scripted`, `--resume`, `--workspace` and
    `--trust` ask for (shared by `chat`, `serve` and `mcp serve`); `ask` puts a yes/no question to the person
    at the terminal (chat's, whether to trust the folder)."""
    team: Team | None = None
    scripted = replay = None
    workspace = named_workspace(args)
    name = args.name or "chat"
    record = None
    if args.resume:
        record = await store.room(args.resume)
        if record is None:
            raise RoomNotFound(f"no room {args.resume!r} in {args.db}; `orchestrator rooms --db {args.db}` "
                             "lists them")
        if not (args.model or args.scripted or args.team):  # the room goes on as it was started
            args.model = record.meta.get("model") or None
            if record.meta.get("scripted") and Path(record.meta["scripted"]).is_file():
                args.scripted = record.meta["scripted"]
    args.model = args.model or os.environ.get("ORCHESTRATOR_MODEL") or None
    if args.scripted:
        from orchestrator.providers.scripted import ScriptedProvider
        from orchestrator.scenario.loader import load_scenario
        from orchestrator.scenario.runner import prepare_workspace, reply
        from orchestrator.scenario.shipped import find_scenario

        args.scripted = find_scenario(args.scripted, folder_hint="--scripted plays one scenario file").resolve()
        scn = load_scenario(args.scripted, trusted=True)  # named on the command line
        team = scn.team

        def replay() -> ScriptedProvider:
            return ScriptedProvider({q: [reply(i) for i in items] for q, items in scn.models.items()},
                                    record=False)

        scripted = replay()
        if record is not None and record.meta.get("scripted") == str(args.scripted):  # the room this script began
            scripted.resume(await store.load(record.id, size=record.messages))
        if workspace is None and not scn.workspace:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="orchestrator-chat-"))
            workspace = prepare_workspace(scn, Path(tmp) / "workspace", tmp)
        else:
            workspace = prepare_workspace(scn, workspace, "")
        name = args.name or scn.name
    if args.team:
        from orchestrator.team.loader import load_team

        team = load_team(args.team, trusted=True)  # named on the command line
    if team is not None:
        show_widening(args, team, args.team or args.scripted, workspace)
    refused = None
    if record is None and workspace is None:
        workspace, refused = default_workspace(args)
    # The current folder's agent files make the team only for a new room with no team named.
    agents = record is None and team is None
    if refused is None:
        agents = await settle_trust(args, agents, workspace or _stored_workspace(record), ask) and agents
    models_of = team
    if record is not None:
        if models_of is None:
            import msgspec

            models_of = msgspec.convert(record.meta.get("team", {}), Team)
    elif team is None:
        from orchestrator.team.loader import default_team

        local = Path("agents")
        if agents and local.is_dir() and any(local.glob("*.md")):
            team = models_of = default_team(local)
            show_widening(args, team, "agents/", workspace)
        else:
            team = models_of = default_team()
    assert models_of is not None  # the stored room's team, the one named, or the default one
    command = getattr(args, "command", None) or "chat"  # what the user typed, for what the errors suggest
    command = "mcp serve" if command == "mcp" else command
    models = await resolver(args.model, models_of, scripted, stack, command=command)
    if refused:  # said after the model: a first start in the home folder learns both, the model first
        raise InputError(refused)
    from orchestrator.mcplink.config import configured
    from orchestrator.mcplink.servers import default_log_dir, open_hub

    hub = await stack.enter_async_context(open_hub(default_log_dir(), servers=configured(os.environ)))
    return Setup(team=team, resolve=models.resolve, models=models.catalog, prices=models.prices, name=name,
                 workspace=workspace, scripted=scripted, mcp=hub, replay=replay, config=models.config)


# --- the workspace and the folder's trust ------------------------------------------------------------------

Ask = Callable[[str], Awaitable[bool]]


def _say(args: argparse.Namespace, line: str) -> None:
    """A start-up line on stderr, said once: by `serve`'s supervisor, not again by each worker."""
    if getattr(args, "worker", None) is None:
        print(line, file=sys.stderr, flush=True)


def named_workspace(args: argparse.Namespace) -> Path | None:
    """`--workspace` as given: the user's own choice even when it is the home folder, with a warning."""
    if not getattr(args, "workspace", None):
        return None
    from orchestrator.team.trust import unsafe_workspace

    workspace = args.workspace.expanduser().resolve()
    if why := unsafe_workspace(workspace):
        _say(args, f"warning: the workspace {workspace} is {why}: agents may change any file in it "
                   "(startup files, git and app settings)")
    return workspace


def default_workspace(args: argparse.Namespace) -> tuple[Path, str | None]:
    """The workspace without --workspace: `serve`'s and `mcp serve`'s own folder, else the current folder;
    and why that folder is refused (None when it is not)."""
    if own := getattr(args, "own_workspace", None):
        from orchestrator.cli.paths import own_workspace

        return own_workspace(own), None
    from orchestrator.team.trust import unsafe_workspace

    here = Path.cwd().resolve()
    if why := unsafe_workspace(here):
        return here, (f"not starting in {here}: it is {why}, and agents may change any file in their "
                      f"workspace; pass --workspace DIR (a project folder, or --workspace {here} if you mean it)")
    return here, None


def _stored_workspace(record: Any) -> Path | None:
    stored = record.meta.get("workspace") if record is not None else None
    return Path(stored) if stored else None


async def settle_trust(args: argparse.Namespace, agents: bool, workspace: Path | None,
                       ask: Ask | None = None) -> bool:
    """Whether the current folder's agent files may make the team (`agents`: they would). A folder whose
    agent files or skills are not trusted as they stand is trusted by --trust or a yes to `ask`, and
    remembered; else what is ignored is said in one line. Each room reads the same store to know whether
    its workspace's skills count (room/skills.py `default_roots`)."""
    from orchestrator.team.trust import Survey, changes, survey, trust

    uses: dict[Path, tuple[Survey, set[str]]] = {}
    if agents:
        here = await trio.to_thread.run_sync(survey, Path.cwd())
        uses[here.folder] = (here, {"agents"})
    if workspace is not None:
        ws = await trio.to_thread.run_sync(survey, workspace)
        uses.setdefault(ws.folder, (ws, set()))[1].add("skills")
    pending = [(s, kinds, changed) for s, kinds in uses.values()
               if any(getattr(s, k) for k in kinds) and (changed := changes(s)) is not None]
    if not pending:
        return True
    if getattr(args, "trust", False) or (ask is not None and await ask(_question(pending))):
        for s, _, _ in pending:
            try:
                trust(s)
            except OSError as exc:
                raise InputError(f"cannot remember the trust in {exc.filename}: {exc.strerror}") from None
        return True
    _say(args, _ignored(pending, chat=getattr(args, "command", "") == "chat"))
    return not any("agents" in kinds and s.agents for s, kinds, _ in pending)


def _question(pending: list) -> str:
    from orchestrator.team.loader import default_team
    from orchestrator.team.trust import widening

    lines = []
    for s, _, changed in pending:
        names = list(s.files)
        listed = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        since = f" ({'; '.join(changed[:3])} since you trusted it)" if changed else ""
        lines.append(f"{s.folder} configures the orchestrator: {listed}{since}")
    if any("agents" in kinds and s.agents for s, kinds, _ in pending):
        try:
            if sets := widening(default_team(Path("agents")), None):
                lines.append(f"Its agent files widen the shell sandbox: {sets}.")
        except InputError:
            pass  # a file that does not load is refused with its own message once trusted
    lines.append("Whoever wrote the folder wrote these. Trust them (their sandbox, tools and skills apply)? [y/N] ")
    return "\n".join(lines)


def _ignored(pending: list, *, chat: bool) -> str:
    """The one line an untrusted folder gets: what was ignored and how to trust it."""
    def count(files: dict) -> str:
        return f"{len(files)} file{'s' * (len(files) != 1)}"

    parts, shipped = [], False
    for s, kinds, changed in pending:
        what = []
        if "agents" in kinds and s.agents:
            what.append(f"agents/ ({count(s.agents)})")
            shipped = True
        if "skills" in kinds and s.skills:
            what.append(f".agents/skills ({count(s.skills)})")
        since = f", {changed[0]} since you trusted it" if changed else ""
        parts.append(f"{' and '.join(what)} of {s.folder} (not trusted{since})")
    team = ": the shipped team runs" if shipped else ""
    how = "pass --trust, or answer y when chat asks in a terminal" if chat else "pass --trust"
    return f"ignored {'; '.join(parts)}{team}; to use them, {how}"


def show_widening(args: argparse.Namespace, team: Team, source: Any, workspace: Path | None) -> None:
    """A file the user named applies, but what it lets commands do beyond the sandbox is said first."""
    from orchestrator.team.trust import widening

    if sets := widening(team, workspace):
        _say(args, f"{source} widens the shell sandbox: {sets}")


async def resolver(model: str | None, team: Team, scripted: Any, stack: AsyncExitStack,
                   command: str = "chat") -> Models:
    """What the agents run on (runtime/models.py), with what the shell says when a flag is missing: `--model`
    puts every agent on that model; otherwise each agent's own model string is routed (`scripted` and "" to
    the --scripted script), and an agent without a model needs `--model`. Everything is resolved now, so a
    missing key is reported before any room exists."""
    from orchestrator.runtime.models import models_for

    strings = {a.model for a in (team.commander, *team.agents)}
    if scripted is None and model is None and "scripted" in strings:
        raise InputError("this room's agents play a scenario's script: resume it with --scripted SCENARIO "
                         "(the scenario it was started with), or put them on a real model with --model "
                         "PROVIDER/MODEL")
    models = await models_for(stack, model=model, scripted=scripted, check=strings)
    if model is None and scripted is None and "" in strings:
        assert models.registry is not None  # no script: the registry was set up
        raise _which_model(models.registry, command)
    return models


def _which_model(registry: Any, command: str = "chat") -> InputError:
    """No model was chosen: what to set, or what is there to choose from, in the words of the command the user
    typed (`chat`, `serve`, `mcp serve`)."""
    sources = registry.config.sources
    configured = [n for n, src in sources.items() if src.explicit and src.candidates]
    if not any(src.explicit for src in sources.values()):
        return InputError(
            f"{registry.config.nothing_configured()}.\n"
            "Then choose the model with --model PROVIDER/MODEL (or ORCHESTRATOR_MODEL), e.g. "
            f"`orchestrator {command} --model ollama/qwen3` for a local Ollama (`ollama serve`; set OLLAMA_HOST "
            f"if it is not on localhost:11434). To try {'the shell' if command == 'chat' else 'it'} without any "
            f"key: `orchestrator {command} --scripted tutor-handoff`")
    example = f"{configured[0]}/MODEL" if configured else "PROVIDER/MODEL"
    return InputError(f"which model should the agents use? pass --model PROVIDER/MODEL or set ORCHESTRATOR_MODEL "
                      f"(configured: {', '.join(configured) or 'none usable'}; e.g. --model {example})")


async def _chat(args: argparse.Namespace, interactive: bool) -> int:
    async with AsyncExitStack() as stack:
        store = await open_db(args.db, create=not args.resume)
        stack.push_async_callback(store.close)
        # The trust question is asked before the prompt takes the terminal over.
        setup = await load_setup(args, store, stack, ask=_ask_in_terminal if interactive else None)
        await stack.enter_async_context(tracing(args.trace))
        with _patched_stdout(interactive, args):
            return await Shell(args, store, setup, interactive).run()


async def _ask_in_terminal(question: str) -> bool:
    def read() -> str:
        try:
            return input(question)
        except EOFError:
            return ""

    answer = await trio.to_thread.run_sync(read, abandon_on_cancel=True)  # Ctrl-C leaves at once
    return answer.strip().lower() in ("y", "yes")

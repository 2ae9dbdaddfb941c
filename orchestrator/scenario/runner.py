"""Plays a scenario through a real Room: workspace, scripted models, user turns, restarts, checks.

It drives the room exactly as the shell does (post, stop, idle, reopen); only the model is scripted.
"""
from __future__ import annotations

import tempfile
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import trio

from orchestrator.acp import homes
from orchestrator.core.errors import FATAL_KINDS, InputError
from orchestrator.core.events import Check, ErrorEvent, Event
from orchestrator.core.types import Usage
from orchestrator.core.retry import RetryPolicy
from orchestrator.mcplink.servers import Hub, open_hub
from orchestrator.providers.base import Provider
from orchestrator.providers.catalog import Catalog as ModelCatalog
from orchestrator.providers.registry import Registry
from orchestrator.providers.scripted import Reply, ScriptedProvider
from orchestrator.providers.config import Config, load_config
from orchestrator.room.room import Catalog, Room
from orchestrator.room.skills import shipped
from orchestrator.scenario.expect import Outcome, check
from orchestrator.scenario.schema import Scenario, ScriptItem
from orchestrator.skills.library import stand_in_roots
from orchestrator.store.backends import open_store
from orchestrator.store.contract import Store
from orchestrator.store.usage import PriceOf, UsageLog, UsageReport
from orchestrator.team.trust import unsafe_workspace, workspace_trusted
from orchestrator.tools.base import ToolError
from orchestrator.tools.sandbox import write_own
from orchestrator.tools.session import ToolSession


@dataclass
class Result:
    check: Check
    outcome: Outcome
    room_id: str
    error_expected: bool
    usage: UsageReport  # every room the run opened, priced
    @property
    def failed_run(self) -> bool:
        """The run itself failed (an error no expectation asked for): exit code 3."""
        return bool(self.outcome.errors()) and not self.error_expected


def reply(item: ScriptItem) -> Reply:
    fail = item.failure()
    usage = Usage(item.usage.input, item.usage.output, item.usage.cached) if item.usage else None
    return Reply(say=item.say, think=item.think, calls=item.tool_calls(), delay=item.delay,
                 error=fail.kind if fail else None, retry_after=fail.retry_after if fail else None,
                 sees=item.sees, not_sees=item.not_sees, usage=usage, cut=item.cut)


def prepare_workspace(scn: Scenario, override: Path | None, stack_dir: str) -> Path:
    if override is not None:
        ws = override
    elif scn.workspace:
        ws = (scn.path.parent if scn.path else Path.cwd()) / scn.workspace
        if why := unsafe_workspace(ws):  # a file's key is not the user saying so: the flag is
            raise InputError(f"{scn.path or 'the scenario'}: workspace {scn.workspace!r} is {why}; give it a "
                             f"project folder, or pass --workspace {ws.resolve()} if you mean it")
    else:
        ws = Path(stack_dir) / "workspace"
    ws.mkdir(parents=True, exist_ok=True)
    session = ToolSession(ws)
    for rel, text in scn.files.items():
        try:  # a kept workspace may hold links an agent planted: none leads these writes out of it
            write_own(session, rel, text.encode())
        except ToolError as exc:
            raise InputError(f"{scn.path or 'the scenario'}: files: {exc}") from None
    return ws.resolve()


async def run_scenario(scn: Scenario, *, db: Path | str | None = None, workspace: Path | None = None,
                       model: Resolver | None = None, on_event: Callable[[Event], None] | None = None,
                       retry: RetryPolicy = RetryPolicy(), models: Catalog | None = None,
                       prices: PriceOf | None = None, config: Config | None = None) -> Result:
    """Run every turn, then check `expect`. `model` replaces the scripted model for every agent;
    `models` gives real models' windows (the scripted model keeps the default), `prices` what
    they cost (default: the built-in catalog's list prices); `config`: config.toml as the program read it
    (default: read once here, for every room the run opens)."""
    events: list[Event] = []

    def sink(ev: Event) -> None:
        events.append(ev)
        if on_event:
            on_event(ev)

    scripted = ScriptedProvider({q: [reply(i) for i in items] for q, items in scn.models.items()})

    def resolve(model_string: str) -> tuple[Provider, str]:
        # A registry routes each agent by its own model string, so scripted agents keep their script;
        # any other resolver (--model) takes every agent.
        if model_string in ("scripted", "") and (model is None or isinstance(model, Registry)):
            return scripted, "scripted"
        if model is not None:
            return model(model_string)
        raise InputError(f"model {model_string!r}: no provider registry was given to this run; "
                         f"use `model: scripted` or run it through `orchestrator run`")

    with tempfile.TemporaryDirectory(prefix="orchestrator-") as tmp:
        ws = prepare_workspace(scn, workspace, tmp)
        store = await open_store(db or Path(tmp) / "room.db")
        try:
            async with AsyncExitStack() as stack:
                # One hub for the whole run, so a restart turn reopens the room, not the MCP servers.
                hub = await stack.enter_async_context(open_hub(Path(tmp) / "mcp")) if scn.team.mcp_servers else None
                # The scenario's own workspace (fresh, or its `workspace:` key) is the named file's; a folder
                # given with --workspace was written by whoever wrote it: its skills need the folder's trust.
                project = workspace is None or await trio.to_thread.run_sync(workspace_trusted, ws)
                if config is None:
                    config = await trio.to_thread.run_sync(load_config)
                rooms, problems = await _play(scn, store, resolve, ws, sink, retry, models, hub, config, project)
                room_id = rooms[-1]
            record = await store.room(room_id)
            outcome = Outcome(messages=await store.load(room_id), events=events, requests=scripted.requests,
                              tasks=await store.tasks(room_id), floor=record.floor if record else "", workspace=ws)
            fails = scripted.failures + problems + check(scn.expect, outcome, scripted=model is None)
            if model is None:
                fails += [f"models: {q}: {n} scripted response(s) were never used" for q, n in scripted.remaining().items()]
            if scn.expect.error is None:
                fails += [f"error: {e.message}" for e in outcome.errors()]
            result = Check(ts=time.time(), room=room_id, ok=not fails, failures=fails)
            sink(result)
            usage = await UsageLog(store).report(rooms, prices or ModelCatalog().price)
            return Result(result, outcome, room_id, scn.expect.error is not None, usage)
        finally:
            try:
                if db is None:  # the temporary database goes with the folder: its rooms' agents' HOMEs too
                    await homes.forget_store(store)
            finally:
                await store.close()


Resolver = Callable[[str], tuple[Provider, str]]


async def _play(scn: Scenario, store: Store, resolve, ws: Path, sink, retry: RetryPolicy,
                models: Catalog | None, hub: Hub | None, config: Config, project: bool = True) -> tuple[list[str], list[str]]:
    """Returns the ids of the rooms it opened, in order, and the problems found on the way."""
    turns = list(scn.turns)
    rooms: list[str] = []
    can_confirm = any(t.confirm for t in turns)  # someone answers only if the scenario does
    base = scn.path.parent if scn.path else Path.cwd()
    skill_roots = [r for r in stand_in_roots(ws, {k: (base / v).resolve() for k, v in scn.skill_roots.items()},
                                             shipped=shipped()) if project or r.label != "project"]
    problems: list[str] = []
    fatal: list[ErrorEvent] = []

    def watch(ev: Event) -> None:
        if isinstance(ev, ErrorEvent) and ev.error_class in FATAL_KINDS:
            fatal.append(ev)  # a missing model or a dead address: no later turn can do better
        sink(ev)

    room_id: str | None = None
    i = 0
    while True:
        fresh = False
        async with AsyncExitStack() as stack:
            if room_id is None:
                room = await stack.enter_async_context(
                    Room.create(store, scn.team, resolve, name=scn.name, workspace=ws, retry=retry, on_event=watch,
                                can_confirm=can_confirm, models=models, mcp=hub, skill_roots=skill_roots,
                                config=config))
            else:
                room = await stack.enter_async_context(Room.open(store, room_id, resolve, retry=retry, on_event=watch,
                                                                 can_confirm=can_confirm, models=models, mcp=hub,
                                                                 skill_roots=skill_roots, config=config))
            room_id = room.id
            if room_id not in rooms:
                rooms.append(room_id)
            last = trio.current_time()
            while i < len(turns):
                turn = turns[i]
                i += 1
                if turn.after is None:
                    await _settle(room, turn, problems)
                else:
                    await trio.sleep_until(last + turn.after)
                last = trio.current_time()
                if fatal:
                    await _settle(room, None, problems)
                    return rooms, problems
                if turn.restart or turn.new_room:
                    await _settle(room, None, problems)
                    fresh = turn.new_room
                    break
                if turn.stop:
                    await room.stop()
                elif turn.user is not None:
                    await room.post(turn.user, skill=turn.skill)
                elif turn.proposals:
                    await room.review(turn.proposals == "accept")
                elif turn.confirm:
                    if room.asking:
                        room.answer(turn.confirm)
                    else:
                        problems.append(f"turns[{i - 1}]: confirm: no confirmation request was open")
            else:
                await _settle(room, None, problems)
                return rooms, problems
        if fresh:
            room_id = None


async def _settle(room: Room, turn, problems: list[str]) -> None:
    """Wait until the room is idle, or, before a `confirm` turn, until it asks. A question nobody
    scripted an answer for is denied, and the scenario fails."""
    while await room.question_or_idle():
        if turn is not None and turn.confirm:
            return
        problems.append("confirm: the room asked for a confirmation the scenario did not answer; it was denied")
        room.answer("deny")

"""`orchestrator mcp serve`: the team as an MCP server over stdio, so Claude Desktop, an IDE or another
agent can use it: `ask_team` (with progress notifications), `list_rooms`, `read_room`.

Imported only by that command (it loads the `mcp` SDK). Rooms live in the command's own nursery, not
in a request: a client's cancellation stops the room through the group stop and leaves it usable.
"""
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, TextContent, ToolAnnotations

from orchestrator.core.errors import InputError
from orchestrator.core.events import Event, MessageEvent, ToolStart
from orchestrator.core.types import Message
from orchestrator.room.room import USER, Room
from orchestrator.store.db import Store

INSTRUCTIONS = ("A team of AI agents under a commander. Give `ask_team` a line as you would type it in a group "
                "chat; it answers when the team is done. Reuse the returned room id to continue a conversation.")
STOPPED = "cancelled by the MCP client"


@dataclass
class _Held:
    room: Room
    scope: trio.CancelScope
    listeners: list = field(default_factory=list)  # progress senders of the calls now waiting on this room


class Rooms:
    """The rooms this server has opened, each held open by a task of the server's nursery."""

    def __init__(self, store: Store, setup: Any, nursery: trio.Nursery, mcp_hub: Any):
        self.store, self.setup, self.nursery, self.hub = store, setup, nursery, mcp_hub
        self.held: dict[str, _Held] = {}
        self._lock = trio.Lock()

    async def room(self, ref: str | None) -> _Held:
        async with self._lock:
            if ref is not None:
                record = await self.store.room(ref)
                if record is None:
                    raise InputError(f"no room {ref!r}; list_rooms shows the rooms there are")
                if record.id in self.held:
                    return self.held[record.id]
            held = await self.nursery.start(self._hold, ref)
            self.held[held.room.id] = held
            return held

    async def _hold(self, ref: str | None, task_status) -> None:
        common = dict(models=self.setup.models, mcp=self.hub)
        with trio.CancelScope() as scope:
            if ref is None:
                opened = Room.create(self.store, self.setup.team, self.setup.resolve, name=self.setup.name,
                                     workspace=self.setup.workspace, **common)
            else:
                opened = Room.open(self.store, ref, self.setup.resolve, team=self.setup.team, **common)
            async with opened as room:
                held = _Held(room, scope)
                room.subscribe(lambda ev: _fan_out(held, ev))
                task_status.started(held)
                await trio.sleep_forever()


def _fan_out(held: _Held, ev: Event) -> None:
    for send in list(held.listeners):
        try:
            send.send_nowait(ev)
        except trio.WouldBlock:  # a slow client misses a progress step, never the answer
            pass


def _progress_line(ev: Event) -> str | None:
    if isinstance(ev, ToolStart):
        return f"{ev.agent}: {ev.name}"
    if isinstance(ev, MessageEvent) and ev.kind in ("text", "task", "notice") and USER in ev.visible_to:
        first = ev.text.strip().splitlines()[0] if ev.text.strip() else ""
        return f"{ev.author}: {first[:120]}"
    return None


def _answer(messages: list[Message], after: int) -> list[dict[str, Any]]:
    """What the user would have seen after their line: every text and notice addressed to them."""
    return [{"seq": m.seq, "author": m.author, "kind": m.kind, "text": m.text} for m in messages
            if m.seq > after and USER in m.visible_to and m.kind in ("text", "notice") and m.text.strip()]


def _result(data: dict[str, Any], text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def _error(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def build(rooms: Rooms) -> MCPServer:
    server = MCPServer("orchestrator", instructions=INSTRUCTIONS)

    @server.tool(description="Post a line to the team (a new room, or the room named) and return the room's "
                             "answer once it is idle. Progress notifications report what the agents do.",
                 structured_output=False)
    async def ask_team(line: str, ctx: Context, room: str | None = None) -> CallToolResult:
        if not line.strip():
            return _error("`line` is empty: say what the team should do")
        try:
            held = await rooms.room(room)
        except InputError as exc:
            return _error(str(exc))
        send, receive = trio.open_memory_channel(256)
        held.listeners.append(send)
        answered = False
        try:
            msg = await held.room.post(line)
            async with trio.open_nursery() as progress:
                progress.start_soon(_report, receive, ctx)
                await held.room.idle()
                progress.cancel_scope.cancel()
            answered = True
        finally:
            held.listeners.remove(send)
            if not answered:  # the client cancelled (or the call broke): the group stop, shielded to complete
                with trio.CancelScope(shield=True):
                    await held.room.stop(STOPPED)
        said = _answer(await rooms.store.load(held.room.id), msg.seq)
        text = "\n\n".join(f"{m['author']}: {m['text']}" for m in said) or "(the team said nothing)"
        return _result({"room": held.room.id, "messages": said, "answer": said[-1]["text"] if said else ""},
                       f"{text}\n\n[room {held.room.id}]")

    @server.tool(description="The rooms in this server's database, newest last.",
                 annotations=ToolAnnotations(readOnlyHint=True), structured_output=False)
    async def list_rooms() -> CallToolResult:
        listed = [{"id": r.id, "name": r.name, "floor": r.floor, "messages": r.messages,
                   "busy": r.id in rooms.held and rooms.held[r.id].room.busy} for r in await rooms.store.rooms()]
        lines = [f"{r['id']}  {r['name']}  floor={r['floor']}  {r['messages']} messages"
                 + ("  (working)" if r["busy"] else "") for r in listed]
        return _result({"rooms": listed}, "\n".join(lines) or "(no rooms yet)")

    @server.tool(description="What the user sees of a room: its texts and notices after `since_seq`.",
                 annotations=ToolAnnotations(readOnlyHint=True), structured_output=False)
    async def read_room(room: str, since_seq: int = 0) -> CallToolResult:
        record = await rooms.store.room(room)
        if record is None:
            return _error(f"no room {room!r}; list_rooms shows the rooms there are")
        said = _answer(await rooms.store.load(record.id), since_seq)
        text = "\n".join(f"[{m['seq']}] {m['author']}: {m['text']}" for m in said) or "(nothing new)"
        return _result({"room": record.id, "messages": said}, text)

    return server


async def _report(receive, ctx: Context) -> None:
    step = 0
    async for ev in receive:
        if (line := _progress_line(ev)) is not None:
            step += 1
            await ctx.report_progress(step, None, line)


async def serve(args, setup_fn) -> int:
    """Serve until the client closes stdin. `setup_fn(args, store, stack)` builds the team, the models
    and the MCP hub as `chat` does (the same --team / --model / --scripted rules)."""
    async with AsyncExitStack() as stack:
        db = Path(args.db)
        db.parent.mkdir(parents=True, exist_ok=True)
        store = await Store.open(db)
        stack.push_async_callback(store.close)
        setup = await setup_fn(args, store, stack)
        async with trio.open_nursery() as nursery:
            rooms = Rooms(store, setup, nursery, setup.mcp)
            await build(rooms).run_stdio_async()
            nursery.cancel_scope.cancel()
    return 0

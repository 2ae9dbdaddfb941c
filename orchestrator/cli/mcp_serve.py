"""`orchestrator mcp serve`: the team as an MCP server over stdio, so Claude Desktop, an IDE or another
agent can use it: `ask_team` (with progress notifications), `list_rooms`, `read_room`.

Imported only by that command (it loads the `mcp` SDK). Rooms live on a `RoomHost`, not in a request:
a client's cancellation stops the room through the group stop and leaves it usable.
"""
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, AsyncIterator

import trio
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, TextContent, ToolAnnotations

from orchestrator.core.errors import InputError, RoomNotFound
from orchestrator.core.events import Event, MessageEvent, ToolStart
from orchestrator.core.types import Message
from orchestrator.room.host import RoomHost
from orchestrator.room.room import MAX_LINE, USER, Room, checked_line
from orchestrator.cli.paths import open_db
from orchestrator.cli.words import count
from orchestrator.store.contract import Store

INSTRUCTIONS = ("A team of AI agents under a commander. Give `ask_team` a line as you would type it in a group "
                "chat; it answers when the team is done. Reuse the returned room id to continue a conversation.")
STOPPED = "cancelled by the MCP client"


class Rooms:
    """The server's rooms, on a `RoomHost`: opened when a call uses them, closed again once idle. A call's
    progress comes from the events of its room, fanned out to every call now waiting on it."""

    def __init__(self, store: Store, setup: Any):
        self.store, self.setup = store, setup
        self.host: RoomHost | None = None  # set once the host is open
        self.listeners: dict[str, list] = {}  # room id -> progress senders of the calls waiting on it

    def opened(self, room: Room) -> None:
        room.subscribe(lambda ev: _fan_out(self.listeners.get(room.id, ()), ev))

    @asynccontextmanager
    async def room(self, ref: str | None) -> AsyncIterator[Room]:
        host = self.host
        assert host is not None  # tools are served only once the host is open
        if ref is not None and ref not in host.rooms and await self.store.room(ref) is None:
            raise RoomNotFound(f"no room {ref!r}; list_rooms shows the rooms there are")
        async with host.room(ref, name=self.setup.name, workspace=self.setup.workspace) as room:
            yield room

    def busy(self, room_id: str) -> bool:
        assert self.host is not None  # tools are served only once the host is open
        room = self.host.rooms.get(room_id)
        return room is not None and room.busy


def _fan_out(listeners, ev: Event) -> None:
    for send in list(listeners):
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


def _answer(messages: list[Message], after: int, *, lines: bool = False) -> list[dict[str, Any]]:
    """What the user would have seen after `after`: every text and notice addressed to them, and with `lines`
    their own lines too (a transcript; an answer leaves out the line it answers)."""
    kinds = ("text", "notice", "user") if lines else ("text", "notice")
    return [{"seq": m.seq, "author": m.author, "kind": m.kind, "text": m.text} for m in messages
            if m.seq > after and USER in m.visible_to and m.kind in kinds and m.text.strip()]


def _result(data: dict[str, Any], text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def _error(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def build(rooms: Rooms) -> MCPServer:
    server = MCPServer("orchestrator", instructions=INSTRUCTIONS)

    @server.tool(description="Post a line to the team (a new room, or the room named) and return the room's "
                             "answer once it is idle. Progress notifications report what the agents do. "
                             f"A line holds at most {MAX_LINE:,} characters.",
                 structured_output=False)
    async def ask_team(line: str, ctx: Context, room: str | None = None) -> CallToolResult:
        if not line.strip():
            return _error("`line` is empty: say what the team should do")
        try:
            checked_line(line)
        except InputError as exc:
            return _error(str(exc))
        send, receive = trio.open_memory_channel(256)
        try:
            async with rooms.room(room) as opened:
                listeners = rooms.listeners.setdefault(opened.id, [])
                listeners.append(send)
                answered = False
                try:
                    msg = await opened.post(line)
                    async with trio.open_nursery() as progress:
                        progress.start_soon(_report, receive, ctx)
                        await opened.idle()
                        # What happened before the answer is still reported (on a busy machine the reporter
                        # lags): no more come, and it ends once it has sent what is queued.
                        listeners.remove(send)
                        send.close()
                    answered = True
                finally:
                    if send in listeners:
                        listeners.remove(send)
                    if not listeners:
                        del rooms.listeners[opened.id]
                    if not answered:  # the client cancelled (or the call broke): the group stop, shielded
                        with trio.CancelScope(shield=True):
                            await opened.stop(STOPPED)
        except InputError as exc:
            return _error(str(exc))
        said = _answer(await rooms.store.load(opened.id), msg.seq)
        text = "\n\n".join(f"{m['author']}: {m['text']}" for m in said) or "(the team said nothing)"
        return _result({"room": opened.id, "messages": said, "answer": said[-1]["text"] if said else ""},
                       f"{text}\n\n[room {opened.id}]")

    @server.tool(description="The rooms in this server's database, newest last.",
                 annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
    async def list_rooms() -> CallToolResult:
        records = await rooms.store.rooms()
        listed = [{"id": r.id, "name": r.name, "floor": r.floor, "messages": r.messages,
                   "busy": rooms.busy(r.id)} for r in records]
        lines = [f"{r.id}  {r.name}  floor={r.floor}  {count(r.messages, 'message')}"
                 + ("  (working)" if entry["busy"] else "") for r, entry in zip(records, listed)]
        return _result({"rooms": listed}, "\n".join(lines) or "(no rooms yet)")

    @server.tool(description="What the user sees of a room after `since_seq`: the user's lines, the agents' "
                             "texts and the room's notices.",
                 annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
    async def read_room(room: str, since_seq: int = 0) -> CallToolResult:
        record = await rooms.store.room(room)
        if record is None:
            return _error(f"no room {room!r}; list_rooms shows the rooms there are")
        said = _answer(await rooms.store.load(record.id), since_seq, lines=True)
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
        store = await open_db(args.db)
        stack.push_async_callback(store.close)
        setup = await setup_fn(args, store, stack)
        rooms = Rooms(store, setup)
        async with RoomHost.open(store, setup.resolve, team=setup.team, models=setup.models, mcp=setup.mcp,
                                 config=setup.config, on_open=rooms.opened) as rooms.host:
            await build(rooms).run_stdio_async()
            for room in list(rooms.host.rooms.values()):  # the client left: nobody waits for that work
                if room.busy:
                    await room.stop("the MCP client left")
    return 0

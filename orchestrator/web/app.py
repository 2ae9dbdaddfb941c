"""The web pages and the HTTP API of `orchestrator serve`: the room list, a room's page, its live event
stream (SSE), and the few writes a person makes: post a line, stop the room, answer a question.

The pages are shells with no room data in them, served to anyone who can reach the server; everything a room
holds comes through the API, and every call needs `Authorization: Bearer TOKEN`. There is no cookie, and the
token is never accepted in a query string (web/guard.py refuses one): the printed address carries it in its
fragment (`/#token=...`), which no browser sends to a server or puts in a Referer, and the page's script
keeps it for that tab (web/static/auth.js). So nothing a browser sends on its own, to this server or to any
other page the user opens (another port of 127.0.0.1 included), carries the token. The event stream takes the
same header: the page reads it with fetch() and a ReadableStream, not EventSource (which cannot send one), and
not with a ticket in the stream's URL, which would put a secret in a URL again and, with --workers N, would
have to be known to whichever worker the stream's connection lands on.

A question (an agent asking to run something risky) is answered by naming it (`request_id`), only while it
is open in that room. Nothing the room's own agents can reach holds the token: their commands run in the
jail with a fresh environment (tools/process.py `command_env`: PATH, HOME, LANG, TERM, never this process's
own) in their own PID namespace (so not /proc of this process either); the token is not in any environment
(`--workers` hands it to each worker through an inherited pipe, read once and closed), not in argv, not in a
cookie, and on disk only in the file of the user's alone that `[serve] token_file` names, if it does (in the
home folder, which the jail hides); and the workspace is not served (only this package's static/ folder is). A command
run without the sandbox (`sandbox: off`) is asked about first, every one. An agent
that starts a server of its own and gets the user to open it gains a page of another origin, which the
guard refuses in every way a browser lets it call.

With --workers N a browser never notices which worker its connection landed on: what only the worker running a
room knows (its agents' view, whether it is busy and its questions, every event of its stream: text as it
streams, turns, tasks, tool calls) is asked of that worker over its private socket and passed back as it comes
(web/peers.py); the room list shows each room as its worker does. Lines, stops and answers go through the
room's inbox instead (room/leased.py): stored before they are acknowledged, whichever worker runs the room by
then. Only when the worker running a room cannot be asked is the room read from the store.
"""
from __future__ import annotations

import hmac
import os
import time
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import msgspec
import trio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import Receive, Scope, Send

from orchestrator.core.errors import InputError, RoomNotFound
from orchestrator.core.events import message_event
from orchestrator.core.types import ImageBlock, ToolResultBlock
from orchestrator.providers.catalog import Catalog
from orchestrator.store.usage import UsageLog
from orchestrator.room.room import checked_line
from orchestrator.team.schema import Team
from orchestrator.web.feed import Key, frame, parse_id
from orchestrator.web.guard import Guard, Hosts, navigation, page_for
from orchestrator.web.host import Elsewhere, Host
from orchestrator.web.peers import PEER, Peers

HERE = Path(__file__).parent
PING_SECONDS = 15.0
FOLLOW_SECONDS = 0.2  # how often a stream of a room run by another process looks for new stored messages
OWNER_SECONDS = 1.0  # ...and whether the room changed hands (so that the page gets every event again)
FLUSH_SECONDS = 0.1  # a subscriber gets at most ~10 writes a second: live to the eye, cheap for the room
ANSWERS = ("once", "run", "deny")
# Open event streams one worker process serves: a page holds one, so these are many tabs; past them a
# stream is refused (429) rather than let a runaway script hold the process's memory and store reads.
MAX_ROOM_STREAMS = 32
MAX_STREAMS = 256


class Busy(InputError):
    """What only the room's own process can do, asked of another one (409)."""


class Unopened(InputError):
    """An answer to a question that is not open in that room (409)."""


class Crowded(InputError):
    """Too many event streams open (429)."""


class Line(msgspec.Struct):
    text: str


class NewRoom(msgspec.Struct):
    name: str = "room"


class Reply(msgspec.Struct):
    answer: str
    request_id: str  # always named: an answer never lands on whichever question happens to be open


def build_app(host: Host, token: str, hosts: Hosts, *, peers: Peers | None = None, ping: float = PING_SECONDS,
              flush: float = FLUSH_SECONDS) -> Guard:
    """`peers`: the other workers of this server (None: this process is the only one)."""
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    streams: dict[str, int] = {}  # room -> event streams open on it in this process

    def authorized(request: Request) -> bool:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())

    def refused(request: Request) -> Response:
        said = ("this needs the token printed by `orchestrator serve`: open the address it printed (the token is in "
                "its #token= fragment), or send `Authorization: Bearer TOKEN`")
        if navigation(request.scope):  # a person opened an API address: a page that says what to do
            return Response(page_for(401, said), 401, media_type="text/html")
        return _json({"error": said}, 401)

    def page(name: str):
        async def endpoint(request: Request) -> Response:
            # The same shell for everyone and every room id: what a room holds comes through the API.
            return templates.TemplateResponse(request, name, {})

        return endpoint

    def api(fn):
        """Token checked, bad input answered in one line (400), a missing room as 404."""
        async def endpoint(request: Request) -> Response:
            if not authorized(request):
                return refused(request)
            try:
                return await fn(request)
            except (Busy, Unopened) as exc:
                return _json({"error": str(exc)}, 409)
            except Crowded as exc:
                return Response(msgspec.json.encode({"error": str(exc)}), 429, media_type="application/json",
                                headers={"Retry-After": "5"})
            except RoomNotFound as exc:
                return _json({"error": str(exc)}, 404)
            except InputError as exc:
                return _json({"error": str(exc)}, 400)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                return _json({"error": f"bad request body: {exc}"}, 400)

        return endpoint

    def owned(fn):
        """A read of a room that only the worker running it can answer in full: asked of that worker when it
        is another (inside `api`, so only a request that carries the token is ever passed on)."""
        async def endpoint(request: Request) -> Response:
            if peers is not None and PEER not in request.scope:
                if (answer := await peers.forward(request, host, request.path_params["room_id"])) is not None:
                    return answer
            return await fn(request)

        return endpoint

    async def rooms(request: Request) -> Response:
        summaries = await host.rooms()
        if PEER in request.scope:  # another worker asks: the rooms this one runs, as only it knows them
            return _json([s for s in summaries if s.open])
        if peers is not None:
            summaries = await peers.listed(request, host, summaries)
        return _json(summaries)

    async def create_room(request: Request) -> Response:
        body = msgspec.json.decode(await request.body() or b"{}", type=NewRoom)
        name = body.name.strip()
        if not name or len(name) > 100:
            raise InputError("a room name is 1 to 100 characters")
        async with host.room(None, name=name) as hosted:
            # Elsewhere: created, then taken by another process before it opened here
            room_id = hosted.id if isinstance(hosted, Elsewhere) else hosted.room.id
            return _json({"id": room_id, "name": name, "url": f"/rooms/{room_id}"}, 201)

    async def state(request: Request) -> Response:
        async with host.room(request.path_params["room_id"]) as hosted:
            if isinstance(hosted, Elsewhere):  # run by another process: what the store knows
                record = hosted.record
                team = msgspec.convert(record.meta.get("team", {}), Team)
                members = [{"name": a.name, "description": a.description, "anonymous": False}
                           for a in (team.commander, *team.agents)]
                return _json({"id": record.id, "name": record.name, "floor": record.floor, "busy": False,
                              "members": members, "tasks": await host.store.tasks(record.id), "asking": [],
                              "elsewhere": True})
            room = hosted.room
            return _json({
                "id": room.id, "name": room.record.name, "floor": room.floor, "busy": room.busy,
                "members": [{"name": n, "description": m.spec.description, "anonymous": m.anonymous}
                            for n, m in room.members.items()],
                "tasks": list(room.ledger.tasks.values()), "asking": room.asking,
            })

    async def events(request: Request) -> Response:
        record = await host.store.room(request.path_params["room_id"])
        if record is None:
            raise RoomNotFound(f"no room {request.path_params['room_id']!r} in this database")
        after = parse_id(request.headers.get("last-event-id") or request.query_params.get("after"))
        if sum(streams.values()) >= MAX_STREAMS:
            raise Crowded(f"this server process has {MAX_STREAMS} event streams open, its most; close a page "
                          "or try again later")
        if streams.get(record.id, 0) >= MAX_ROOM_STREAMS:
            raise Crowded(f"room {record.id} has {MAX_ROOM_STREAMS} event streams open here, its most; close "
                          "a page of it or try again later")
        streams[record.id] = streams.get(record.id, 0) + 1

        def release() -> None:
            if (left := streams[record.id] - 1) > 0:
                streams[record.id] = left
            else:
                del streams[record.id]

        async def stream() -> AsyncIterator[bytes]:
            yield b"retry: 1000\n\n"
            point = after
            while True:
                async with host.room(record.id) as hosted:
                    if not isinstance(hosted, Elsewhere):
                        async for data in feeding(hosted, point):
                            yield data
                        return
                    seq = start = point[0] if point else 0
                    async for seq, data in following(record.id, start):
                        yield data
                # It changed hands. Taken here: its feed goes on in this stream, after the last event sent.
                if await host.holder(record.id) != host.leased.host:
                    return  # another worker runs it: the page resumes by Last-Event-ID, which reaches that one
                point = (seq, 0) if point is None or seq > point[0] else point

        return _Counted(stream(), release, media_type="text/event-stream", headers={"X-Accel-Buffering": "no"})

    async def following(room_id: str, seq: int) -> AsyncIterator[tuple[int, bytes]]:
        """Another process runs the room and cannot be asked: its messages after `seq` as they are stored (no
        deltas between them), each batch with the seq it ends at, until the room changes hands."""
        said = looked = trio.current_time()
        holder = await host.holder(room_id)
        while True:
            if trio.current_time() - looked >= OWNER_SECONDS:
                looked = trio.current_time()
                if await host.holder(room_id) != holder:
                    return
            if batch := await host.store.read(room_id, seq):
                seq, said = batch[-1].seq, trio.current_time()
                yield seq, b"".join(frame((msg.seq, 0), message_event(msg)) for msg in batch)
            elif trio.current_time() - said >= ping:
                said = trio.current_time()
                yield seq, b": ping\n\n"
            await trio.sleep(FOLLOW_SECONDS)

    async def feeding(hosted, after: Key | None) -> AsyncIterator[bytes]:
        """The room runs here: every event, from its feed."""
        sub = hosted.feed.subscribe(after)
        store = host.store
        try:
            last: Key = after or (-1, 0)
            if sub.from_store is not None:  # older than the journal: the stored messages, then all of it
                last = (sub.from_store, 0)
                for msg in await store.read(hosted.room.id, after=sub.from_store):
                    if msg.seq > sub.upto:
                        break
                    last = (msg.seq, 0)
                    yield frame(last, message_event(msg))
            for key, data in sub.backlog:
                if key > last:
                    last = key
                    yield data
            while True:
                with trio.move_on_after(ping) as idle:
                    try:
                        batch = [await sub.receive.receive()]
                    except trio.EndOfChannel:
                        return  # dropped for lagging: the client resumes from its last id
                if idle.cancelled_caught:
                    yield b": ping\n\n"
                    continue
                if flush:  # let a burst gather (a turn's deltas, calls, messages): one write for it
                    await trio.sleep(flush)
                try:  # what queued meanwhile goes out in the same write: busy rooms cost fewer sends
                    while len(batch) < 1024:
                        batch.append(sub.receive.receive_nowait())
                except (trio.WouldBlock, trio.EndOfChannel):
                    pass
                fresh = [data for key, data in batch if key > last]
                last = max(last, batch[-1][0])
                if fresh:
                    yield b"".join(fresh)
        finally:
            hosted.feed.unsubscribe(sub)

    async def post_line(request: Request) -> Response:
        line = msgspec.json.decode(await request.body(), type=Line)
        text = line.text.strip()
        if not text:
            raise InputError("the line is empty")
        checked_line(text)  # the one cap every surface has, before the line is stored anywhere
        posted = await host.leased.post(request.path_params["room_id"], text)
        if posted.via == "inbox":  # stored for the process that runs the room; it answers there
            return _json({"inbox": posted.inbox}, 202)
        return _json({"id": posted.id, "seq": posted.seq}, 202)

    async def stop(request: Request) -> Response:
        async with host.room(request.path_params["room_id"]) as hosted:
            if isinstance(hosted, Elsewhere):  # the worker that runs it stops it on its next look at the inbox
                await host.leased.send_stop(hosted.id, "stopped from the web page")
                return _json({"stopped": "sent"}, 202)
            started = time.perf_counter()
            await hosted.room.stop("stopped from the web page")
            return _json({"stopped": True, "seconds": round(time.perf_counter() - started, 3)})

    async def answer(request: Request) -> Response:
        reply = msgspec.json.decode(await request.body(), type=Reply)
        if reply.answer not in ANSWERS:
            raise InputError(f"answer one of {', '.join(ANSWERS)}")
        async with host.room(request.path_params["room_id"]) as hosted:
            if isinstance(hosted, Elsewhere):
                # Only its owner knows which questions are open: it answers this one if it still is, and
                # leaves the request alone otherwise (room/leased.py).
                await host.leased.send_answer(hosted.id, reply.answer, reply.request_id)
                return _json({"answered": "sent"}, 202)
            room = hosted.room
            if reply.request_id not in room.asking:
                raise Unopened(f"no open question {reply.request_id!r} in room {room.id}; open: "
                               f"{', '.join(room.asking) or 'none'}")
            room.answer(reply.answer, reply.request_id)  # type: ignore[arg-type]
            return _json({"answered": True})

    async def usage(request: Request) -> Response:
        """What the room spent, as the store has it: a turn's rows wait up to a second to ride the room's next
        write (room/bus.py), and a page's look is no reason to write them sooner. Any worker can answer."""
        record = await host.store.room(request.path_params["room_id"])
        if record is None:
            raise RoomNotFound(f"no room {request.path_params['room_id']!r} in this database")
        log = UsageLog(host.store)
        await log.ready()
        return _json(await log.report([record.id], host.models.prices or Catalog().price))

    async def agent_view(request: Request) -> Response:
        async with host.room(request.path_params["room_id"]) as hosted:
            if isinstance(hosted, Elsewhere):
                raise Busy(f"room {hosted.id} runs in another worker process now, which cannot be reached; only "
                           "that one holds its agents' view: reload to try again")
            req = await hosted.room.next_request(request.path_params["name"])
        return _json({"agent": req.agent, "model": req.model, "system": req.system,
                      "tools": [t.name for t in req.tools],
                      "messages": [{"role": m.role, "blocks": [_block(b) for b in m.blocks]}
                                   for m in req.messages]})

    icon = (HERE / "static" / "favicon.svg").read_bytes()

    async def favicon(request: Request) -> Response:
        return Response(icon, media_type="image/svg+xml")

    return Guard(Starlette(middleware=[Middleware(_Worker)], routes=[
        Route("/", page("rooms.html")),
        Route("/favicon.ico", favicon),  # where browsers look for it whatever a page says
        Route("/rooms", api(rooms), methods=["GET"]),
        Route("/rooms", api(create_room), methods=["POST"]),
        Route("/rooms/{room_id}", page("room.html")),
        Route("/rooms/{room_id}/state", api(owned(state))),
        Route("/rooms/{room_id}/events", api(owned(events))),
        Route("/rooms/{room_id}/lines", api(post_line), methods=["POST"]),
        Route("/rooms/{room_id}/stop", api(stop), methods=["POST"]),
        Route("/rooms/{room_id}/answers", api(answer), methods=["POST"]),
        Route("/rooms/{room_id}/agents/{name}", api(owned(agent_view))),
        Route("/rooms/{room_id}/usage", api(usage)),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]), hosts)


class _Counted(StreamingResponse):
    """An event stream holding its place in the count until it ends, however it ends (the client gone
    cancels it mid-write)."""

    def __init__(self, content: AsyncIterator[bytes], release: Callable[[], None], **options: Any):
        super().__init__(content, **options)
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


def _block(b: Any) -> dict:
    """A block as the model got it; image bytes are left out (a page has no use for base64)."""
    if isinstance(b, ImageBlock):
        return {"type": "image", "media_type": b.media_type, "bytes": len(b.data) * 3 // 4}
    if isinstance(b, ToolResultBlock) and b.images:
        b = msgspec.structs.replace(b, images=[])
    return msgspec.to_builtins(b)


def _json(value: Any, status: int = 200) -> Response:
    return Response(msgspec.json.encode(value), status_code=status, media_type="application/json")


class _Worker:
    """Every answer names the process that gave it (`X-Orchestrator-Worker: pid`): with `--workers N` any
    of them may, and a script or a test can tell them apart."""

    def __init__(self, app: Any):
        self.app = app
        self.pid = str(os.getpid()).encode()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        async def named(message: dict) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"x-orchestrator-worker", self.pid)]
            await send(message)

        await self.app(scope, receive, named)

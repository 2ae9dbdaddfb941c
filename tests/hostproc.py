"""One host process for the multi-host test and bench/hosts.py: LeasedRooms over --db, a commander on an
echo model, and a JSON-lines port on 127.0.0.1 that takes {"room": id, "text": line} and replies once the
line is stored ({"via": "here", "seq": n} or {"via": "inbox", "inbox": id}).

The echo model answers every line token (L:…) it sees that none of its own earlier answers named, so a
test can tell a line answered once from one answered twice or never.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from functools import partial
from collections.abc import AsyncIterator
from pathlib import Path

import trio

from orchestrator.core.types import Request, StreamEnd, TextBlock, TextDelta, Usage
from orchestrator.room.leased import LeasedRooms
from orchestrator.store.backends import open_store
from orchestrator.team.schema import AgentDef, Team

TOKEN = re.compile(r"L:[\w-]+")
TEAM = Team(commander=AgentDef(name="commander", model="echo", instructions="Answer every line."))


class Echo:
    id = "echo"

    def __init__(self, delay: float):
        self.delay = delay

    async def validate_auth(self) -> None:
        return None

    async def stream(self, request: Request) -> AsyncIterator:
        said: dict[str, list[str]] = {"user": [], "assistant": []}
        for m in request.messages:
            said[m.role] += [t for b in m.blocks if isinstance(b, TextBlock) for t in TOKEN.findall(b.text)]
        answered = set(said["assistant"])
        tokens = [t for t in said["user"] if t not in answered]
        await trio.sleep(self.delay)  # the model "thinking": a kill can land here
        yield TextDelta("answered " + " ".join(tokens))
        yield StreamEnd("end_turn", Usage())


class Host:
    """A host process started from a test or a benchmark; `port()` waits until it listens."""

    def __init__(self, name: str, db: str, folder: Path, *, lease: float, delay: float = 0.02):
        self.name = name
        self.port_file = folder / f"{name}.port"
        self.log = open(folder / f"{name}.log", "wb")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__)), "--db", db, "--host", name,
             "--port-file", str(self.port_file), "--lease", str(lease), "--delay", str(delay)],
            cwd=folder, stdout=self.log, stderr=subprocess.STDOUT,
            env=os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parent.parent)})

    async def port(self) -> int:
        with trio.fail_after(60):
            while not self.port_file.exists() or not self.port_file.read_text():
                assert self.proc.poll() is None, f"{self.name} ended: {self.log.name}"
                await trio.sleep(0.05)
        return int(self.port_file.read_text())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        self.log.close()


async def ask(stream: trio.SocketStream, room: str, text: str) -> dict:
    await stream.send_all(json.dumps({"room": room, "text": text}).encode() + b"\n")
    data = b""
    while not data.endswith(b"\n"):
        chunk = await stream.receive_some()
        if not chunk:
            raise ConnectionError("the host closed the connection")
        data += chunk
    return json.loads(data)


async def main(args: argparse.Namespace) -> None:
    store = await open_store(args.db)
    echo = Echo(args.delay)

    async def serve(stream: trio.SocketStream) -> None:
        buffer = b""
        async for chunk in stream:
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                ask = json.loads(line)
                try:
                    posted = await rooms.post(ask["room"], ask["text"])
                    reply = {"via": posted.via, "seq": posted.seq, "inbox": posted.inbox, "host": args.host}
                except Exception as exc:  # noqa: BLE001 (the client is told; the host goes on)
                    reply = {"error": repr(exc)}
                await stream.send_all(json.dumps(reply).encode() + b"\n")

    try:
        async with LeasedRooms.open(store, args.host, lambda _: (echo, "echo"), team=TEAM,
                                    seconds=args.lease) as rooms, trio.open_nursery() as nursery:
            listeners = await nursery.start(partial(trio.serve_tcp, serve, 0, host="127.0.0.1"))
            port = listeners[0].socket.getsockname()[1]
            Path(args.port_file).write_text(str(port))
    finally:
        await store.close()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--db", required=True)
    p.add_argument("--host", required=True)
    p.add_argument("--port-file", required=True)
    p.add_argument("--lease", type=float, default=2.0)
    p.add_argument("--delay", type=float, default=0.02)
    args = p.parse_args()
    if not args.db.startswith(("postgresql://", "postgres://")):
        args.db = Path(args.db)
    try:
        trio.run(main, args)
    except KeyboardInterrupt:
        sys.exit(130)

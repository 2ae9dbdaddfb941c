"""A real `orchestrator serve` on 127.0.0.1 for the tests (a subprocess on a free port), and a small
SSE reader over httpx. Shared by the HTTP tests and the browser tests."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import trio

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Server:
    proc: subprocess.Popen
    url: str  # with #token= (the fragment, for a browser)
    token: str
    base: str = field(init=False)

    def __post_init__(self) -> None:
        self.base = self.url.split("/#token=")[0]

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            return self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return -9
        finally:
            self.proc.stdout.close()


def start_server(tmp: Path, *args: str, db: Path | str | None = None) -> Server:
    db = db or tmp / "serve.db"
    workers = [] if "--workers" in args else ["--workers", "1"]  # one process unless the test asks for more
    cmd = [sys.executable, "-m", "orchestrator", "serve", "--db", str(db), "--port", "0", "--json", *workers, *args]
    with open(tmp / "serve.err", "ab") as err:  # the child has its own copy of the descriptor
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True,
                                env=os.environ | {"ORCHESTRATOR_MODEL": ""})
    first = proc.stdout.readline()  # printed once the socket listens
    if not first:
        proc.wait(timeout=10)
        proc.stdout.close()
        raise RuntimeError(f"serve exited with {proc.returncode}: {(tmp / 'serve.err').read_text()}")
    info = json.loads(first)
    return Server(proc, info["url"], info["token"])


@dataclass
class Frame:
    id: str
    event: dict

    @property
    def key(self) -> tuple[int, int]:
        seq, _, k = self.id.partition(".")
        return int(seq), int(k or 0)


class Stream:
    """One SSE subscription, read frame by frame."""

    def __init__(self, response: httpx.Response):
        self.response = response
        self._lines = response.aiter_lines()
        self.frames: list[Frame] = []

    async def next(self) -> Frame:
        ident, data = None, []
        async for line in self._lines:
            if line == "":
                if data:
                    frame = Frame(ident, json.loads("\n".join(data)))
                    self.frames.append(frame)
                    return frame
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "id":
                ident = value
            elif name == "data":
                data.append(value)
        raise EOFError("the stream ended")

    async def until(self, test, timeout: float = 20.0) -> Frame:
        with trio.fail_after(timeout):
            while True:
                frame = await self.next()
                if test(frame.event):
                    return frame

    async def running(self, n: int, timeout: float = 20.0) -> set[str]:
        """Read on until `n` agents have a task marked running; those agents."""
        agents: set[str] = set()
        with trio.fail_after(timeout):
            while len(agents) < n:
                ev = (await self.next()).event
                if ev["type"] == "task" and ev["status"] == "running":
                    agents.add(ev["agent"])
        return agents


def said(author: str, text: str):
    """A test for `Stream.until`: a message by `author` containing `text`."""
    return lambda ev: ev["type"] == "message" and ev["author"] == author and text in ev["text"]

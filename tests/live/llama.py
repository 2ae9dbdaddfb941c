"""One `llama-server` process on 127.0.0.1 for the live lane: started on a free port, waited on, stopped.

It serves the cached SmolLM2 GGUF deterministically; its log and `/slots` tell the tests what the server saw.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ALIAS = "smollm2"  # the model id /v1/models lists; llama-server answers any requested name with its one model
WINDOW = 2048  # tokens per request
SLOTS = 2
START_SECONDS = 180  # loading a 100 MB model is quick, but a loaded CI machine may be slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def command(binary: Path, model: Path, port: int) -> list[str]:
    return [
        str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "--alias", ALIAS,
        "--jinja",  # the model's own chat template through minja: tool definitions reach the prompt
        "--temp", "0", "--seed", "1", "--top-k", "1",  # the same reply to the same request
        # Two slots decode two requests at once. -c is the cache of all slots together: 4096 over 2 slots is a
        # 2048-token window per request, which /v1/models (meta.n_ctx) and /props report. A unified cache
        # (--kv-unified, the default only when -np is auto) would report 2048 too, but two long requests then
        # share those 2048 cells and fail mid-reply with "Context size has been exceeded".
        "-c", str(WINDOW * SLOTS), "--parallel", str(SLOTS), "--no-kv-unified",
        "--threads", "2", "--slots", "--log-timestamps", "--log-prefix", "--no-webui",
    ]


@dataclass
class Server:
    url: str  # http://127.0.0.1:PORT, without /v1
    log: Path
    proc: subprocess.Popen = field(repr=False)

    def slots(self) -> list[dict[str, Any]]:
        """llama-server's /slots: one object per slot, `is_processing` while it serves a request."""
        resp = httpx.get(f"{self.url}/slots", timeout=10)
        resp.raise_for_status()
        return resp.json()

    def busy(self) -> int:
        return sum(1 for s in self.slots() if s.get("is_processing"))

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=20)


def start(binary: Path, model: Path, folder: Path) -> Server:
    """A server answering /health with 200, or RuntimeError with the tail of its log."""
    for _attempt in range(3):  # the free port may be taken between the probe and the bind
        port = _free_port()
        log = folder / f"llama-server-{port}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(command(binary, model, port), stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        server = Server(f"http://127.0.0.1:{port}", log, proc)
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                # 503 while the model loads, 200 once it can serve
                if httpx.get(f"{server.url}/health", timeout=5).status_code == 200:
                    return server
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        server.stop()
        if "bind" not in server.log_text().lower():
            break
    raise RuntimeError(f"llama-server did not become healthy in {START_SECONDS} s:\n{log.read_text()[-4000:]}")

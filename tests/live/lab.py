"""The real `orchestrator` CLI pointed at the live server: a throwaway HOME, XDG folders and config file.

`Lab.run(scenario)` plays a scenario with `run --json` and returns its events; `Lab.cli(...)` runs any command.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 900  # seconds for one CLI call: a loaded 2-core machine decodes slowly, and nothing here should hang

# The environment the CLI gets: nothing of the user's (keys, addresses, config, databases, proxies).
_DROPPED = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OLLAMA_HOST",
            "ORCHESTRATOR_CONFIG", "ORCHESTRATOR_DB", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
            "http_proxy", "https_proxy", "all_proxy")


def config(url: str) -> str:
    """Two endpoints on the one server: its Chat Completions route and its Anthropic Messages route.
    `lab/capped` is the same model with an output cap; no model names a window, so the server's is learned."""
    return textwrap.dedent(f"""\
        [endpoints.lab]
        kind = "openai"
        base_url = "{url}/v1"

        [endpoints.labmsg]
        kind = "anthropic"
        base_url = "{url}"

        [models."lab/capped"]
        max_output = 32
        """)


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str
    events: list[dict[str, Any]] = field(default_factory=list)

    def of(self, kind: str, agent: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == kind and (agent is None or e.get("agent") == agent)]

    def said(self, author: str) -> list[str]:
        """The text messages `author` committed to the room, in order."""
        return [e["text"] for e in self.of("message") if e.get("author") == author and e.get("kind") == "text"]

    def explain(self) -> str:
        """For an assertion message: the exit code and the tails of both streams."""
        return f"exit {self.code}\n--- stdout\n{self.stdout[-3000:]}\n--- stderr\n{self.stderr[-3000:]}"


def _events(stdout: str) -> list[dict[str, Any]]:
    out = []
    for line in stdout.splitlines():
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


class Lab:
    def __init__(self, folder: Path, url: str):
        self.folder = folder
        self.url = url
        home = folder / "home"
        for sub in ("config/orchestrator", "data", "cache", "state"):
            (home / sub).mkdir(parents=True, exist_ok=True)
        (home / "config/orchestrator/config.toml").write_text(config(url))
        env = {k: v for k, v in os.environ.items() if k not in _DROPPED}
        self.env = env | {
            "HOME": str(home), "XDG_CONFIG_HOME": str(home / "config"), "XDG_DATA_HOME": str(home / "data"),
            "XDG_CACHE_HOME": str(home / "cache"), "XDG_STATE_HOME": str(home / "state"),
            "NO_PROXY": "127.0.0.1,localhost", "NO_COLOR": "1", "PYTHONUNBUFFERED": "1",
        }
        self._count = 0

    def db(self, name: str) -> Path:
        return self.folder / f"{name}.db"

    def cli(self, *args: str, stdin: str | None = None, timeout: float = TIMEOUT) -> Result:
        proc = subprocess.run([sys.executable, "-m", "orchestrator", *args], input=stdin, capture_output=True,
                              text=True, env=self.env, cwd=self.folder, timeout=timeout)
        return Result(proc.returncode, proc.stdout, proc.stderr, _events(proc.stdout))

    def scenario(self, text: str) -> Path:
        self._count += 1
        path = self.folder / f"scenario-{self._count}.yaml"
        path.write_text(textwrap.dedent(text))
        return path

    def run(self, text: str, name: str, *, timeout: float = TIMEOUT) -> Result:
        """`orchestrator run SCENARIO --json --db NAME.db`: the events on stdout, the usage summary on stderr."""
        return self.cli("run", str(self.scenario(text)), "--json", "--db", str(self.db(name)), timeout=timeout)

    def watch(self, text: str, name: str, on_event: Callable[[dict[str, Any], float], None], *,
              timeout: float = TIMEOUT) -> Result:
        """As `run`, but each event is handed to `on_event(event, monotonic time)` as it arrives."""
        path = self.scenario(text)
        errors = self.folder / f"{name}.stderr"  # a file, not a pipe: logs must never block the run
        with errors.open("w") as err:
            proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "run", str(path), "--json",
                                     "--db", str(self.db(name))], stdout=subprocess.PIPE, stderr=err,
                                    stdin=subprocess.DEVNULL, text=True, env=self.env, cwd=self.folder)
        lines = []
        deadline = time.monotonic() + timeout
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)
                if line.startswith("{"):
                    on_event(json.loads(line), time.monotonic())
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the run took longer than {timeout} s")
            code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        stdout = "".join(lines)
        return Result(code, stdout, errors.read_text(), _events(stdout))

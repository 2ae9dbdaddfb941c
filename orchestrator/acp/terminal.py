"""The agent's terminal/* requests, each terminal a background job of the bash tool: the same risk check and
question to the user, the same jail and limits, the same job table the room stops; nothing runs any other way.
"""
from __future__ import annotations

import re
import shlex
import signal
from typing import Any

import trio

from orchestrator.acp.jsonrpc import INVALID_PARAMS, RpcError
from orchestrator.tools.base import ToolContext, ToolError, ToolOutput
from orchestrator.tools.jobs import Job
from orchestrator.tools.shell import BashArgs, bash

MAX_TERMINALS = 16  # open at once per connection: a released one frees its place
OUTPUT_LIMIT = 64_000  # bytes of output kept for terminal/output (the job keeps its latest this many)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STARTED = re.compile(r"Started background job (\S+) ")


def command_line(params: dict[str, Any]) -> str:
    """The one shell line the bash tool checks and runs: `env` assignments, then the command and its
    arguments quoted; a command without arguments is taken as a shell line, as agents send one."""
    command = params.get("command")
    args = params.get("args") or []
    env = params.get("env") or []
    if not isinstance(command, str) or not command.strip():
        raise RpcError(INVALID_PARAMS, "`command` must be a non-empty string")
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise RpcError(INVALID_PARAMS, "`args` must be a list of strings")
    if not isinstance(env, list):
        raise RpcError(INVALID_PARAMS, "`env` must be a list of {name, value}")
    sets = []
    for var in env:
        name, value = (var.get("name"), var.get("value")) if isinstance(var, dict) else (None, None)
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name) or not isinstance(value, str):
            raise RpcError(INVALID_PARAMS, "`env` entries need a variable `name` and a string `value`")
        sets.append(f"{name}={shlex.quote(value)}")
    line = shlex.join([command, *args]) if args else command
    return " ".join([*sets, line]) if sets else line


class Terminals:
    """One connection's terminals: job ids by terminal id, and each one's output limit."""

    def __init__(self, ctx: ToolContext):
        self._ctx = ctx
        self._open: dict[str, tuple[Job, int]] = {}
        self._made = 0

    async def create(self, params: Any) -> dict[str, Any]:
        if not isinstance(params, dict):
            raise RpcError(INVALID_PARAMS, "terminal/create takes an object")
        if len(self._open) >= MAX_TERMINALS:
            raise RpcError(INVALID_PARAMS, f"{MAX_TERMINALS} terminals are open; release one first")
        limit = params.get("outputByteLimit")
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
            raise RpcError(INVALID_PARAMS, "`outputByteLimit` must be a whole number of bytes")
        cwd = params.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise RpcError(INVALID_PARAMS, "`cwd` must be a path")
        try:
            said = await bash(BashArgs(command_line(params), background=True, cwd=cwd), self._ctx)
        except ToolError as exc:
            raise RpcError(INVALID_PARAMS, str(exc)) from None
        text = said.text if isinstance(said, ToolOutput) else said
        started = _STARTED.match(text)
        if isinstance(said, ToolOutput) and said.is_error or started is None:
            raise RpcError(INVALID_PARAMS, text)
        self._made += 1
        terminal = f"term-{self._made}"
        self._open[terminal] = (self._ctx.session.jobs.get(started[1]), min(limit or OUTPUT_LIMIT, OUTPUT_LIMIT))
        return {"terminalId": terminal}

    def _job(self, params: Any) -> tuple[Job, int]:
        terminal = params.get("terminalId") if isinstance(params, dict) else None
        found = self._open.get(terminal) if isinstance(terminal, str) else None
        if found is None:
            raise RpcError(INVALID_PARAMS, f"no terminal {terminal!r} (released, or never made)")
        return found

    async def output(self, params: Any) -> dict[str, Any]:
        job, limit = self._job(params)
        data = job.output.recent()
        kept = data[max(0, len(data) - limit):]
        text = kept.decode("utf-8", errors="ignore")  # a cut at the front may split a character: drop it
        answer: dict[str, Any] = {"output": text, "truncated": job.output.total > len(kept)}
        if job.done.is_set():
            answer["exitStatus"] = _exit(job)
        return answer

    async def wait_for_exit(self, params: Any) -> dict[str, Any]:
        job, _ = self._job(params)
        await job.done.wait()
        return _exit(job)

    async def kill(self, params: Any) -> None:
        job, _ = self._job(params)
        if not job.done.is_set():
            await self._ctx.session.jobs.kill(job.id)

    async def release(self, params: Any) -> None:
        await self.kill(params)
        self._open.pop(params["terminalId"], None)

    async def close(self) -> None:
        """Shielded: every terminal the agent left open is killed with it."""
        with trio.CancelScope(shield=True):
            for job, _ in self._open.values():
                if not job.done.is_set():
                    await self._ctx.session.jobs.kill(job.id)
            self._open.clear()


def _exit(job: Job) -> dict[str, Any]:
    code = job.result.returncode if job.result is not None else None
    if code is None:
        return {"exitCode": None, "signal": "SIGTERM"}  # stopped (killed, or with the room) before it ended
    if code < 0:
        try:
            return {"exitCode": None, "signal": signal.Signals(-code).name}
        except ValueError:
            return {"exitCode": None, "signal": str(-code)}
    return {"exitCode": code, "signal": None}

"""An ACP agent for the tests and scenarios, written with the official SDK (`agent-client-protocol`), run as its
own process: each prompt is a script of steps, so a test can make it do what a real agent would.

A step is a line of the prompt, `verb: argument`, or an entry of the JSON script file named by ACP_AGENT_SCRIPT
(a list of steps for every prompt, or {"prompts": [[...], ...]} by prompt number, the last one repeated; a step
there is "verb: argument" or {"verb": argument}). A prompt with no step is echoed back. The verbs:

    say: a|b|c           stream "a", "b", "c" as separate message chunks
    think: text          a thought chunk
    plan: one|two        a plan with these entries
    read: PATH [LINE [LIMIT]]   fs/read_text_file (PATH relative to the session's cwd, or absolute)
    write: PATH = TEXT   fs/write_text_file
    run: COMMAND ARGS    terminal/create, wait for its exit, read its output, release it
    ask: TITLE           session/request_permission with allow once / allow always / reject once
    mcp: TOOL {json}     call TOOL of the first MCP server given in session/new (spawned over stdio)
    peek: PATH           open PATH itself, not through the client (what its own sandbox lets it see)
    poke: PATH = TEXT    write PATH itself, not through the client
    sleep: SECONDS       wait, or end with "cancelled" as soon as a session/cancel comes
    stubborn:            block for an hour: ignore cancel, stdin's end and SIGTERM (only SIGKILL ends it)
    crash: CODE          write a line to stderr and exit at once
    history:             how many prompts this session has had, also across a restart (session/load)

Each step reports in one message chunk ("read 3 lines of src/app.py"). Environment: ACP_AGENT_AUTH=required
makes session/new ask for a login. Sessions are kept in $HOME/.acp-test-agent/sessions.json.
"""
from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, RequestError, run_agent
from acp.helpers import (plan_entry, start_tool_call, update_agent_message_text, update_agent_thought_text,
                         update_plan, update_tool_call)
from acp.schema import (AgentCapabilities, AuthEnvVar, AuthMethodAgent, EnvVarAuthMethod, Implementation,
                        InitializeResponse, LoadSessionResponse, NewSessionResponse, PermissionOption, PromptResponse,
                        ToolCallUpdate)

STATE = Path(os.environ.get("HOME", ".")) / ".acp-test-agent" / "sessions.json"


def _load() -> dict[str, Any]:
    try:
        return json.loads(STATE.read_text())
    except (OSError, ValueError):
        return {}


def _save(sessions: dict[str, Any]) -> None:
    STATE.parent.mkdir(parents=True, exist_ok=True)
    STATE.write_text(json.dumps(sessions))


def _steps(text: str, number: int) -> list[tuple[str, str]]:
    steps: list[Any] = [line for line in text.splitlines() if ":" in line and line.split(":", 1)[0].strip() in VERBS]
    script = os.environ.get("ACP_AGENT_SCRIPT")
    if not steps and script:
        loaded = json.loads(Path(script).read_text())
        if isinstance(loaded, dict):
            prompts = loaded["prompts"]
            loaded = prompts[min(number, len(prompts) - 1)]
        steps = loaded
    out = []
    for step in steps:
        if isinstance(step, dict):
            ((verb, arg),) = step.items()
            arg = "|".join(arg) if isinstance(arg, list) else str(arg)
        else:
            verb, arg = step.split(":", 1)
        out.append((verb.strip(), arg.strip()))
    return out


VERBS = {"peek", "poke", "say", "think", "plan", "read", "write", "run", "ask", "mcp", "sleep", "stubborn", "crash", "history"}


class TestAgent:
    def __init__(self) -> None:
        self.conn: Any = None
        self.sessions = _load()
        self.cancelled: dict[str, asyncio.Event] = {}
        self.servers: dict[str, list[Any]] = {}
        self.prompts = 0
        self.logged_in = False

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None,
                         **kwargs: Any) -> InitializeResponse:
        auth: list[Any] = [AuthMethodAgent(id="login", name="Log in")] if os.environ.get("ACP_AGENT_AUTH") else []
        if os.environ.get("ACP_AGENT_AUTH") == "key":  # a login by an API key in the environment, as Codex offers
            auth.append(EnvVarAuthMethod(id="api-key", name="API key", type="env_var",
                                         vars=[AuthEnvVar(name="TEST_AGENT_KEY"),
                                               AuthEnvVar(name="TEST_AGENT_ORG", optional=True)]))
        return InitializeResponse(protocol_version=PROTOCOL_VERSION,
                                  agent_capabilities=AgentCapabilities(load_session=True),
                                  agent_info=Implementation(name="acp-test-agent", version="1.0"),
                                  auth_methods=auth)

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        if method_id != "api-key" or os.environ.get("TEST_AGENT_KEY") != "k3y":
            raise RequestError.auth_required()
        self.logged_in = True

    async def new_session(self, cwd: str, mcp_servers: Any = None, **kwargs: Any) -> NewSessionResponse:
        if os.environ.get("ACP_AGENT_AUTH") and not self.logged_in:
            raise RequestError.auth_required()
        session = uuid.uuid4().hex
        self.sessions[session] = {"cwd": cwd, "prompts": 0}
        self.servers[session] = list(mcp_servers or [])
        _save(self.sessions)
        return NewSessionResponse(session_id=session)

    async def load_session(self, cwd: str, session_id: str, mcp_servers: Any = None,
                           **kwargs: Any) -> LoadSessionResponse | None:
        if session_id not in self.sessions:
            raise RequestError.resource_not_found(session_id)
        self.servers[session_id] = list(mcp_servers or [])
        return LoadSessionResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.cancelled.setdefault(session_id, asyncio.Event()).set()

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        text = "\n".join(getattr(block, "text", "") for block in prompt)
        cancel = self.cancelled[session_id] = asyncio.Event()
        state = self.sessions.setdefault(session_id, {"cwd": os.getcwd(), "prompts": 0})
        state["prompts"] += 1
        _save(self.sessions)
        steps = _steps(text, self.prompts)
        self.prompts += 1
        if not steps:
            await self.say(session_id, f"You said: {text}")
        for verb, arg in steps:
            if cancel.is_set():
                return PromptResponse(stop_reason="cancelled")
            report = await getattr(self, f"do_{verb}")(session_id, arg, state, cancel)
            if report is not None:
                await self.say(session_id, report + "\n")
            if cancel.is_set():
                return PromptResponse(stop_reason="cancelled")
        return PromptResponse(stop_reason="end_turn")

    async def say(self, session: str, text: str) -> None:
        await self.conn.session_update(session_id=session, update=update_agent_message_text(text))

    def path(self, state: dict[str, Any], raw: str) -> str:
        return raw if os.path.isabs(raw) else os.path.join(state["cwd"], raw)

    # --- the steps ---

    async def do_say(self, session: str, arg: str, state: Any, cancel: Any) -> None:
        for chunk in arg.split("|"):
            await self.say(session, chunk)

    async def do_think(self, session: str, arg: str, state: Any, cancel: Any) -> None:
        await self.conn.session_update(session_id=session, update=update_agent_thought_text(arg))

    async def do_plan(self, session: str, arg: str, state: Any, cancel: Any) -> None:
        await self.conn.session_update(session_id=session, update=update_plan(
            [plan_entry(e.strip()) for e in arg.split("|")]))

    async def do_read(self, session: str, arg: str, state: Any, cancel: Any) -> str:
        raw, *rest = arg.split()
        line, limit = (int(rest[0]) if rest else None), (int(rest[1]) if len(rest) > 1 else None)
        call = uuid.uuid4().hex[:8]
        await self.conn.session_update(session_id=session, update=start_tool_call(
            call, f"read_file {raw}", kind="read", status="in_progress"))
        try:
            got = await self.conn.read_text_file(session_id=session, path=self.path(state, raw), line=line,
                                                 limit=limit)
        except RequestError as exc:
            await self.conn.session_update(session_id=session, update=update_tool_call(call, status="failed"))
            return f"read of {raw} refused: {exc}"
        await self.conn.session_update(session_id=session, update=update_tool_call(call, status="completed"))
        lines = got.content.splitlines()
        return f"read {len(lines)} lines of {raw}: {got.content[:200]!r}"

    async def do_write(self, session: str, arg: str, state: Any, cancel: Any) -> str:
        raw, _, content = arg.partition("=")
        raw, content = raw.strip(), content.strip().replace("\\n", "\n")
        try:
            await self.conn.write_text_file(session_id=session, path=self.path(state, raw), content=content)
        except RequestError as exc:
            return f"write of {raw} refused: {exc}"
        return f"wrote {len(content)} characters to {raw}"

    async def do_run(self, session: str, arg: str, state: Any, cancel: Any) -> str:
        command, *args = shlex.split(arg)
        try:
            made = await self.conn.create_terminal(session_id=session, command=command, args=args,
                                                   cwd=state["cwd"], output_byte_limit=4000)
        except RequestError as exc:
            return f"run of {arg!r} refused: {exc}"
        terminal = made.terminal_id
        done = await self.conn.wait_for_terminal_exit(session_id=session, terminal_id=terminal)
        out = await self.conn.terminal_output(session_id=session, terminal_id=terminal)
        await self.conn.release_terminal(session_id=session, terminal_id=terminal)
        return f"ran {arg!r}: exit {done.exit_code} signal {done.signal}; output: {out.output.strip()!r}"

    async def do_ask(self, session: str, arg: str, state: Any, cancel: Any) -> str:
        options = [PermissionOption(option_id="yes-once", name="Allow once", kind="allow_once"),
                   PermissionOption(option_id="yes-always", name="Always allow", kind="allow_always"),
                   PermissionOption(option_id="no", name="Reject", kind="reject_once")]
        answer = await self.conn.request_permission(
            session_id=session, options=options,
            tool_call=ToolCallUpdate(tool_call_id=uuid.uuid4().hex[:8], title=arg, kind="execute"))
        outcome = answer.outcome
        if outcome.outcome == "selected":
            return f"permission for {arg!r}: selected {outcome.option_id}"
        return f"permission for {arg!r}: cancelled"

    async def do_mcp(self, session: str, arg: str, state: Any, cancel: Any) -> str:
        from mcp import Client, StdioServerParameters

        tool, _, raw = arg.partition(" ")
        servers = [s for s in self.servers.get(session, []) if getattr(s, "command", None)]
        if not servers:
            return "no MCP server was given in session/new"
        server = servers[0]
        params = StdioServerParameters(command=server.command, args=list(server.args),
                                       env={**os.environ, **{e.name: e.value for e in server.env}})
        async with Client(params) as client:
            result = await client.call_tool(tool, json.loads(raw) if raw.strip() else {})
        said = " ".join(getattr(c, "text", "") for c in result.content)
        return f"{server.name}.{tool}: {'error: ' if result.is_error else ''}{said}"

    async def do_peek(self, session: str, arg: str, state: Any, cancel: Any) -> str:
        try:
            with open(self.path(state, arg)) as f:
                return f"peeked at {arg}: {f.read(200)!r}"
        except OSError as exc:
            return f"peek at {arg} failed: {exc.strerror}"

    async def do_poke(self, session: str, arg: str, state: Any, cancel: Any) -> str:
        raw, _, content = arg.partition("=")
        try:
            with open(self.path(state, raw.strip()), "w") as f:
                f.write(content.strip())
        except OSError as exc:
            return f"poke at {raw.strip()} failed: {exc.strerror}"
        return f"poked {raw.strip()}"

    async def do_sleep(self, session: str, arg: str, state: Any, cancel: asyncio.Event) -> str | None:
        await self.say(session, f"sleeping {arg} s\n")
        try:
            await asyncio.wait_for(cancel.wait(), float(arg))
        except asyncio.TimeoutError:
            return f"slept {arg} s"
        return None

    async def do_stubborn(self, session: str, arg: str, state: Any, cancel: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        await self.say(session, "not listening any more\n")
        time.sleep(3600)  # the whole process stops: no cancel, no end of stdin, no TERM reaches it

    async def do_crash(self, session: str, arg: str, state: Any, cancel: Any) -> None:
        await self.say(session, "about to crash\n")
        print("test agent: crashing as told", file=sys.stderr, flush=True)
        os._exit(int(arg or 3))

    async def do_history(self, session: str, arg: str, state: Any, cancel: Any) -> str:
        return f"this session has had {state['prompts']} prompts"


if __name__ == "__main__":
    asyncio.run(run_agent(TestAgent()))

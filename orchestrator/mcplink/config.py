"""What an `mcp_servers:` entry says (team files, a scenario's `team:`, config.toml) and how it is read.

`${VAR}` stays unexpanded in everything that is stored or shown; `expand` fills it in from the
environment only when a server is started, so a secret never reaches a log, an event or the store.
"""
from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Mapping

import msgspec
from msgspec import Meta, Struct

from orchestrator.core.errors import InputError

Policy = Literal["ask", "allow", "deny"]
Seconds = Annotated[float, Meta(gt=0)]

SERVER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,39}")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
PREFIX = "mcp__"


class ServerConfig(Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """One MCP server: a command (stdio) or a url (streamable HTTP), never both."""

    command: list[str] | str | None = None
    args: list[str] = []  # for `command: npx` style entries pasted from other clients
    env: dict[str, str] = {}
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = {}
    start_timeout: Seconds = 30.0
    timeout: Seconds = 60.0  # per call
    # One policy for every tool, or per tool name with "*" for the rest; tools not named default to ask.
    approval: Policy | dict[str, Policy] = "ask"

    def argv(self) -> list[str]:
        base = [self.command] if isinstance(self.command, str) else list(self.command or [])
        return base + list(self.args)

    def policy(self, tool: str) -> Policy:
        if isinstance(self.approval, str):
            return self.approval
        return self.approval.get(tool, self.approval.get("*", "ask"))

    def shown(self) -> str:
        """How the user is shown this server: the command or address verbatim, `${VAR}` unexpanded."""
        return self.url if self.url else " ".join(self.argv())


def check(name: str, server: ServerConfig) -> str | None:
    """Why this entry cannot work, or None."""
    if not SERVER_NAME.fullmatch(name) or "__" in name:
        return (f"bad MCP server name `{name}`: use 1-40 letters, digits, `-` or single `_`, "
                "starting with a letter or digit")
    if (server.url is None) == (not server.argv()):
        return f"MCP server `{name}`: give exactly one of `command` (stdio) or `url` (streamable HTTP)"
    if server.url is not None and not re.match(r"https?://", server.url):
        return f"MCP server `{name}`: `url` must start with http:// or https://, got {server.url!r}"
    if server.url is not None and (server.env or server.cwd or server.args):
        return f"MCP server `{name}`: `env`, `cwd` and `args` are for `command` servers, not `url` ones"
    if server.url is None and server.headers:
        return f"MCP server `{name}`: `headers` are for `url` servers, not `command` ones"
    return None


def expand(text: str, env: Mapping[str, str], where: str) -> str:
    """`text` with each `${VAR}` filled in; a missing variable is an error naming it, never its value."""
    def one(m: re.Match) -> str:
        value = env.get(m.group(1))
        if value is None:
            raise InputError(f"{where} uses ${{{m.group(1)}}}, which is not set in the environment")
        return value

    return _VAR.sub(one, text)


def grants(tools: list[str]) -> list[tuple[str, str | None]]:
    """The `mcp:NAME` and `mcp:NAME/TOOL` entries of an agent's tool list as (server, tool or None)."""
    out = []
    for entry in tools:
        if entry.startswith("mcp:"):
            server, _, tool = entry[4:].partition("/")
            out.append((server, tool or None))
    return out


def is_grant(entry: str) -> bool:
    return entry.startswith("mcp:")


def grant_problem(entry: str) -> str | None:
    """Why an `mcp:` tool entry is malformed (whether the server exists is known only when it runs)."""
    server, slash, tool = entry[4:].partition("/")
    if not SERVER_NAME.fullmatch(server) or (slash and not tool):
        return f"bad MCP grant `{entry}`: write `mcp:SERVER` for every tool of a server, `mcp:SERVER/TOOL` for one"
    return None


def configured(env: Mapping[str, str]) -> dict[str, ServerConfig]:
    """The servers of config.toml (`[mcp_servers.NAME]`); a team's own entries override them by name."""
    from orchestrator.providers.config import config_file

    path, raw = config_file(env)
    return from_toml(raw, str(path))


def from_toml(raw: Mapping[str, Any], where: str) -> dict[str, ServerConfig]:
    """The `[mcp_servers.NAME]` tables of config.toml."""
    table = raw.get("mcp_servers", {})
    if not isinstance(table, dict):
        raise InputError(f"{where}: `mcp_servers` must be a table of [mcp_servers.NAME] tables")
    out = {}
    for name, value in table.items():
        try:
            server = msgspec.convert(value, ServerConfig)
        except msgspec.ValidationError as exc:
            raise InputError(f"{where}: [mcp_servers.{name}]: {exc}") from None
        if problem := check(name, server):
            raise InputError(f"{where}: {problem}")
        out[name] = server
    return out

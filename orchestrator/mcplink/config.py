"""What an `mcp_servers:` entry says (team files, a scenario's `team:`, config.toml) and how it is read.

`${VAR}` and `${secret:NAME}` stay unexpanded in everything that is stored or shown; `expand` (core/secrets.py)
fills them in from the environment and the OS keyring only when a server is started, so a secret never reaches a
log, an event or the store.
"""
from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Mapping

import msgspec
from msgspec import Meta, Struct

from orchestrator.core.errors import InputError
from orchestrator.core.secrets import expand, literal_credential, needed, suggested_name, warn_literal, where_in

__all__ = ["ServerConfig", "check", "expand", "literals", "needed", "secrets_of"]

Policy = Literal["ask", "allow", "deny"]
Seconds = Annotated[float, Meta(gt=0)]

SERVER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,39}")
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


def secrets_of(server: ServerConfig) -> set[str]:
    """The `${secret:NAME}` names a server's settings use, to be fetched before it starts."""
    return needed(*server.argv(), server.url or "", server.cwd or "", *server.env.values(),
                  *server.headers.values())


def literals(name: str, server: ServerConfig) -> list[tuple[tuple[str | int, ...], str, str, str]]:
    """The credentials written in the clear in a server's entry, as (path under the entry, setting, value,
    suggested secret name): any key-shaped string, and under `env`/`headers` any literal whose name says
    credential (TOKEN, API_KEY, Authorization...)."""
    found: list[tuple[tuple[str | int, ...], str, str, str]] = []
    for table in ("env", "headers"):
        for key, value in getattr(server, table).items():
            if literal_credential(value, key):
                found.append(((table, key), f"mcp_servers.{name}.{table}.{key}", value, suggested_name(name, key)))
    command = [server.command] if isinstance(server.command, str) else list(server.command or [])
    for field, values in (("command", command), ("args", server.args), ("url", [server.url or ""])):
        for i, value in enumerate(values):
            if literal_credential(value):
                at: tuple[str | int, ...] = (field,) if field == "url" or isinstance(server.command, str) \
                    and field == "command" else (field, i)
                found.append((at, f"mcp_servers.{name}.{field}", value, suggested_name(name, "key")))
    return found


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
        for _, setting, value, secret in literals(name, server):
            warn_literal(where_in(where, value), setting, value, secret)
        out[name] = server
    return out

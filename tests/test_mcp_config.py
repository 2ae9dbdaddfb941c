"""`mcp_servers:` as written in team files and config.toml: checks with file:line, grants, ${VAR}, approval."""
from __future__ import annotations

import pytest

from orchestrator.core.errors import InputError
from orchestrator.mcplink.config import ServerConfig, configured, expand, grants
from orchestrator.providers.config import load_config
from orchestrator.team.loader import load_team


def test_team_file_servers_and_grants(tmp_path):
    (tmp_path / "team.yaml").write_text(
        "mcp_servers:\n"
        "  files: {command: [python, -m, srv], env: {TOKEN: '${TOKEN}'}, cwd: tools, timeout: 5}\n"
        "  tracker: {url: 'http://127.0.0.1:9000/mcp', headers: {Authorization: 'Bearer ${T}'},\n"
        "            approval: {search: allow, '*': deny}}\n"
        "agents:\n  - {name: researcher, tools: [read_file, 'mcp:files', 'mcp:tracker/search']}\n")
    team = load_team(tmp_path / "team.yaml")
    files, tracker = team.mcp_servers["files"], team.mcp_servers["tracker"]
    assert files.cwd == str((tmp_path / "tools").resolve()) and files.env == {"TOKEN": "${TOKEN}"}
    assert files.argv() == ["python", "-m", "srv"] and files.timeout == 5 and files.policy("x") == "ask"
    assert (tracker.policy("search"), tracker.policy("create")) == ("allow", "deny")
    assert grants(team.agents[0].tools) == [("files", None), ("tracker", "search")]


@pytest.mark.parametrize("entry, fragment", [
    ("x: {command: [a], url: 'http://h/mcp'}", "give exactly one of `command` (stdio) or `url`"),
    ("x: {}", "give exactly one of `command` (stdio) or `url`"),
    ("x: {url: 'ftp://h'}", "`url` must start with http:// or https://"),
    ("x: {url: 'http://h', env: {A: b}}", "`env`, `cwd` and `args` are for `command` servers"),
    ("x: {command: [a], headers: {A: b}}", "`headers` are for `url` servers"),
    ("a__b: {command: [a]}", "bad MCP server name `a__b`"),
    ("x: {command: [a], approval: sometimes}", "approval"),
    ("x: {command: [a], start_timeout: 0}", "start_timeout"),
])
def test_bad_server_entries_name_the_line(tmp_path, entry, fragment):
    (tmp_path / "team.yaml").write_text(f"agents: []\nmcp_servers:\n  {entry}\n")
    with pytest.raises(InputError, match=r"team.yaml:3") as err:
        load_team(tmp_path / "team.yaml")
    assert fragment in str(err.value)


@pytest.mark.parametrize("grant", ["mcp:", "mcp:files/", "mcp:bad name"])
def test_malformed_grants_are_refused(tmp_path, grant):
    (tmp_path / "team.yaml").write_text(f"agents:\n  - {{name: a, tools: ['{grant}']}}\n")
    with pytest.raises(InputError, match=r"team.yaml:2.*bad MCP grant"):
        load_team(tmp_path / "team.yaml")


def test_config_toml_servers(tmp_path):
    (tmp_path / "config.toml").write_text('[mcp_servers.files]\ncommand = ["python", "-m", "srv"]\n'
                                          'approval = "allow"\n')
    env = {"ORCHESTRATOR_CONFIG": str(tmp_path / "config.toml")}
    assert configured(env) == {"files": ServerConfig(command=["python", "-m", "srv"], approval="allow")}
    load_config(env)  # the providers' reader accepts the table
    (tmp_path / "config.toml").write_text('[mcp_servers.files]\ncommand = "x"\nurl = "http://h"\n')
    with pytest.raises(InputError, match="give exactly one of"):
        configured(env)


def test_variables_come_from_the_environment_only_when_asked():
    assert expand("Bearer ${T}", {"T": "abc"}, "where") == "Bearer abc"
    assert expand("plain $T", {}, "where") == "plain $T"
    with pytest.raises(InputError, match=r"headers.Authorization uses \$\{T\}, which is not set"):
        expand("Bearer ${T}", {}, "headers.Authorization")

"""Secrets at rest, end to end: `orchestrator secrets` against a real Secret Service (gnome-keyring on a private
D-Bus session), `${secret:NAME}` in a team's MCP env and in config.toml, and no trace of a value anywhere after a run.

Without gnome-keyring installed (Debian: gnome-keyring, dbus-daemon) the keyring tests skip; the no-backend ones run.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.core import secrets
from tests.fakeserver import FakeServer, Reply, sse

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "tests" / "mcpdata" / "server.py"
MCP_VALUE = "mcp-S3cr3t-Value-4242"
LAB_VALUE = "lab-K3y-9f8e7d6c5b4a"


def _base_env(tmp: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "PYTHONPATH")}
    runtime = tmp / "run"
    runtime.mkdir(mode=0o700, exist_ok=True)
    return {**keep, "HOME": str(tmp), "XDG_DATA_HOME": str(tmp / "data"), "XDG_CONFIG_HOME": str(tmp / "cfg"),
            "XDG_STATE_HOME": str(tmp / "state"), "XDG_RUNTIME_DIR": str(runtime), "COLUMNS": "200"}


@pytest.fixture
def keyring_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A private session bus with an unlocked gnome-keyring on it: the real Secret Service, in a temp HOME."""
    if not (shutil.which("dbus-daemon") and shutil.which("gnome-keyring-daemon") and shutil.which("dbus-send")):
        pytest.skip("needs dbus-daemon and gnome-keyring (apt-get install dbus-daemon gnome-keyring)")
    pytest.importorskip("keyring")
    env = _base_env(tmp_path)
    bus = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--nosyslog", "--print-address=1"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    daemon = None
    try:
        assert bus.stdout is not None
        env["DBUS_SESSION_BUS_ADDRESS"] = bus.stdout.readline().strip()  # printed once the bus listens
        # --daemonize returns once the daemon owns org.freedesktop.secrets; the password unlocks a new login keyring.
        subprocess.run(["gnome-keyring-daemon", "--daemonize", "--unlock", "--components=secrets"], input="test",
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, text=True, timeout=30,
                       check=True)
        # The daemon may still be claiming its name; the bus answers StartServiceByName once the name has an owner.
        subprocess.run(["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
                        "org.freedesktop.DBus.StartServiceByName", "string:org.freedesktop.secrets", "uint32:0"],
                       env=env, capture_output=True, timeout=30, check=True)
        owner = subprocess.run(["dbus-send", "--session", "--print-reply=literal", "--dest=org.freedesktop.DBus",
                                "/org/freedesktop/DBus", "org.freedesktop.DBus.GetConnectionUnixProcessID",
                                "string:org.freedesktop.secrets"], env=env, capture_output=True, text=True,
                               timeout=30, check=True)
        daemon = int(owner.stdout.split()[-1])
        yield env
    finally:
        if daemon is not None:
            os.kill(daemon, 15)
        bus.terminate()
        bus.wait(timeout=10)
        if bus.stdout is not None:
            bus.stdout.close()


def cli(env: dict[str, str], *args: str, stdin: str = "", cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], input=stdin, capture_output=True,
                          text=True, timeout=120, env=env, cwd=cwd or env["HOME"])


def _no_plain_file(env: dict[str, str]) -> None:
    assert not (Path(env["XDG_DATA_HOME"]) / "python_keyring").exists(), "a keyring file was written"


# --- the commands ---------------------------------------------------------------------------------

def test_set_list_remove_through_the_secret_service(keyring_env):
    env = keyring_env
    put = cli(env, "secrets", "set", "GH_TOKEN", stdin=MCP_VALUE + "\n")
    assert put.returncode == 0, put.stderr
    assert "stored GH_TOKEN" in put.stdout and "SecretService" in put.stdout
    assert MCP_VALUE not in put.stdout + put.stderr
    # in the Secret Service itself, read by another process, under the project's one service name
    read = subprocess.run([sys.executable, "-c", "import keyring; print(keyring.get_password('orchestrator', "
                           "'GH_TOKEN'))"], env=env, capture_output=True, text=True, timeout=60)
    assert read.stdout.strip() == MCP_VALUE, read.stderr
    assert cli(env, "secrets", "set", "OTHER", stdin="x-second-value").returncode == 0
    listed = cli(env, "secrets", "list")
    assert listed.returncode == 0 and listed.stdout.split() == ["GH_TOKEN", "OTHER"]
    assert MCP_VALUE not in listed.stdout + listed.stderr
    gone = cli(env, "secrets", "remove", "GH_TOKEN")
    assert gone.returncode == 0 and "removed GH_TOKEN" in gone.stdout
    assert cli(env, "secrets", "list").stdout.split() == ["OTHER"]
    again = cli(env, "secrets", "remove", "GH_TOKEN")
    assert again.returncode == 2 and "no secret named GH_TOKEN" in again.stderr
    assert "Traceback" not in again.stderr
    _no_plain_file(env)


def test_two_processes_storing_at_once_lose_no_name(keyring_env):
    # Each process stores its own names as fast as it can; the shared list of names must end with all of them.
    code = ("import sys\nfrom orchestrator.core import secrets\n"
            "for i in range(8):\n    secrets.store(f'{sys.argv[1]}_{i}', 'value-' + str(i))\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, who], env=keyring_env, cwd=ROOT,
                              stderr=subprocess.PIPE, text=True) for who in ("A", "B")]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    listed = cli(keyring_env, "secrets", "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == sorted(f"{w}_{i}" for w in "AB" for i in range(8))


def test_bad_names_and_empty_values_are_one_line(keyring_env):
    bad = cli(keyring_env, "secrets", "set", "no-dashes", stdin="v")
    assert bad.returncode == 2 and "bad secret name 'no-dashes'" in bad.stderr and len(bad.stderr.splitlines()) == 1
    empty = cli(keyring_env, "secrets", "set", "EMPTY_ONE", stdin="")
    assert empty.returncode == 2 and "no value given for EMPTY_ONE" in empty.stderr


# --- a run that used secrets leaves no trace of them ---------------------------------------------

def _mcp_scenario(tmp: Path, mode: str = "normal", sees: str = str(len(MCP_VALUE))) -> Path:
    """`mode` of the test server: "leaky" echoes the token back in its result."""
    scn = tmp / "uses-secret.yaml"
    scn.write_text(f"""name: uses-secret
team:
  mcp_servers:
    files: {{command: ["${{ORCHESTRATOR_PYTHON}}", "{SERVER}", {mode}], env: {{TOKEN: "${{secret:MCP_TOKEN}}"}},
            approval: allow}}
  commander: {{tools: ["mcp:files/token_length"]}}
models:
  commander:
    - call: {{mcp__files__token_length: {{}}}}
    - say: "The token is {len(MCP_VALUE)} characters long."
      sees: "{sees}"
turns:
  - user: How long is the token?
expect:
  tool_errors:
    - {{agent: commander, name: mcp__files__token_length, count: 0}}
""")
    return scn


def _traces(tmp: Path, value: str, out: subprocess.CompletedProcess, *, logged: bool = True) -> None:
    """No byte of the value in the store (and its WAL), the trace, the JSON log, the event stream or stderr;
    `logged`: the run wrote log lines (a scripted run may have none to write)."""
    files = [p for p in tmp.rglob("*") if p.is_file() and p.suffix in (".db", ".db-wal", ".jsonl", ".log")
             and "state" not in p.parts]  # state/: the MCP server's own stderr, which is the server's
    assert any(p.suffix == ".db" for p in files) and any(p.name == "trace.jsonl" for p in files)
    assert (tmp / "log.jsonl").stat().st_size > 0 or not logged
    for path in files:
        assert value.encode() not in path.read_bytes(), f"{value!r} is in {path}"
    assert value not in out.stdout + out.stderr


def _run_args(tmp: Path, scn: Path) -> list[str]:
    return ["--log-json", str(tmp / "log.jsonl"), "run", str(scn), "--json", "--db", str(tmp / "room.db"),
            "--trace", str(tmp / "trace.jsonl")]


def test_a_team_files_mcp_env_takes_a_secret_and_no_trace_of_it_remains(keyring_env, tmp_path):
    pytest.importorskip("mcp")
    env = keyring_env
    assert cli(env, "secrets", "set", "MCP_TOKEN", stdin=MCP_VALUE).returncode == 0
    out = cli(env, *_run_args(tmp_path, _mcp_scenario(tmp_path)))
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr
    results = [e for e in map(json.loads, out.stdout.splitlines()) if e.get("type") == "tool_end"]
    assert results and str(len(MCP_VALUE)) in json.dumps(results)  # the server saw the value in its env
    _traces(tmp_path, MCP_VALUE, out, logged=False)


def test_a_server_that_echoes_its_secret_is_masked_before_the_model_and_the_store(keyring_env, tmp_path):
    pytest.importorskip("mcp")
    env = keyring_env
    assert cli(env, "secrets", "set", "MCP_TOKEN", stdin=MCP_VALUE).returncode == 0
    # the scripted model's `sees` fails the run unless what it was handed says [secret] where the value was
    out = cli(env, *_run_args(tmp_path, _mcp_scenario(tmp_path, "leaky", sees=f"it is [secret], of {len(MCP_VALUE)}")))
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr
    results = [e for e in map(json.loads, out.stdout.splitlines()) if e.get("type") == "tool_end"]
    assert [r["result"] for r in results] == [f"it is [secret], of {len(MCP_VALUE)} characters"]
    _traces(tmp_path, MCP_VALUE, out, logged=False)


def test_a_config_toml_endpoint_key_from_the_keyring_is_sent_only_as_the_header(keyring_env, tmp_path):
    env = keyring_env
    assert cli(env, "secrets", "set", "LAB_KEY", stdin=LAB_VALUE).returncode == 0
    scn = tmp_path / "hello.yaml"
    scn.write_text("name: hello\nturns:\n  - user: hi\n")
    chunk = {"id": "c1", "object": "chat.completion.chunk", "model": "m",
             "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hello there."}, "finish_reason": None}]}
    end = {"id": "c1", "object": "chat.completion.chunk", "model": "m",
           "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
           "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}
    with FakeServer() as server:
        server.replies.append(Reply(chunks=sse(chunk, end, done=True)))
        config = Path(env["XDG_CONFIG_HOME"]) / "orchestrator" / "config.toml"
        config.parent.mkdir(parents=True)
        config.write_text(f'[endpoints.lab]\nbase_url = "{server.url}/v1"\napi_key = "${{secret:LAB_KEY}}"\n')
        out = cli(env, *_run_args(tmp_path, scn), "--model", "lab/m")
        sent = [r["headers"].get("Authorization") for r in server.requests]
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr
    assert sent == [f"Bearer {LAB_VALUE}"]
    _traces(tmp_path, LAB_VALUE, out)
    # and a secret that is not stored leaves the endpoint without a key, saying what to run
    assert cli(env, "secrets", "remove", "LAB_KEY").returncode == 0
    models = cli(env, "models", "--json")
    lab = next(e for e in map(json.loads, models.stdout.splitlines()) if e["name"] == "lab")
    assert lab["missing"] == ["secret LAB_KEY"]


# --- literal credentials in files ------------------------------------------------------------------

def test_a_literal_key_in_a_team_file_is_pointed_out_without_its_value(tmp_path):
    env = _base_env(tmp_path)
    token = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
    team = tmp_path / "team.yaml"
    team.write_text("mcp_servers:\n"
                    f"  files: {{command: [python, -m, srv], env: {{TOKEN: \"{token}\", MODE: fast}}}}\n"
                    "  tracker:\n    url: http://127.0.0.1:9/mcp\n"
                    "    headers: {Authorization: \"Bearer ${TRACKER_TOKEN}\"}\n"
                    "agents:\n  - {name: researcher, tools: ['mcp:files']}\n")
    out = cli(env, "mcp", "list", "--team", str(team))
    warnings = [ln for ln in out.stderr.splitlines() if "literal credential" in ln]
    assert len(warnings) == 1, out.stderr
    assert f"{team}:2: mcp_servers.files.env.TOKEN" in warnings[0]
    assert "`orchestrator secrets set FILES_TOKEN`" in warnings[0] and "${secret:FILES_TOKEN}" in warnings[0]
    assert f"`ghp…`, {len(token)} characters" in warnings[0]
    assert token not in out.stdout + out.stderr and token[3:] not in out.stderr


def test_a_literal_key_in_config_toml_names_its_line(tmp_path):
    env = _base_env(tmp_path)
    key = "sk-" + "Zq8Wm2Lp5Rt7Yx1Cv4Bn6Mk9Hj3Gf0Ds"
    config = tmp_path / "cfg" / "orchestrator" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'[endpoints.lab]\nbase_url = "http://127.0.0.1:9/v1"\napi_key = "{key}"\n')
    out = cli(env, "models", "--json")
    warnings = [ln for ln in out.stderr.splitlines() if "literal credential" in ln]
    assert len(warnings) == 1, out.stderr
    assert f"{config}:3: [endpoints.lab] api_key" in warnings[0] and "orchestrator secrets set LAB_KEY" in warnings[0]
    assert key not in out.stdout + out.stderr


@pytest.mark.parametrize("value, key, literal", [
    ("sk-ant-api03-" + "a" * 30, None, True), ("AIza" + "Sy" + "b" * 33, None, True),
    ("xoxb-1234567890-abcdef", None, True), ("AKIA" + "ABCDEFGHIJKLMNOP", None, True),
    ("Bearer eyJhbGciOiJIUzI1NiJ9Xq7Lk2", "X-Anything", True),
    ("${GITHUB_TOKEN}", "GITHUB_TOKEN", False), ("Bearer ${secret:TRACKER}", "Authorization", False),
    ("hunter2hunter2", "DB_PASSWORD", True), ("fast", "MODE", False), ("/usr/local/share/data", "DATA_DIR", False),
    ("550e8400-e29b-41d4-a716-446655440000", "REQUEST_ID", False),
])
def test_which_literals_count_as_credentials(value, key, literal):
    assert secrets.literal_credential(value, key) is literal


def test_the_log_mask_covers_what_was_filled_in():
    filled = secrets.expand("Bearer ${secret:MASK_ME}", {}, "test", {"MASK_ME": "value-to-mask-1234"})
    assert filled == "Bearer value-to-mask-1234"
    assert secrets.redacted({"msg": ["x value-to-mask-1234 y"], "n": 3}) == {"msg": ["x [secret] y"], "n": 3}
    with pytest.raises(Exception, match=r"uses \$\{secret:ABSENT\}, which is not stored"):
        secrets.expand("${secret:ABSENT}", {}, "somewhere", {})


# --- no keyring ------------------------------------------------------------------------------------

def test_without_a_keyring_one_plain_line_and_the_environment_stands_in(tmp_path):
    pytest.importorskip("mcp")
    env = _base_env(tmp_path)  # no session bus: the Secret Service is out of reach
    put = cli(env, "secrets", "set", "MCP_TOKEN", stdin=MCP_VALUE)
    assert put.returncode == 2 and len(put.stderr.strip().splitlines()) == 1, put.stderr
    assert "no OS keyring here" in put.stderr and "ORCHESTRATOR_SECRET_MCP_TOKEN" in put.stderr
    listed = cli({**env, "ORCHESTRATOR_SECRET_FROM_ENV": "x"}, "secrets", "list")
    assert listed.returncode == 0 and listed.stdout.split() == ["FROM_ENV"] and "no OS keyring" in listed.stderr
    out = cli({**env, "ORCHESTRATOR_SECRET_MCP_TOKEN": MCP_VALUE}, *_run_args(tmp_path, _mcp_scenario(tmp_path)))
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr
    notes = [ln for ln in out.stderr.splitlines() if "no OS keyring" in ln]
    assert len(notes) == 1 and "reads the environment variable ORCHESTRATOR_SECRET_NAME" in notes[0]
    _traces(tmp_path, MCP_VALUE, out, logged=False)
    _no_plain_file(env)


def test_the_plaintext_file_backend_is_refused_even_when_named(tmp_path):
    pytest.importorskip("keyrings.alt")
    env = {**_base_env(tmp_path), "PYTHON_KEYRING_BACKEND": "keyrings.alt.file.PlaintextKeyring"}
    put = cli(env, "secrets", "set", "ANY", stdin="some-value-here")
    assert put.returncode == 2 and "plaintext file, which is refused" in put.stderr, put.stderr
    _no_plain_file(env)


def test_importing_the_package_does_not_import_keyring():
    code = ("import sys, orchestrator, orchestrator.core.log, orchestrator.mcplink.servers, "
            "orchestrator.providers.config; print(sorted(m for m in sys.modules if 'keyring' in m))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.stdout.strip() == "[]", out.stderr


def test_a_log_line_and_its_traceback_carry_no_filled_in_value(tmp_path):
    code = f"""
from orchestrator.core import log, secrets
secrets.expand("${{secret:K}}", {{}}, "t", {{"K": "value-to-mask-5678"}})
for target in ({str(tmp_path / 'log.jsonl')!r}, None):
    log.configure(json_file=target)
    try:
        raise ValueError("refused value-to-mask-5678")
    except ValueError:
        log.logger("t").error("call failed", key="value-to-mask-5678", exc_info=True)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    written = (tmp_path / "log.jsonl").read_text()
    assert "refused [secret]" in written and "refused [secret]" in out.stderr, out.stderr
    assert "value-to-mask-5678" not in written + out.stderr
    assert '"locals"' not in written  # frames without locals: a local may hold a key no mask knows of

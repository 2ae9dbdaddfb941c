"""What a new user meets first, outside the chat's terminal: errors from a dead address or a wrong model,
flags in any place, quiet logs, finding the last run again, the help, and files kept private."""
from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from orchestrator.core import errors as E
from orchestrator.providers import http
from orchestrator.providers.openai import OpenAICompatible
from tests.fakeserver import FakeServer, json_body

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"


def cli(tmp_path: Path, *args: str, env: dict | None = None, stdin: str = "",
        cwd: Path | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith(
        ("ORCHESTRATOR_", "OLLAMA_", "OPENAI_", "ANTHROPIC_"))}
    environ.update(HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path / "cfg"),
                   COLUMNS="100", **(env or {}))
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], cwd=cwd or tmp_path, input=stdin,
                          capture_output=True, text=True, timeout=60, env=environ)


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once the socket is closed


# --- a dead address, a wrong model ------------------------------------------------------------------

def test_a_refused_connection_before_any_answer_fails_at_once_naming_the_setting(tmp_path):
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    start = time.monotonic()
    out = cli(tmp_path, "run", "greeting", "--model", "openai/gpt-4.1",
              env={"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": url})
    took = time.monotonic() - start
    assert out.returncode == 3
    assert took < 8, f"{took:.1f}s: the connection was retried"
    errors = [ln for ln in out.stdout.splitlines() if ln.startswith("!")]
    assert len(errors) == 1 and url in errors[0] and "OPENAI_BASE_URL" in errors[0], out.stdout
    assert "Traceback" not in out.stdout + out.stderr


async def test_a_refused_connection_after_an_answer_is_retried_as_before():
    with FakeServer() as server:
        server.replies.append(json_body(500, {"error": {"message": "boom"}}))
        provider = OpenAICompatible(base_url=server.url + "/v1", api_key="k")
        try:
            with pytest.raises(E.ServerError):
                async for _ in provider.stream(_request()):
                    pass
        finally:
            await provider.aclose()
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    refused = http.transport(httpx.ConnectError("refused", request=request), "openai", "http://127.0.0.1:9/v1")
    assert type(refused) is E.ProviderConnectionError and refused.retryable  # a server answered in this process


def test_before_any_answer_a_refused_connection_is_not_retried(monkeypatch):
    monkeypatch.setattr(http, "_answered", False)
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    exc = http.transport(httpx.ConnectError("refused", request=request), "ollama", "http://127.0.0.1:9/v1")
    assert isinstance(exc, E.UnreachableError) and not exc.retryable and exc.fatal
    assert "http://127.0.0.1:9/v1" in str(exc) and "ollama serve" in str(exc)


def _request():
    from orchestrator.core.types import ModelMessage, Request, TextBlock

    return Request(agent="a", model="gpt-4.1", system="", messages=[ModelMessage("user", [TextBlock("hi")])])


def test_a_model_the_server_does_not_serve_stops_the_run(tmp_path):
    with FakeServer() as server:
        body = {"error": {"message": "The model `gpt-4.1-mnii` does not exist.", "code": "model_not_found"}}
        server.replies.extend(json_body(404, body) for _ in range(5))
        scn = tmp_path / "three.yaml"
        scn.write_text("name: three\nturns:\n  - user: one\n  - user: two\n  - user: three\n")
        out = cli(tmp_path, "run", str(scn), "--model", "openai/gpt-4.1-mnii",
                  env={"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": server.url + "/v1"})
        asked = len(server.requests)
    assert out.returncode == 3
    assert asked == 1, f"{asked} model calls: the run went on after the model was not found"
    assert "user: two" not in out.stdout and "model_not_found" in out.stdout
    assert ".." not in out.stdout


# --- flags ----------------------------------------------------------------------------------------------

def test_global_flags_before_or_after_the_command(tmp_path):
    for args in (["run", "greeting", "--debug"], ["--debug", "run", "greeting"]):
        out = cli(tmp_path, *args)
        assert out.returncode == 0, out.stderr
    db = tmp_path / "kb.db"
    cli(tmp_path, "kb", "add", str(SCENARIOS / "greeting.yaml"), "--db", str(db))
    early, late = cli(tmp_path, "kb", "--db", str(db), "list"), cli(tmp_path, "kb", "list", "--db", str(db))
    assert early.returncode == late.returncode == 0 and early.stdout == late.stdout and "greeting" in early.stdout
    assert cli(tmp_path, "memory", "--db", str(db), "show").returncode == 0


def test_version_bare_help_and_descriptions(tmp_path):
    version = cli(tmp_path, "--version")
    assert version.returncode == 0 and re.fullmatch(r"orchestrator \S+\n", version.stdout)
    bare = cli(tmp_path)
    assert bare.returncode == 0 and "usage: orchestrator" in bare.stdout and "scenarios" in bare.stdout
    for command in ("run", "check", "models", "scenarios"):
        text = cli(tmp_path, command, "--help").stdout
        usage, _, rest = text.partition("\n\n")
        assert not rest.startswith(("positional arguments", "options")), f"{command} has no description"


def test_no_requirement_ids_in_what_users_read(tmp_path):
    ids = re.compile(r"\b[EGPM]\d{1,2}\b")
    texts = {"docs/scenario-format.md": (ROOT / "docs" / "scenario-format.md").read_text()}
    for command in ("chat", "run", "check", "tokens", "kb", "memory", "rooms", "models", "scenarios"):
        texts[f"{command} --help"] = cli(tmp_path, command, "--help").stdout
    from orchestrator.cli.chat.shell import HELP

    texts["/help"] = HELP
    leaks = {where: ids.findall(text) for where, text in texts.items() if ids.search(text)}
    assert not leaks


def test_pointers_for_a_folder_run_and_a_scenario_given_as_a_team(tmp_path):
    out = cli(tmp_path, "run", str(SCENARIOS))
    assert out.returncode == 2 and f"orchestrator check {SCENARIOS}" in out.stderr
    out = cli(tmp_path, "chat", "--team", str(SCENARIOS / "tutor-handoff.yaml"))
    assert out.returncode == 2 and "--scripted" in out.stderr and "Traceback" not in out.stderr
    out = cli(tmp_path, "run", "flagsip")
    assert out.returncode == 2 and "did you mean flagship?" in out.stderr


def test_tokens_refuses_a_binary_file(tmp_path):
    (tmp_path / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4)
    out = cli(tmp_path, "tokens", "image.png")
    assert out.returncode == 2 and "binary" in out.stderr


def test_a_bare_model_name_suggests_its_provider(tmp_path):
    out = cli(tmp_path, "chat", "--model", "gpt4.1")
    assert out.returncode == 2 and "did you mean openai/gpt-4.1?" in out.stderr


# --- logs ----------------------------------------------------------------------------------------------------

def test_check_prints_no_log_lines_between_its_results(tmp_path):
    out = cli(tmp_path, "check", str(SCENARIOS / "context-no-benefit.yaml"), str(SCENARIOS / "context-overflow.yaml"))
    assert out.returncode == 0, out.stdout
    assert out.stderr == ""


def test_an_uncatalogued_model_is_one_chat_line_not_a_log(tmp_path):
    (tmp_path / "cfg" / "orchestrator").mkdir(parents=True)
    (tmp_path / "cfg" / "orchestrator" / "config.toml").write_text(
        '[endpoints.lab]\nbase_url = "http://127.0.0.1:9/v1"\n')
    (tmp_path / "proj").mkdir()  # a project folder: chat does not start in the home folder
    out = cli(tmp_path, "chat", "--model", "lab/house-model-7b", stdin="/exit\n", cwd=tmp_path / "proj")
    assert out.returncode == 0, out.stderr
    assert "warning" not in out.stdout + out.stderr
    assert "lab/house-model-7b is not in the catalog: assuming a 32,768-token window" in out.stdout


# --- finding rooms again ------------------------------------------------------------------------------

def test_after_a_run_rooms_and_show_find_it_without_flags(tmp_path):
    assert cli(tmp_path, "run", "greeting").returncode == 0
    assert cli(tmp_path, "run", "greeting").returncode == 0
    rooms = cli(tmp_path, "rooms")
    assert rooms.returncode == 0
    listed = re.findall(r"(?m)^(\w{12})\s+greeting\s+(\d{4}-\d\d-\d\d \d\d:\d\d)", rooms.stdout)
    assert len(listed) == 2, rooms.stdout
    shown = cli(tmp_path, "show", "greeting")
    assert shown.returncode == 0 and "commander:" in shown.stdout
    assert "2 rooms are named 'greeting'" in shown.stderr and listed[0][0] in shown.stderr
    assert cli(tmp_path, "show", listed[0][0]).stderr == ""


def test_a_run_never_writes_into_the_chat_database(tmp_path):
    memory = cli(tmp_path, "run", "memory-across-rooms")
    assert memory.returncode == 0, memory.stdout
    chat_db = tmp_path / "data" / "orchestrator" / "orchestrator.db"
    assert not chat_db.exists()
    memory = cli(tmp_path, "memory", "show")
    assert memory.returncode == 0 and "nothing is saved yet" in memory.stdout
    again = cli(tmp_path, "run", "memory-across-rooms")  # a fresh memory each time: the same result
    assert again.returncode == 0, again.stdout


def test_databases_and_history_are_private(tmp_path):
    out = cli(tmp_path, "chat", "--scripted", "greeting", stdin="hi\n")
    assert out.returncode == 0, out.stderr
    folder = tmp_path / "data" / "orchestrator"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for f in ("orchestrator.db", "chat_history"):
        assert stat.S_IMODE((folder / f).stat().st_mode) == 0o600, f
    cli(tmp_path, "run", "greeting")
    for f in (folder / "runs").iterdir():
        assert stat.S_IMODE(f.stat().st_mode) & 0o077 == 0, f


def test_make_demo_installs_the_package_alone():
    makefile = (ROOT / "Makefile").read_text()
    demo = re.search(r"(?m)^demo: (\S+)", makefile).group(1)
    recipe = re.search(rf"(?m)^{re.escape(demo)}:[^\n]*\n((?:\t[^\n]*\n)+)", makefile)
    assert recipe and "pip install" in recipe.group(1) and "[" not in recipe.group(1)


# --- transcripts and exports ---------------------------------------------------------------------------

def test_transcript_lines_read_as_sentences_without_trailing_spaces(tmp_path):
    outputs = [cli(tmp_path, "run", name, "--all").stdout for name in ("tutor-handoff", "flagship", "handback-pending")]
    handoff = next(ln for ln in outputs[0].splitlines() if "handed you the floor" in ln)
    assert "note: wants help with fractions. The user's last message: I need help with fractions" in handoff
    trailing = [ln for out in outputs for ln in out.splitlines() if ln != ln.rstrip()]
    assert not trailing


def test_one_plain_confirmation_line(tmp_path):
    out = cli(tmp_path, "run", "risky-confirmed").stdout
    asked = [ln for ln in out.splitlines() if ln.startswith("?")]
    assert asked == ["? commander asks to run something risky (destructive): rm -rf data "
                     "(deletes a folder and everything in it)"]


def test_markdown_export_shows_arguments_recipients_and_the_marker_as_written(tmp_path):
    db = tmp_path / "room.db"
    assert cli(tmp_path, "run", "tutor-handoff", "--db", str(db)).returncode == 0
    md = cli(tmp_path, "export", "tutor-handoff", "--db", str(db), "--format", "md").stdout
    assert '- calls `hand_off_to` with `{"agent":"tutor","note":"wants help with fractions"}`' in md
    assert re.search(r"(?m)^\*\*commander\*\* → \*\*tutor\*\* · task · #\d+", md)
    # the marker as written, with Markdown's own escape so that a renderer does not take it for HTML
    assert '"\\<handback />"' in md and "&lt;" not in md and not re.search(r"(?<!\\)<handback", md)
    assert all(ln == ln.rstrip() for ln in md.splitlines())


# --- Ctrl-C during `run` ---------------------------------------------------------------------------------

SLOW = """\
name: slow
team:
  commander: {model: scripted}
models:
  commander:
    - {say: "Thinking.", delay: 60}
turns:
  - user: think hard
"""


def test_ctrl_c_during_run_ends_the_line_and_says_the_room_is_kept(tmp_path):
    import signal

    (tmp_path / "slow.yaml").write_text(SLOW)
    environ = {**os.environ, "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data"),
               "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "run", str(tmp_path / "slow.yaml")],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environ)
    assert proc.stdout is not None
    seen = ""
    while "user: think hard" not in seen:  # the room exists and waits on the model
        line = proc.stdout.readline()
        assert line, f"run ended first: {proc.communicate()}"
        seen += line
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    room = re.search(r"interrupted: the room is kept \(`orchestrator show ([0-9a-f]+)` prints it again\)", err)
    assert room, err
    shown = cli(tmp_path, "show", room.group(1))
    assert shown.returncode == 0 and "think hard" in shown.stdout, shown.stdout + shown.stderr


def test_an_interrupt_ends_a_half_streamed_line_before_it_speaks():
    import io

    from orchestrator.cli.transcript import Printer
    from orchestrator.core.events import TextDeltaEvent

    out = io.StringIO()
    printer = Printer(out, color=False)
    printer(TextDeltaEvent(agent="commander", text="Half a thou", room="abc123"))
    said = printer.interrupted()
    assert out.getvalue() == "commander: Half a thou\n"
    assert said == "interrupted: the room is kept (`orchestrator show abc123` prints it again)"


def test_check_shipped_on_a_plain_install_skips_what_needs_a_missing_extra_and_says_which(tmp_path):
    code = ("import sys; sys.modules['mcp'] = None; from orchestrator.cli.main import main; "
            "sys.exit(main(['check', '--shipped']))")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data"),
                              "XDG_CONFIG_HOME": str(tmp_path / "cfg")})
    assert out.returncode == 0, out.stdout + out.stderr
    skipped = [ln for ln in out.stdout.splitlines() if ln.startswith("SKIP")]
    assert skipped and all("need the `mcp` extra" in ln and "pip install -e '.[mcp]'" in ln for ln in skipped)
    assert any(ln.startswith("SKIP  mcp-tool ") for ln in skipped)
    assert not [ln for ln in out.stdout.splitlines() if ln.startswith(("FAIL", "BAD"))]
    shipped = len(list(SCENARIOS.glob("*.yaml")))
    assert out.stdout.splitlines()[-1] == (f"{shipped - len(skipped)} passed, 0 failed, {len(skipped)} skipped "
                                           "(an extra is missing)")


def test_check_with_nothing_to_check_says_what_to_name():
    out = subprocess.run([sys.executable, "-m", "orchestrator", "check"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--shipped" in out.stderr

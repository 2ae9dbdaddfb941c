"""`orchestrator models` as a newcomer reads it: each problem said once, a server that needs no key never
"FAILED" for want of one, keys masked so two can be told apart, the README's own endpoint example
configured as written, and the scripted model listed.
"""
from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest

from orchestrator.providers.config import Candidate, mask
from orchestrator.providers.registry import Registry
from tests.fakeserver import FakeServer, json_body
from tests.test_registry import cli, env_with

ROOT = Path(__file__).resolve().parent.parent
LISTING = {"object": "list", "data": [{"id": "m-1", "object": "model"}]}


def closed_port() -> str:
    with FakeServer() as gone:
        pass  # once closed, nobody listens on its port
    return gone.url


def readme_lab_table() -> str:
    """The models guide's `[endpoints.lab]` example, as the guide writes it (up to the next table)."""
    text = (ROOT / "docs" / "guides" / "models.md").read_text()
    block = re.search(r"^\[endpoints\.lab\].*?(?=^\[|^```)", text, re.S | re.M)
    assert block, "docs/guides/models.md no longer shows an [endpoints.lab] example"
    return block.group(0)


def default_ollama_absent() -> bool:
    try:
        socket.create_connection(("localhost", 11434), timeout=1).close()
    except OSError:
        return True
    return False


@pytest.mark.parametrize("moved", [False, True], ids=["default-address", "OLLAMA_HOST"])
def test_an_absent_ollama_is_said_once_and_not_as_a_failure(tmp_path, moved):
    if not moved and not default_ollama_absent():
        pytest.skip("an Ollama listens on this machine's default address")
    out = cli(env_with(tmp_path, **({"OLLAMA_HOST": closed_port()} if moved else {})), "models", "--timeout", "5")
    # Ollama's default is information, not a failure; an address the user set is theirs
    assert out.returncode == int(moved), out.stdout + out.stderr
    assert sum("ollama serve" in ln or "OLLAMA_HOST" in ln for ln in out.stdout.splitlines()) == 1, out.stdout
    lines = out.stdout.splitlines()
    line = lines[lines.index("ollama (OpenAI-compatible)") + 1]
    assert line.startswith("  not running at "), line
    assert "FAILED" not in out.stdout and "(no key)" not in out.stdout, out.stdout


def test_a_keyless_endpoint_that_answers_is_ok_without_a_key(tmp_path):
    with FakeServer() as srv:
        srv.replies.append(json_body(200, LISTING))
        toml = f'[endpoints.llama]\nbase_url = "{srv.url}/v1"\n'
        out = cli(env_with(tmp_path, toml, OLLAMA_HOST=closed_port()), "models", "--timeout", "5")
    assert f"  ok      {srv.url}/v1, no key" in out.stdout.splitlines(), out.stdout
    assert "Authorization" not in srv.requests[0]["headers"]


def test_the_readme_lab_example_is_configured_without_its_optional_key(tmp_path):
    """The example's comment says its key is optional: with LAB_KEY unset the endpoint is called without one."""
    table = readme_lab_table()
    assert 'api_key_env = "LAB_KEY"' in table and "optional" in table
    with FakeServer() as srv:
        srv.replies.append(json_body(200, LISTING))
        toml = re.sub(r'base_url = "[^"]*"', f'base_url = "{srv.url}/v1"', table)
        env = env_with(tmp_path, toml, OLLAMA_HOST=closed_port())
        out = cli(env, "models", "--timeout", "5")
        srv.replies.append(json_body(401, {"error": {"message": "no key given", "type": "invalid_request_error"}}))
        refused = cli(env, "models", "--timeout", "5")
    assert "not configured" not in out.stdout.split("lab (")[-1], out.stdout
    assert f"  ok      {srv.url}/v1, no key (LAB_KEY unset)" in out.stdout.splitlines(), out.stdout
    # A server that does want the key says so, and which variable gives it.
    assert f"  FAILED  {srv.url}/v1, sent without a key (LAB_KEY unset) — auth: " in refused.stdout, refused.stdout
    assert "  lab: the server wants a key — set LAB_KEY" in refused.stdout.splitlines(), refused.stdout


def test_a_keyless_endpoint_that_wants_a_key_says_where_to_put_one(tmp_path):
    with FakeServer() as srv:
        srv.replies.append(json_body(401, {"error": {"message": "no key given", "type": "invalid_request_error"}}))
        toml = f'[endpoints.box]\nbase_url = "{srv.url}/v1"\n'
        out = cli(env_with(tmp_path, toml, OLLAMA_HOST=closed_port()), "models", "--timeout", "5")
    assert out.returncode == 1
    assert f"  FAILED  {srv.url}/v1, sent without a key — auth: " in out.stdout, out.stdout
    assert "  box: the server wants a key — add api_key_env or keys to [endpoints.box] in " in out.stdout


def test_the_readme_lab_example_resolves_and_takes_the_key_when_it_is_set(tmp_path):
    table = readme_lab_table()
    reg = Registry.load(env_with(tmp_path, table))
    assert reg.config.sources["lab"].candidates == [Candidate("http://127.0.0.1:8000/v1")]
    assert reg.config.sources["lab"].missing == ["LAB_KEY"]
    reg = Registry.load(env_with(tmp_path, table, LAB_KEY="lab-secret"))
    assert reg.config.sources["lab"].candidates == [Candidate("http://127.0.0.1:8000/v1", "lab-secret")]


def test_a_vendor_key_variable_once_named_is_still_required(tmp_path):
    reg = Registry.load(env_with(tmp_path, '[providers.anthropic]\napi_key_env = "MY_ANTHROPIC"\n'))
    assert reg.config.sources["anthropic"].candidates == []


def test_the_scripted_model_is_listed(tmp_path):
    env = env_with(tmp_path, OLLAMA_HOST=closed_port())
    out = cli(env, "models", "--timeout", "5")
    lines = out.stdout.splitlines()
    at = lines.index("scripted (built in)")
    assert lines[at + 1].startswith("  ok      always available, no key"), lines
    rows = {r["name"]: r for r in map(json.loads, cli(env, "models", "--json", "--timeout", "5").stdout.splitlines())}
    assert rows["scripted"]["configured"] and rows["scripted"]["kind"] == "scripted"


@pytest.mark.parametrize("key", ["sk-first", "sk-second", "secret", "abcdefghij", "0123456789abcdefghi"])
def test_a_short_key_shows_none_of_its_characters(key):
    shown = mask(key)
    assert re.fullmatch(r"key#[0-9a-f]{4}", shown), shown
    assert not any(key[i:i + 2] in shown.removeprefix("key#") for i in range(len(key) - 1))


def test_masks_tell_keys_apart():
    short = ["sk-first", "sk-second", "sk-third", "sk-fourth"]
    assert len({mask(k) for k in short}) == len(short)
    long_1, long_2 = "sk-proj-" + "1" * 40 + "aaaa", "sk-proj-" + "2" * 40 + "bbbb"
    assert (mask(long_1), mask(long_2)) == ("sk-…aaaa", "sk-…bbbb")
    assert mask(None) == "(no key)"


def test_the_readme_example_keys_are_told_apart(tmp_path):
    """The README's `keys = ["sk-first", "sk-second"]`: two lines a user can tell apart, neither key shown."""
    toml = '[providers.openai]\nbase_url = "{url}/v1"\nkeys = ["sk-first", "sk-second"]\n'
    with FakeServer() as srv:
        srv.replies.extend(json_body(200, LISTING) for _ in range(2))
        out = cli(env_with(tmp_path, toml.format(url=srv.url), OLLAMA_HOST=closed_port()), "models", "--timeout", "5")
    oks = [ln for ln in out.stdout.splitlines() if ln.startswith("  ok      key#")]
    assert len(oks) == 2 and oks[0] != oks[1], out.stdout
    assert "first" not in out.stdout and "second" not in out.stdout and "…st" not in out.stdout

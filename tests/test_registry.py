"""Routing and configuration (P2): model strings, the environment and the TOML file, the model catalog,
`orchestrator models` against loopback servers, and keys that never show unmasked.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import structlog

from orchestrator.core.errors import InputError
from orchestrator.core.types import ModelMessage, Request, TextBlock
from orchestrator.providers.anthropic import Anthropic
from orchestrator.providers.base import complete
from orchestrator.providers.catalog import UNKNOWN, Catalog, Price
from orchestrator.providers.config import Candidate, load_config, mask, ollama_url
from orchestrator.providers.openai import OpenAICompatible
from orchestrator.providers.registry import Registry
from orchestrator.providers.rotation import Rotation
from orchestrator.scenario.loader import load_scenario
from orchestrator.scenario.runner import run_scenario
from tests.fakeserver import FakeServer, Reply, json_body, sse

# Stopping at [DONE] closes the response, but httpx's inner byte/text generators under aiter_lines are
# left to the garbage collector, which trio reports; the sockets themselves are released.
pytestmark = pytest.mark.filterwarnings(r"ignore:Async generator 'http(x|core)\.:ResourceWarning")

ROOT = Path(__file__).resolve().parent.parent
KEY_1 = "sk-proj-1111111111111111aaaa"
KEY_2 = "sk-proj-2222222222222222bbbb"
ANT_KEY = "sk-ant-api03-3333333333333333cccc"
VENDOR_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OLLAMA_HOST")


def env_with(tmp_path: Path, toml: str | None = None, **env: str) -> dict[str, str]:
    """An environment of our own: the config file in tmp_path (or none), only the variables given."""
    path = tmp_path / "config.toml"
    if toml is not None:
        path.write_text(toml)
    return {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), **({"ORCHESTRATOR_CONFIG": str(path)} if toml else {}), **env}


def registry(tmp_path: Path, toml: str | None = None, **env: str) -> Registry:
    return Registry.load(env_with(tmp_path, toml, **env))


# --- model strings -----------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("openai/gpt-4o", ("openai", "gpt-4o")),
    ("gpt-4.1-mini", ("openai", "gpt-4.1-mini")),
    ("o1", ("openai", "o1")),
    ("o3-mini", ("openai", "o3-mini")),
    ("o4-mini", ("openai", "o4-mini")),
    ("chatgpt-4o-latest", ("openai", "chatgpt-4o-latest")),
    ("claude-sonnet-4-5-20250929", ("anthropic", "claude-sonnet-4-5-20250929")),
    ("anthropic/claude-haiku-4-5", ("anthropic", "claude-haiku-4-5")),
    ("ollama/qwen3:8b", ("ollama", "qwen3:8b")),
    ("team/meta-llama/Llama-3.1-8B-Instruct", ("team", "meta-llama/Llama-3.1-8B-Instruct")),
])
def test_split(tmp_path, text, expected):
    reg = registry(tmp_path, '[endpoints.team]\nbase_url = "http://127.0.0.1:9/v1"\n')
    assert reg.split(text) == expected


@pytest.mark.parametrize("text, says", [
    ("foo/bar", "unknown provider 'foo'; known are openai, anthropic, ollama"),
    ("llama3", "ollama/llama3"),
    ("openai/", "the model id after openai/ is missing"),
])
def test_bad_model_strings_are_input_errors(tmp_path, text, says):
    with pytest.raises(InputError) as info:
        registry(tmp_path).split(text)
    assert says in str(info.value)


# --- environment -------------------------------------------------------------------------------

async def test_one_key_from_the_environment_is_the_provider_itself(tmp_path):
    async with registry(tmp_path, OPENAI_API_KEY=KEY_1, OPENAI_BASE_URL="https://proxy.example/v1") as reg:
        provider, model = reg.resolve("gpt-4o")
        assert isinstance(provider, OpenAICompatible) and model == "gpt-4o"
        assert provider.id == "openai" and provider.base_url == "https://proxy.example/v1"
        assert reg.resolve("openai/gpt-4o")[0] is provider  # one provider per name, reused


async def test_comma_separated_keys_rotate_under_a_stable_id(tmp_path):
    async with registry(tmp_path, OPENAI_API_KEY=f"{KEY_1}, {KEY_2}") as reg:
        provider, model = reg.resolve("gpt-4.1")
        assert isinstance(provider, Rotation) and provider.id == "openai" and model == "gpt-4.1"
        assert [c.api_key for c in reg.config.sources["openai"].candidates] == [KEY_1, KEY_2]


async def test_anthropic_from_the_environment(tmp_path):
    async with registry(tmp_path, ANTHROPIC_API_KEY=ANT_KEY, ANTHROPIC_BASE_URL="http://127.0.0.1:9") as reg:
        provider, model = reg.resolve("claude-opus-4-1")
        assert isinstance(provider, Anthropic) and provider.id == "anthropic" and model == "claude-opus-4-1"


@pytest.mark.parametrize("host, url", [
    (None, "http://localhost:11434/v1"),
    ("gpu-box", "http://gpu-box:11434/v1"),
    ("gpu-box:8080", "http://gpu-box:8080/v1"),
    ("0.0.0.0:11434", "http://127.0.0.1:11434/v1"),
    ("http://gpu-box:9000", "http://gpu-box:9000/v1"),
    ("https://ollama.example.com/", "https://ollama.example.com/v1"),
    ("http://gpu-box:9000/v1", "http://gpu-box:9000/v1"),
    ("[::1]:11500", "http://[::1]:11500/v1"),
])
async def test_ollama_host_forms(tmp_path, host, url):
    env = {"OLLAMA_HOST": host} if host else {}
    async with registry(tmp_path, **env) as reg:
        provider, model = reg.resolve("ollama/llama3.1:8b")
        assert isinstance(provider, OpenAICompatible) and provider.base_url == url and model == "llama3.1:8b"
        assert reg.config.sources["ollama"].candidates == [Candidate(url)]  # no key
        assert reg.config.sources["ollama"].explicit is bool(host)


def test_ollama_url_keeps_a_path():
    assert ollama_url("example.com/ollama") == "http://example.com:11434/ollama/v1"


def test_nothing_configured_says_what_to_set(tmp_path):
    reg = registry(tmp_path)
    with pytest.raises(InputError) as info:
        reg.resolve("gpt-4o")
    text = str(info.value)
    assert text.startswith("openai: not configured — set OPENAI_API_KEY, or add [providers.openai] keys to ")
    assert "no model provider is configured" in text and "ANTHROPIC_API_KEY" in text and "ollama serve" in text
    with pytest.raises(InputError, match="set ANTHROPIC_API_KEY"):
        reg.resolve("claude-sonnet-4-5")


def test_something_configured_names_only_what_is_missing(tmp_path):
    with pytest.raises(InputError) as info:
        registry(tmp_path, OPENAI_API_KEY=KEY_1).resolve("claude-sonnet-4-5")
    assert "set ANTHROPIC_API_KEY" in str(info.value) and "no model provider" not in str(info.value)


# --- the config file ---------------------------------------------------------------------------

FILE = f"""
[providers.openai]
keys = ["{KEY_1}"]

[providers.anthropic]
api_key_env = "MY_ANTHROPIC"

[endpoints.team]
base_url = "http://10.0.0.5:8000/v1"
api_key = "{KEY_2}"
headers = {{ X-Title = "orchestrator" }}

[[endpoints.team.candidates]]
base_url = "http://10.0.0.6:8000/v1"

[endpoints.claude-proxy]
kind = "anthropic"
base_url = "http://10.0.0.7"

[models."openai/gpt-4o"]
context_window = 64000

[models."ollama/qwen3"]
context_window = 131072
thinking = false
"""


async def test_file_and_environment_together(tmp_path):
    async with registry(tmp_path, FILE, OPENAI_API_KEY=f"{KEY_2},{KEY_1}", MY_ANTHROPIC=ANT_KEY) as reg:
        src = reg.config.sources
        # the file's key first, the environment's after it, each once
        assert [c.api_key for c in src["openai"].candidates] == [KEY_1, KEY_2]
        assert src["anthropic"].candidates == [Candidate("https://api.anthropic.com", ANT_KEY)]
        assert src["team"].candidates == [Candidate("http://10.0.0.5:8000/v1", KEY_2),
                                          Candidate("http://10.0.0.6:8000/v1")]
        team, model = reg.resolve("team/Qwen/Qwen3-32B")
        assert isinstance(team, Rotation) and team.id == "team" and model == "Qwen/Qwen3-32B"
        proxy, _ = reg.resolve("claude-proxy/claude-sonnet-4-5")
        assert isinstance(proxy, Anthropic) and proxy.id == "claude-proxy"


def test_a_key_variable_named_in_the_file_but_unset(tmp_path):
    reg = registry(tmp_path, FILE)
    with pytest.raises(InputError, match="anthropic: not configured — set MY_ANTHROPIC \\(named by api_key_env"):
        reg.resolve("claude-sonnet-4-5")


def test_an_unset_key_variable_keeps_the_environment_keys(tmp_path):
    reg = registry(tmp_path, '[providers.openai]\napi_key_env = "TEAM_OPENAI"\n', OPENAI_API_KEY=KEY_1)
    assert reg.config.sources["openai"].candidates == [Candidate("https://api.openai.com/v1", KEY_1)]
    assert reg.config.sources["openai"].missing == ["TEAM_OPENAI"]


def test_an_endpoint_whose_key_variable_is_unset_is_called_without_a_key(tmp_path):
    """An endpoint's key is optional (a local server needs none); `missing` still names the variable."""
    reg = registry(tmp_path, '[endpoints.box]\nbase_url = "http://10.0.0.9/v1"\napi_key_env = "BOX_KEY"\n')
    assert reg.config.sources["box"].candidates == [Candidate("http://10.0.0.9/v1")]
    assert reg.config.sources["box"].missing == ["BOX_KEY"]
    provider, model = reg.resolve("box/m")
    assert isinstance(provider, OpenAICompatible) and model == "m"


def test_the_file_is_found_in_xdg_config_home(tmp_path):
    folder = tmp_path / "xdg" / "orchestrator"
    folder.mkdir(parents=True)
    (folder / "config.toml").write_text(f'[providers.openai]\napi_key = "{KEY_1}"\n')
    reg = Registry.load({"XDG_CONFIG_HOME": str(tmp_path / "xdg")})
    assert reg.config.path == folder / "config.toml"
    assert reg.config.sources["openai"].candidates == [Candidate("https://api.openai.com/v1", KEY_1)]


@pytest.mark.parametrize("toml, says", [
    ("[providers.openai\nkeys = 1\n", "not valid TOML: Expected ']' at the end of a table declaration (at line 1"),
    ("[providers.openai]\nkyes = []\n", "unknown field `kyes` - in [providers.openai]"),
    ("[providers.openai]\nkeys = [1]\n", "Expected `str`, got `int` - at `providers.openai.keys[0]`"),
    ("[providers.mistral]\napi_key = 'x'\n", "[providers.mistral]: unknown provider; known are openai, anthropic, "
                                               "ollama; for another server use [endpoints.mistral]"),
    ("[provider.openai]\n", "unknown table [provider]"),
    ("[endpoints.box]\napi_key = 'x'\n", "[endpoints.box]: base_url is required"),
    ("[endpoints.openai]\nbase_url = 'http://x'\n", "'openai' is reserved; use [providers.openai]"),
    ("[endpoints.box]\nbase_url = 'http://x'\nkind = 'gemini'\n", "Invalid enum value 'gemini'"),
    ("[models.\"openai/gpt-4o\"]\ncontext_window = -1\n", "Expected `int` >= 1"),
    ("[models.\"openai/gpt-4o\"]\ninput_price = -2\n", "Expected `float` >= 0"),
    ("[providers.anthropic]\nheaders = {x-a = 'b'}\n", "headers are supported for OpenAI-compatible servers only"),
    ("[models.\"mystery\"]\ncontext_window = 1000\n", "[models.\"mystery\"]: model 'mystery': say which provider"),
])
def test_errors_in_the_file_name_the_file_and_the_problem(tmp_path, toml, says):
    with pytest.raises(InputError) as info:
        registry(tmp_path, toml)
    assert str(info.value).startswith(str(tmp_path / "config.toml") + ": ")
    assert says in str(info.value)


def test_a_named_config_file_must_exist(tmp_path):
    with pytest.raises(InputError, match="no such file \\(named by ORCHESTRATOR_CONFIG\\)"):
        load_config({"ORCHESTRATOR_CONFIG": str(tmp_path / "nope.toml")})


async def test_the_registry_closes_the_clients_it_made(tmp_path):
    async with registry(tmp_path, FILE, OPENAI_API_KEY=KEY_1) as reg:
        openai, _ = reg.resolve("gpt-4o")
        team, _ = reg.resolve("team/m")
        clients = list(reg._clients)
        assert len(clients) == 2 and not any(c.is_closed for c in clients)
    assert all(c.is_closed for c in clients)


# --- the catalog -------------------------------------------------------------------------------

@pytest.mark.parametrize("provider, model, window, output", [
    ("openai", "gpt-4.1", 1_047_576, 32_768),
    ("openai", "gpt-4.1-nano-2025-04-14", 1_047_576, 32_768),
    ("openai", "gpt-4o-mini", 128_000, 16_384),
    ("openai", "o3-mini", 200_000, 100_000),
    ("openai", "o4-mini", 200_000, 100_000),
    ("openai", "gpt-5-mini", 400_000, 128_000),
    ("anthropic", "claude-sonnet-4-5-20250929", 200_000, 64_000),
    ("anthropic", "claude-opus-4-1-20250805", 200_000, 32_000),
    ("anthropic", "claude-haiku-4-5", 200_000, 64_000),
    ("ollama", "llama3.1:70b", 131_072, 8_192),
    ("ollama", "qwen3:8b", 40_960, 32_768),
    ("team", "Qwen/Qwen3-8B", 40_960, 32_768),  # a vLLM-style id finds its family in the last segment
])
def test_catalog_by_exact_name_then_longest_prefix(provider, model, window, output):
    info = Catalog().info(provider, model)
    assert (info.context_window, info.max_output) == (window, output)


def test_catalog_capabilities_and_the_1m_note():
    sonnet = Catalog().info("anthropic", "claude-sonnet-4-5")
    assert sonnet.images_in_tool_results and sonnet.thinking and "1,000,000" in sonnet.note
    gpt = Catalog().info("openai", "gpt-4o")
    assert not gpt.images_in_tool_results and not gpt.thinking


def test_unknown_model_gets_defaults_and_one_log_line():
    catalog = Catalog()
    with structlog.testing.capture_logs() as logs:
        first = catalog.info("ollama", "my-finetune:latest")
        again = catalog.info("ollama", "my-finetune:latest")
    assert first == again == UNKNOWN
    assert (UNKNOWN.context_window, UNKNOWN.max_output) == (32_768, 4_096)
    # a debug detail: the chat tells its user once, in its own words (not a warning between the lines)
    assert [e["model"] for e in logs if e["log_level"] == "info"] == ["my-finetune:latest"]


def test_overrides_from_the_file(tmp_path):
    reg = registry(tmp_path, FILE + '\n[models."gpt-4.1"]\nmax_output = 1000\n'
                                    '\n[models."ollama/my-model"]\ncontext_window = 65536\nmax_output = 2048\n')
    assert reg.info("openai/gpt-4o").context_window == 64_000
    assert reg.info("gpt-4o").max_output == 16_384  # only the named field changes
    assert reg.info("gpt-4.1").max_output == 1000  # a bare key is routed like a model string
    assert reg.info("ollama/qwen3:14b").context_window == 131_072  # by prefix, like the catalog
    assert reg.info("ollama/qwen3:14b").thinking is False
    with structlog.testing.capture_logs() as logs:
        mine = reg.info("ollama/my-model")
    assert (mine.context_window, mine.max_output, mine.note) == (65_536, 2048, "") and not logs


def test_prices_from_the_catalog_and_the_file(tmp_path):
    reg = registry(tmp_path, FILE + '\n[models."gpt-4o"]\noutput_price = 12.5\n'
                                    '\n[models."ollama/my-model"]\ninput_price = 0.1\noutput_price = 0.2\n')
    price = reg.catalog.price
    assert price("openai", "gpt-4o-2024-08-06") == Price(2.5, 12.5, 1.25)  # only the named price changes
    assert price("anthropic", "claude-sonnet-4-5-20250929") == Price(3.0, 15.0, 0.3)
    assert price("ollama", "qwen3:8b") == Price(0, 0, 0)  # served locally
    assert price("ollama", "my-model") == Price(0.1, 0.2, 0.1)  # no cache price: input's
    assert price("openai", "my-finetune") is None
    assert Price(2.5, 10.0, 1.25).cost(1_000_000, 100_000, 400_000) == pytest.approx(0.6 * 2.5 + 0.4 * 1.25 + 1.0)


async def test_anthropic_output_cap_comes_from_the_catalog(tmp_path):
    with FakeServer() as srv:
        srv.replies.append(stream_anthropic("hi"))
        async with registry(tmp_path, ANTHROPIC_API_KEY=ANT_KEY, ANTHROPIC_BASE_URL=srv.url) as reg:
            provider, model = reg.resolve("claude-opus-4-1")
            await complete(provider, Request(agent="a", model=model, system="",
                                             messages=[ModelMessage("user", [TextBlock("hi")])]))
    assert srv.requests[0]["json"]["max_tokens"] == 32_000


def stream_anthropic(text: str):
    return Reply(chunks=sse(
        {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
                                              "model": "claude-opus-4-1", "stop_reason": None,
                                              "usage": {"input_tokens": 1, "output_tokens": 0}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}},
        {"type": "message_stop"}, event_names=True))


# --- masking -------------------------------------------------------------------------------------

def test_masked_keys():
    assert mask(KEY_1) == "sk-…aaaa"
    assert mask("abcdefghij").startswith("key#") and "ij" not in mask("abcdefghij") and mask(None) == "(no key)"
    assert KEY_1 not in repr(Candidate("http://x", KEY_1))


# --- scenario runner: scripted agents keep their script, others go through the registry ---------

MIXED = """\
name: mixed
description: "A scripted commander hands a sub-task to a helper that runs on a real endpoint."
team:
  agents:
    - name: helper
      description: answers questions
      model: team/m-1
models:
  commander:
    - call: {run_worker: {task: "Say hello.", agent: helper}}
    - say: The helper said hello.
turns:
  - user: ask the helper
"""


async def test_a_registry_routes_non_scripted_agents(tmp_path):
    (tmp_path / "s.yaml").write_text(MIXED)
    with FakeServer() as srv:
        srv.replies.append(openai_answer("hello from the endpoint"))
        toml = f'[endpoints.team]\nbase_url = "{srv.url}/v1"\n'
        async with registry(tmp_path, toml) as reg:
            result = await run_scenario(load_scenario(tmp_path / "s.yaml"), model=reg)
    assert [r["json"]["model"] for r in srv.requests] == ["m-1"]
    texts = {(m.author, m.text) for m in result.outcome.messages}
    assert ("helper", "hello from the endpoint") in texts
    assert ("commander", "The helper said hello.") in texts


def openai_answer(text: str):
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m-1",
             "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
    end = {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    return Reply(chunks=sse(chunk, end, done=True))


# --- the CLI ---------------------------------------------------------------------------------------

def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in VENDOR_ENV}
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], cwd=ROOT, env={**base, **env},
                          capture_output=True, text=True, timeout=60)


def test_models_checks_every_endpoint_and_shows_masked_keys_only(tmp_path):
    with FakeServer() as gone:
        pass  # once closed, nobody listens on its port
    with FakeServer() as good, FakeServer() as bad:
        good.replies.append(json_body(200, {"object": "list", "data": [{"id": "m-1", "object": "model"}]}))
        bad.replies.append(json_body(401, {"error": {"message": f"Incorrect API key provided: {KEY_2}",
                                                     "type": "invalid_request_error", "code": "invalid_api_key"}}))
        toml = (f'[endpoints.good]\nbase_url = "{good.url}/v1"\napi_key = "{KEY_1}"\n'
                f'[endpoints.bad]\nbase_url = "{bad.url}/v1"\napi_key = "{KEY_2}"\n')
        # Ollama's address is that closed port, so its check fails fast and the same on every machine.
        env = env_with(tmp_path, toml, OLLAMA_HOST=gone.url)
        out = cli(env, "models", "--timeout", "5")
        good.replies.append(json_body(200, {"object": "list", "data": []}))
        bad.replies.append(json_body(401, {"error": {"message": "no", "type": "invalid_request_error"}}))
        js = cli(env, "models", "--json", "--timeout", "5")
        assert [r["path"] for r in good.requests + bad.requests] == ["/v1/models"] * 4
        assert good.requests[0]["headers"]["Authorization"] == f"Bearer {KEY_1}"
    lines = out.stdout.splitlines()
    assert out.returncode == 1, out.stderr  # a configured key failed its check
    assert "openai: not configured — set OPENAI_API_KEY, or add [providers.openai] keys to " in out.stdout
    assert "anthropic: not configured — set ANTHROPIC_API_KEY, or add [providers.anthropic] keys to " \
        in out.stdout
    assert f"  not running at {gone.url}/v1 — cannot connect to {gone.url}/v1" in out.stdout
    assert "ollama: not reachable" not in out.stdout  # the line above says it once
    assert f"  ok      sk-…aaaa at {good.url}/v1" in lines
    failed = next(line for line in lines if line.startswith("  FAILED  sk-…bbbb"))
    assert "auth" in failed
    for key in (KEY_1, KEY_2):
        assert key not in out.stdout and key not in out.stderr

    rows = {r["name"]: r for r in map(json.loads, js.stdout.splitlines())}
    assert set(rows) == {"openai", "anthropic", "ollama", "good", "bad", "scripted"}
    assert rows["good"]["candidates"] == [{"key": "sk-…aaaa", "base_url": f"{good.url}/v1", "ok": True,
                                          "error": "", "error_class": ""}]
    assert rows["bad"]["candidates"][0]["error_class"] == "auth" and not rows["bad"]["candidates"][0]["ok"]
    assert not rows["anthropic"]["configured"] and rows["anthropic"]["hint"].startswith("anthropic: not configured")
    assert KEY_1 not in js.stdout and KEY_2 not in js.stdout


def test_run_with_a_model_and_nothing_configured_says_what_to_set(tmp_path):
    out = cli(env_with(tmp_path), "run", str(ROOT / "scenarios" / "greeting.yaml"), "--model", "gpt-4o")
    assert out.returncode == 2
    assert "error: openai: not configured — set OPENAI_API_KEY" in out.stderr
    assert "no model provider is configured" in out.stderr


def test_run_with_an_unknown_provider_is_bad_input(tmp_path):
    out = cli(env_with(tmp_path), "run", str(ROOT / "scenarios" / "greeting.yaml"), "--model", "nope/x")
    assert out.returncode == 2 and "unknown provider 'nope'" in out.stderr


async def test_anthropic_thinking_from_the_model_configuration_and_per_agent(tmp_path):
    toml = '[models."anthropic/claude-opus-4-1"]\nthinking = {budget_tokens = 8000}\n'
    with FakeServer() as srv:
        srv.replies.extend(stream_anthropic("hi") for _ in range(4))
        async with registry(tmp_path, toml, ANTHROPIC_API_KEY=ANT_KEY, ANTHROPIC_BASE_URL=srv.url) as reg:
            assert reg.info("anthropic/claude-opus-4-1").thinking_budget == 8000
            provider, model = reg.resolve("claude-opus-4-1")
            other, other_model = reg.resolve("claude-sonnet-4-5")
            said = [ModelMessage("user", [TextBlock("hi")])]
            for p, m, kw in ((provider, model, {}), (provider, model, {"thinking_budget": 2048}),
                             (other, other_model, {}), (provider, model, {"auxiliary": True})):
                await complete(p, Request(agent="a", model=m, system="", messages=said, **kw))
    bodies = [r["json"] for r in srv.requests]
    assert bodies[0]["thinking"] == {"type": "enabled", "budget_tokens": 8000} and bodies[0]["max_tokens"] == 32_000
    assert bodies[1]["thinking"]["budget_tokens"] == 2048  # the agent's own setting wins
    assert "thinking" not in bodies[2] and "thinking" not in bodies[3]  # another model; a summary call


def test_a_thinking_budget_too_large_for_the_output_cap_raises_the_cap():
    from orchestrator.providers.anthropic import build_body
    body = build_body(Request(agent="a", model="m", system="", messages=[ModelMessage("user", [TextBlock("x")])]),
                      "anthropic", 8192, thinking=16_000)
    assert body["thinking"]["budget_tokens"] == 16_000 and body["max_tokens"] > 16_000


def test_a_thinking_budget_below_the_floor_is_bad_configuration(tmp_path):
    with pytest.raises(InputError, match="budget_tokens"):
        registry(tmp_path, '[models."anthropic/claude-opus-4-1"]\nthinking = {budget_tokens = 100}\n')

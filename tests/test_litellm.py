"""Against a real LiteLLM proxy on 127.0.0.1 with mock responses: its OpenAI-compatible route streams,
its Anthropic-compatible /v1/messages answers a streaming request with one complete JSON message.

LiteLLM is a heavy, test-only dependency (the `gateway` extra, or `make test-gateway`, which puts it in
its own .venv-gateway): the proxy is a separate process, so it need not share this environment.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent
MASTER_KEY = "sk-orchestrator-test-" + "0" * 32
CONFIG = """
model_list:
  - model_name: claude-mock
    litellm_params: {model: anthropic/claude-3-5-sonnet-20241022, api_key: unused, mock_response: "Hi from the Anthropic route"}
  - model_name: gpt-mock
    litellm_params: {model: openai/gpt-4o, api_key: unused, mock_response: "Hi from the OpenAI route"}
"""


def _litellm() -> str | None:
    """The proxy's command: ORCHESTRATOR_LITELLM, this environment's, .venv-gateway's, or PATH's."""
    candidates = [os.environ.get("ORCHESTRATOR_LITELLM"), str(Path(sys.executable).parent / "litellm"),
                  str(ROOT / ".venv-gateway" / "bin" / "litellm"), shutil.which("litellm")]
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    command = _litellm()
    if command is None:
        pytest.skip("litellm is not installed: `make test-gateway` (or pip install '.[gateway]') runs this test")
    folder = tmp_path_factory.mktemp("litellm")
    (folder / "config.yaml").write_text(CONFIG)
    port = _free_port()
    env = {**os.environ, "LITELLM_MASTER_KEY": MASTER_KEY, "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "LITELLM_TELEMETRY": "False", "NO_PROXY": "127.0.0.1"}
    log = (folder / "proxy.log").open("wb")
    proc = subprocess.Popen([command, "--config", str(folder / "config.yaml"), "--host", "127.0.0.1",
                             "--port", str(port)], stdout=log, stderr=subprocess.STDOUT, env=env, cwd=folder,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180  # it imports a great deal before it listens
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the LiteLLM proxy exited ({proc.returncode}):\n{(folder / 'proxy.log').read_text()[-3000:]}")
            try:
                if httpx.get(f"{url}/health/liveliness", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("the LiteLLM proxy did not start in 180 s")
            time.sleep(0.5)
        yield url, folder
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def run_against(proxy, kind: str, model: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    url, folder = proxy
    config = folder / f"{kind}.toml"
    base = url if kind == "anthropic" else f"{url}/v1"
    config.write_text(f'[endpoints.gateway]\nkind = "{kind}"\nbase_url = "{base}"\napi_key = "{MASTER_KEY}"\n')
    done = subprocess.run([str(Path(sys.executable).parent / "orchestrator"), "run", str(ROOT / "scenarios" / "greeting.yaml"),
                           "--model", f"gateway/{model}", "--json"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "ORCHESTRATOR_CONFIG": str(config)})
    return done, [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


@pytest.mark.parametrize("kind, model, text", [
    ("openai", "gpt-mock", "Hi from the OpenAI route"),
    ("anthropic", "claude-mock", "Hi from the Anthropic route"),
])
def test_a_room_runs_through_the_proxy(proxy, kind, model, text):
    done, events = run_against(proxy, kind, model)
    assert done.returncode == 0, done.stderr[-2000:]
    replies = [e for e in events if e["type"] == "message" and e["author"] == "commander"]
    assert [r["text"] for r in replies] == [text]
    assert "".join(e["text"] for e in events if e["type"] == "text_delta") == text
    assert not [e for e in events if e["type"] in ("retry", "error")]

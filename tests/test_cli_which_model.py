"""A command that needs a model and has none says what to set in its own words: `serve` suggests
`serve --scripted`, not `chat --scripted`."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.mark.parametrize("command", [["chat"], ["serve"]])
def test_no_model_suggests_the_command_that_was_typed(tmp_path, command):
    environ = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith(
        ("ORCHESTRATOR_", "OLLAMA_", "OPENAI_", "ANTHROPIC_"))}
    environ.update(HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path / "cfg"))
    out = subprocess.run([sys.executable, "-m", "orchestrator", *command, "--db", str(tmp_path / "rooms.db")],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60, env=environ, stdin=subprocess.DEVNULL)
    assert out.returncode == 2, out.stdout + out.stderr
    name = command[0]
    assert f"`orchestrator {name} --scripted tutor-handoff`" in out.stderr, out.stderr
    assert f"`orchestrator {name} --model ollama/qwen3`" in out.stderr
    other = "serve" if name == "chat" else "chat"
    assert f"orchestrator {other} " not in out.stderr

"""Every Python block of the README and docs/ runs, as the complete program it is, so an example can never
break silently. A block meant for a real model runs against a local OpenAI-compatible server (Ollama's
address, played by tests/fakeserver.py); no block needs a key."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakeserver import FakeServer, Reply, sse

ROOT = Path(__file__).resolve().parent.parent
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def blocks() -> list[tuple[str, str]]:
    found = []
    for path in FILES:
        text = path.read_text()
        for m in BLOCK.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            found.append((f"{path.relative_to(ROOT)}:{line}", m.group(1)))
    return found


BLOCKS = blocks()


def test_the_docs_hold_python_blocks():
    assert len(BLOCKS) >= 4, BLOCKS


def chat_reply(text: str) -> Reply:
    return Reply(chunks=sse({"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]},
                            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                             "usage": {"prompt_tokens": 10, "completion_tokens": 5}}, done=True))


@pytest.mark.parametrize("where,code", BLOCKS, ids=[w for w, _ in BLOCKS])
def test_a_docs_block_runs(where, code, tmp_path):
    with FakeServer() as server:
        server.replies.extend(chat_reply("Nurseries hold\ntheir tasks close.") for _ in range(8))
        env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "OLLAMA_HOST": server.url.removeprefix("http://"),
               "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_DATA_HOME": str(tmp_path / "data")}
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                             cwd=tmp_path, env=env)
        asked = [r for r in server.requests if r["path"].endswith("/chat/completions")]
    if "ollama/" in code:  # it spoke to the model server, and printed what the model said
        assert asked and "Nurseries hold" in run.stdout, (run.stdout, run.stderr[-2000:])
    assert run.returncode == 0, f"{where} failed:\n{run.stderr[-3000:]}"
    assert run.stdout.strip(), f"{where} printed nothing"
    assert "Traceback" not in run.stderr, run.stderr


def test_the_blocks_print_what_they_say(tmp_path):
    """The first block's answer comes from its Python tool through the researcher."""
    where, code = BLOCKS[0]
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                         env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert "commander: The researcher says: a room is a group chat a commander hosts." in run.stdout, run.stderr

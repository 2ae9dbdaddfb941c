"""`[serve] token_file`: a token kept across restarts so a bookmarked address keeps working, in a file of the
user's alone (one others may read is refused), and still never on a command line or in an environment."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.cli.serve import server_token
from orchestrator.core.errors import InputError
from tests.serving import ROOT, start_server

pytest.importorskip("starlette", reason="the serve extra is not installed: pip install -e '.[serve]'")

import httpx  # noqa: E402


def config(tmp_path: Path, body: str) -> dict[str, str]:
    path = tmp_path / "config.toml"
    path.write_text(body)
    return {"ORCHESTRATOR_CONFIG": str(path), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}


def test_without_a_token_file_each_start_has_a_new_token(tmp_path):
    env = config(tmp_path, "")
    (first, kept), (second, _) = server_token(env), server_token(env)
    assert kept is None and first != second and len(first) >= 24


def test_the_token_file_is_made_once_for_the_user_alone_and_kept(tmp_path):
    env = config(tmp_path, '[serve]\ntoken_file = "serve-token"\n')
    token, kept = server_token(env)
    assert kept == tmp_path / "serve-token"  # beside the config file
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert kept.read_text().strip() == token
    assert server_token(env) == (token, kept)


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660])
def test_a_token_file_others_may_read_is_refused(tmp_path, mode):
    env = config(tmp_path, f'[serve]\ntoken_file = "{tmp_path / "t"}"\n')
    (tmp_path / "t").write_text("a-token-of-enough-length\n")
    (tmp_path / "t").chmod(mode)
    with pytest.raises(InputError, match=r"others may read the token file .*chmod 600"):
        server_token(env)


@pytest.mark.parametrize("body, says", [
    ('[serve]\ntoken_file = ""\n', "token_file must be a path"),
    ('[serve]\ntoken = "x"\n', "takes token_file"),
])
def test_a_bad_serve_table_says_what_it_takes(tmp_path, body, says):
    with pytest.raises(InputError, match=says):
        server_token(config(tmp_path, body))


def test_a_token_file_without_a_usable_token_is_refused(tmp_path):
    env = config(tmp_path, f'[serve]\ntoken_file = "{tmp_path / "t"}"\n')
    (tmp_path / "t").write_text("short\n")
    (tmp_path / "t").chmod(0o600)
    with pytest.raises(InputError, match="no usable token"):
        server_token(env)


def processes(root: int) -> list[int]:
    """`root` and every process under it."""
    out = [root]
    for pid in out:
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            continue
        out += [int(c) for c in children]
    return out


def test_a_bookmark_works_after_a_restart_and_the_token_is_in_no_argv_or_environment(tmp_path, monkeypatch):
    for name, value in config(tmp_path, '[serve]\ntoken_file = "serve-token"\n').items():
        monkeypatch.setenv(name, value)
    server = start_server(tmp_path, "--workers", "2", "--scripted", "greeting")
    try:
        bookmark = server.url
        assert httpx.get(f"{server.base}/rooms", headers=server.auth, timeout=10).status_code == 200
        for _ in range(100):  # both workers up
            if len(pids := processes(server.proc.pid)) >= 3:
                break
            httpx.get(f"{server.base}/rooms", headers=server.auth, timeout=10)
        for pid in pids:
            for part in ("cmdline", "environ"):
                assert server.token.encode() not in Path(f"/proc/{pid}/{part}").read_bytes(), (pid, part)
    finally:
        assert server.stop() == 0, (tmp_path / "serve.err").read_text()
    again = start_server(tmp_path, "--workers", "2", "--scripted", "greeting")
    try:
        assert again.url.split("#")[1] == bookmark.split("#")[1]
        assert httpx.get(f"{again.base}/rooms", headers=server.auth, timeout=10).status_code == 200
    finally:
        assert again.stop() == 0, (tmp_path / "serve.err").read_text()


def test_serve_refuses_a_readable_token_file_in_one_line(tmp_path):
    env = config(tmp_path, '[serve]\ntoken_file = "serve-token"\n')
    (tmp_path / "serve-token").write_text("a-token-of-enough-length\n")
    (tmp_path / "serve-token").chmod(0o644)
    out = subprocess.run([sys.executable, "-m", "orchestrator", "serve", "--db", str(tmp_path / "x.db"), "--port", "0",
                          "--scripted", "greeting"], cwd=ROOT, env=os.environ | env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith(f"error: {tmp_path / 'serve-token'}: others may read the token file (mode 644)")
    assert "a-token-of-enough-length" not in out.stderr

"""A real coding-agent CLI that speaks ACP, for the tests: Zed's Claude Code adapter from npm at pinned versions,
installed once into a cache outside the clone, the loopback vendor that answers it, and its command line.

Claude Code honours ANTHROPIC_BASE_URL for its model calls, but a few calls (fast-mode status, a flush on
shutdown) go to api.anthropic.com whatever the base URL; the agent's proxy is the vendor, which refuses them.
"""
from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from orchestrator.tools.process import command_env
from tests.fakeserver import FakeServer, Reply
from tests.test_provider_anthropic import stream, text_block

# The pins: the adapter pins its agent SDK exactly, and the SDK bundles Claude Code's cli.js, so these two
# name the whole agent. A change here names a new cache entry, so an old install is never taken for a new one.
ADAPTER = "@zed-industries/claude-code-acp"
PINS = {ADAPTER: "0.16.2", "@anthropic-ai/claude-agent-sdk": "0.2.44"}
ENTRY = Path("node_modules/@zed-industries/claude-code-acp/dist/index.js")
NODE_MAJOR = 18  # the adapter's engines field
INSTALL_TIMEOUT = 600.0
DUMMY_KEY = "sk-ant-test-not-a-key"

# Claude Code's own switches for what it sends besides model calls: with them its start makes no request
# but the prompt's (no token counting, no quota probe, no telemetry, no fast-mode status).
QUIET = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_DISABLE_FAST_MODE": "1"}


class Unavailable(Exception):
    """The real CLI cannot run on this machine; the message says why and what would fix it."""


def root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "orchestrator-acp"


def install(cache: Path | None = None) -> Path:
    """The adapter's entry script, installed into `cache` (default `root()`) on first use and offline after.

    Raises Unavailable when node or npm is missing or too old, or the install fails.
    """
    folder = (cache or root()) / f"claude-code-acp-{PINS[ADAPTER]}"
    if _finished(folder):
        return folder / ENTRY
    npm = _tools(folder.parent)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / ".lock", "w") as lock:  # another test process may be installing the same pins
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _finished(folder):
            _install(npm, folder)
    return folder / ENTRY


def _finished(folder: Path) -> bool:
    """A finished entry has a manifest naming these pins; a half-done one never got renamed in."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
    except (OSError, ValueError):
        return False
    return manifest.get("pins") == PINS and (folder / ENTRY).is_file()


def _tools(cache: Path) -> str:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        raise Unavailable(f"{'node' if node is None else 'npm'} is not on PATH: the real-CLI ACP test needs "
                          f"Node.js {NODE_MAJOR}+ with npm (then it installs {ADAPTER} once into {cache})")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    major = re.match(r"v(\d+)\.", version)
    if major is None or int(major.group(1)) < NODE_MAJOR:
        raise Unavailable(f"node {version or '(no version)'} is older than {ADAPTER} needs: install Node.js "
                          f"{NODE_MAJOR}+ to run the real-CLI ACP test")
    return npm


def _install(npm: str, folder: Path) -> None:
    staging = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
    try:
        spec = f"{ADAPTER}@{PINS[ADAPTER]}"
        (staging / "package.json").write_text(json.dumps({"private": True, "dependencies": {ADAPTER: PINS[ADAPTER]}}))
        started = time.monotonic()
        # No install scripts: nothing in this tree needs one, and they are code run from the registry.
        argv = [npm, "install", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]
        try:
            done = subprocess.run(argv, cwd=staging, capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise Unavailable(f"npm install {spec} took over {INSTALL_TIMEOUT:.0f} s: is the npm registry "
                              "reachable from here?") from None
        if done.returncode != 0:
            raise Unavailable(f"npm install {spec} failed (exit {done.returncode}): {_npm_error(done.stderr)}\n"
                              "the real-CLI ACP test needs the npm registry once; it runs offline afterwards")
        found = {name: _version(staging / "node_modules" / name) for name in PINS}
        if found != PINS:
            raise Unavailable(f"npm install {spec} gave {found}, not the pinned {PINS}: update PINS in "
                              "tests/acpreal.py together with the adapter")
        sdk = json.loads((staging / "node_modules/@anthropic-ai/claude-agent-sdk/package.json").read_text())
        manifest = {"pins": PINS, "claude_code": sdk.get("claudeCodeVersion"),
                    "seconds": round(time.monotonic() - started, 1)}
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=1))
        staging.rename(folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # gone already once renamed in


def _npm_error(stderr: str) -> str:
    """npm's one line that says what went wrong, past its `code`/`errno` lines (its last is a log's path)."""
    for line in stderr.splitlines():
        text = line.removeprefix("npm error").strip()
        if text and not re.match(r"(code|syscall|errno) \S+$", text):
            return text
    return stderr.strip()[-300:] or "(no output)"


def _version(package: Path) -> str | None:
    try:
        return json.loads((package / "package.json").read_text()).get("version")
    except (OSError, ValueError):
        return None


class Vendor(FakeServer):
    """The FakeServer, also standing as the agent's HTTPS proxy: a tunnel it is asked for is recorded in
    `tunnels` and refused, so what the CLI would send past its base URL stays on this machine."""

    def __init__(self) -> None:
        super().__init__()
        self.tunnels: list[str] = []
        served = self._httpd.RequestHandlerClass
        tunnels = self.tunnels

        class Handler(served):  # type: ignore[misc, valid-type]  # FakeServer builds its handler per server
            def do_CONNECT(self) -> None:
                tunnels.append(self.path)
                self.send_response(403)
                self.send_header("content-length", "0")
                self.end_headers()

        self._httpd.RequestHandlerClass = Handler


def reply(*pieces: str) -> Reply:
    """A streamed Messages reply whose one text block arrives as `pieces`, ending the turn."""
    return Reply(chunks=stream(*text_block(0, *pieces)))


@dataclass(frozen=True)
class Agent:
    """How to start the adapter as an ACP agent: its argv and its whole environment (nothing inherited)."""

    argv: list[str]
    env: dict[str, str]
    home: Path


def agent(entry: Path, vendor_url: str, home: Path) -> Agent:
    """The adapter at `entry` talking to the vendor at `vendor_url` with a dummy key, HOME a fresh `home`.

    Claude Code needs no file in its HOME to start with an API key; it writes its state (.claude.json,
    .claude/) there.
    """
    node = shutil.which("node")
    if node is None:
        raise Unavailable("node is not on PATH")
    home.mkdir(parents=True)
    env = command_env({
        "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local/state"), "XDG_DATA_HOME": str(home / ".local/share"),
        "ANTHROPIC_BASE_URL": vendor_url, "ANTHROPIC_API_KEY": DUMMY_KEY,
        "HTTPS_PROXY": vendor_url, "HTTP_PROXY": vendor_url, "NO_PROXY": "127.0.0.1,localhost",
        **QUIET,
    })
    return Agent([node, str(entry)], env, home)

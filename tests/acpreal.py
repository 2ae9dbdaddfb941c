"""Real coding-agent CLIs that speak ACP, for the tests: Zed's adapters for Claude Code and for Codex, and Gemini
CLI, from npm at pinned versions, installed once into a cache outside the clone, the loopback vendor that answers
them, and their command lines.

Claude Code honours ANTHROPIC_BASE_URL for its model calls, but a few calls (fast-mode status, a flush on
shutdown) go to api.anthropic.com whatever the base URL; the agent's proxy is the vendor, which refuses them.
Codex takes its model provider from its config.toml, which names the vendor here. Gemini CLI takes its API's
address from GOOGLE_GEMINI_BASE_URL, and its settings.json turns off its usage statistics.
"""
from __future__ import annotations

import fcntl
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.tools.process import command_env
from tests.fakeserver import FakeServer, Reply
from tests.test_provider_anthropic import stream, text_block

INSTALL_TIMEOUT = 600.0
DUMMY_KEY = "sk-ant-test-not-a-key"
DUMMY_OPENAI_KEY = "sk-test-not-a-key"

# Claude Code's own switches for what it sends besides model calls: with them its start makes no request
# but the prompt's (no token counting, no quota probe, no telemetry, no fast-mode status).
QUIET = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_DISABLE_FAST_MODE": "1"}


class Unavailable(Exception):
    """The real CLI cannot run on this machine; the message says why and what would fix it."""


@dataclass(frozen=True)
class Adapter:
    """An ACP agent on npm at pinned versions (an adapter, or a CLI that speaks ACP itself): what `install` puts
    into the cache, and the file that starts it.

    The pins name the whole agent: the adapter first, then each package whose code is the agent's. A change of
    the adapter's pin names a new cache entry, so an old install is never taken for a new one.
    """

    pins: dict[str, str]
    entry: str  # the file that starts the agent, inside the install's folder
    node_major: int  # the Node.js it runs on; 0 for a native program, which needs only npm's own to install
    # Versions worth keeping in the manifest besides the pins: its key -> (package, field of its package.json).
    recorded: dict[str, tuple[str, str]] = field(default_factory=dict)
    build: str = ""  # the machine a native program is built for, part of the cache entry's name

    @property
    def package(self) -> str:
        """The adapter's npm name."""
        return next(iter(self.pins))

    @property
    def folder(self) -> str:
        """The cache entry's name."""
        name = f"{self.package.rsplit('/', 1)[-1]}-{self.pins[self.package]}"
        return f"{name}-{self.build}" if self.build else name


# The Claude Code adapter pins its agent SDK exactly, and the SDK bundles Claude Code's cli.js.
CLAUDE = Adapter(pins={"@zed-industries/claude-code-acp": "0.16.2", "@anthropic-ai/claude-agent-sdk": "0.2.44"},
                 entry="node_modules/@zed-industries/claude-code-acp/dist/index.js", node_major=18,  # its engines
                 recorded={"claude_code": ("@anthropic-ai/claude-agent-sdk", "claudeCodeVersion")})
ADAPTER = CLAUDE.package

# Gemini CLI speaks ACP itself from one bundle, which runs without its optional native packages' install scripts.
GEMINI = Adapter(pins={"@google/gemini-cli": "0.61.0"}, entry="node_modules/@google/gemini-cli/bundle/gemini.js",
                 node_major=20)  # its engines
# A model named up front: with none, Gemini CLI first asks a classifier model which one to use.
GEMINI_MODEL = "gemini-2.5-flash"
DUMMY_GEMINI_KEY = "gemini-test-not-a-key"
# Its user settings: without them it sends usage statistics to Google past its base URL.
GEMINI_SETTINGS = {"privacy": {"usageStatisticsEnabled": False}}

CODEX_ADAPTER = "@zed-industries/codex-acp"
CODEX_VERSION = "0.16.0"
# A model in Codex's own catalogue: for one it does not know, it streams a warning as the reply's first chunk.
CODEX_MODEL = "gpt-5.4-mini"
CODEX_KEY = "VENDOR_API_KEY"  # the variable its config.toml names for the vendor's key


def codex() -> Adapter:
    """Zed's Codex adapter with the native build for this machine, started directly: the package's own `bin`
    script is a node launcher that only finds that build and runs it as its child.

    Raises Unavailable where codex-acp publishes no build for this machine.
    """
    systems = {"linux": "linux", "darwin": "darwin"}
    arches = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}
    system, arch = systems.get(sys.platform), arches.get(platform.machine().lower())
    if system is None or arch is None:
        raise Unavailable(f"{CODEX_ADAPTER} has no build for {sys.platform} on {platform.machine()}: the Codex ACP "
                          "tests run on Linux or macOS, on x64 or arm64")
    build = f"{system}-{arch}"
    native = f"{CODEX_ADAPTER}-{build}"
    return Adapter(pins={CODEX_ADAPTER: CODEX_VERSION, native: CODEX_VERSION},
                   entry=f"node_modules/{native}/bin/codex-acp", node_major=0, build=build)


def root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "orchestrator-acp"


def install(cache: Path | None = None, adapter: Adapter = CLAUDE) -> Path:
    """The adapter's entry, installed into `cache` (default `root()`) on first use and offline after.

    Raises Unavailable when node or npm is missing or too old, or the install fails or lacks a pinned package.
    """
    folder = (cache or root()) / adapter.folder
    if _finished(folder, adapter):
        return folder / adapter.entry
    npm = _tools(folder.parent, adapter)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / ".lock", "w") as lock:  # another test process may be installing the same pins
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _finished(folder, adapter):
            _install(npm, folder, adapter)
    return folder / adapter.entry


def _finished(folder: Path, adapter: Adapter) -> bool:
    """A finished entry has a manifest naming these pins; a half-done one never got renamed in."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
    except (OSError, ValueError):
        return False
    return manifest.get("pins") == adapter.pins and (folder / adapter.entry).is_file()


def _tools(cache: Path, adapter: Adapter) -> str:
    node, npm = shutil.which("node"), shutil.which("npm")
    needs = f"Node.js {adapter.node_major}+ with npm" if adapter.node_major else "npm (which runs on Node.js)"
    if node is None or npm is None:
        raise Unavailable(f"{'node' if node is None else 'npm'} is not on PATH: the real-CLI ACP test needs "
                          f"{needs} (then it installs {adapter.package} once into {cache})")
    if not adapter.node_major:
        return npm
    version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    major = re.match(r"v(\d+)\.", version)
    if major is None or int(major.group(1)) < adapter.node_major:
        raise Unavailable(f"node {version or '(no version)'} is older than {adapter.package} needs: install "
                          f"Node.js {adapter.node_major}+ to run the real-CLI ACP test")
    return npm


def _install(npm: str, folder: Path, adapter: Adapter) -> None:
    staging = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
    try:
        version = adapter.pins[adapter.package]
        spec = f"{adapter.package}@{version}"
        (staging / "package.json").write_text(json.dumps({"private": True,
                                                          "dependencies": {adapter.package: version}}))
        started = time.monotonic()
        # No install scripts: nothing in these trees needs one, and they are code run from the registry.
        argv = [npm, "install", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]
        try:
            done = subprocess.run(argv, cwd=staging, capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise Unavailable(f"npm install {spec} took over {INSTALL_TIMEOUT:.0f} s: is the npm registry "
                              "reachable from here?") from None
        if done.returncode != 0:
            raise Unavailable(f"npm install {spec} failed (exit {done.returncode}): {_npm_error(done.stderr)}\n"
                              "the real-CLI ACP test needs the npm registry once; it runs offline afterwards")
        found = {name: _version(staging / "node_modules" / name) for name in adapter.pins}
        if missing := [name for name, got in found.items() if got is None]:
            # A native build is an optional dependency: npm leaves it out when its os or cpu is not this
            # machine's, or when its configuration omits optional dependencies.
            raise Unavailable(f"npm install {spec} did not install {', '.join(missing)}: npm leaves out a build "
                              "whose os or cpu is not this machine's, and every optional dependency where "
                              "`npm config get omit` names `optional`")
        if found != adapter.pins or not (staging / adapter.entry).is_file():
            raise Unavailable(f"npm install {spec} gave {found}, not the pinned {adapter.pins}: update the pins "
                              "in tests/acpreal.py together with the adapter")
        recorded = {key: _field(staging / "node_modules" / name, key_in)
                    for key, (name, key_in) in adapter.recorded.items()}
        manifest = {"pins": adapter.pins, **recorded, "seconds": round(time.monotonic() - started, 1)}
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
    return _field(package, "version")


def _field(package: Path, key: str) -> str | None:
    try:
        return json.loads((package / "package.json").read_text()).get(key)
    except (OSError, ValueError):
        return None


class Vendor(FakeServer):
    """The FakeServer, also standing as the agent's HTTPS proxy: a tunnel it is asked for is recorded in
    `tunnels` and refused, so what the CLI would send past its base URL stays on this machine. It speaks no
    websocket: an upgrade is answered 404."""

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

            def do_GET(self) -> None:
                # Codex's own OpenAI provider tries a websocket first and falls back to a POST when there is
                # none; the upgrade must not take a queued reply
                if self.headers.get("upgrade", "").lower() == "websocket":
                    self.send_response(404)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                super().do_GET()

        self._httpd.RequestHandlerClass = Handler

    def seen(self) -> str:
        """What the vendor was asked, for a failure's message."""
        return f"the vendor saw {[r['path'] for r in self.requests]}, tunnels {self.tunnels}"


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
    """The Claude Code adapter at `entry` talking to the vendor at `vendor_url` with a dummy key, HOME a fresh
    `home`.

    Claude Code needs no file in its HOME to start with an API key; it writes its state (.claude.json,
    .claude/) there.
    """
    env = _env(home, vendor_url, {"ANTHROPIC_BASE_URL": vendor_url, "ANTHROPIC_API_KEY": DUMMY_KEY, **QUIET})
    return Agent([_node(), str(entry)], env, home)


def gemini_agent(entry: Path, vendor_url: str, home: Path) -> Agent:
    """Gemini CLI at `entry` in ACP mode talking to the vendor at `vendor_url` with a dummy key, HOME a fresh
    `home` holding only its settings.json (it keeps its sessions and state next to it)."""
    env = _env(home, vendor_url, gemini_env(vendor_url, DUMMY_GEMINI_KEY))
    gemini_settings(home)
    return Agent(gemini_argv(entry), env, home)


def gemini_argv(entry: Path) -> list[str]:
    """The command line that starts Gemini CLI at `entry` as an ACP agent."""
    return [_node(), str(entry), "--acp"]


def gemini_env(vendor_url: str, key: str) -> dict[str, str]:
    """Gemini CLI's own variables for the vendor at `vendor_url` and the model, with `key` as its API key."""
    return {"GOOGLE_GEMINI_BASE_URL": vendor_url, "GEMINI_API_KEY": key, "GEMINI_MODEL": GEMINI_MODEL}


def gemini_settings(home: Path) -> Path:
    """`home`/.gemini/settings.json holding GEMINI_SETTINGS; the file."""
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps(GEMINI_SETTINGS))
    return settings


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        raise Unavailable("node is not on PATH")
    return node


def codex_agent(entry: Path, vendor_url: str, home: Path) -> Agent:
    """codex-acp at `entry` talking to the vendor at `vendor_url` with a dummy key, HOME a fresh `home` holding
    only the config.toml that names the vendor (Codex keeps its sessions and state next to it)."""
    env = _env(home, vendor_url, {CODEX_KEY: DUMMY_OPENAI_KEY})
    (home / ".codex").mkdir()
    (home / ".codex" / "config.toml").write_text(codex_config(vendor_url))
    return Agent([str(entry)], env, home)


def codex_config(vendor_url: str, top: Mapping[str, str | list[str]] | None = None) -> str:
    """Codex's config.toml for the vendor at `vendor_url`, a provider speaking the Responses API with its key in
    CODEX_KEY, and `top`'s keys besides (TOML's strings and arrays of them are written as JSON writes them)."""
    keys = {"model": CODEX_MODEL, "model_provider": "vendor", **(top or {})}
    lines = [f"{key} = {json.dumps(value)}" for key, value in keys.items()]
    provider = {"name": "vendor", "base_url": f"{vendor_url}/v1", "wire_api": "responses", "env_key": CODEX_KEY}
    lines += ["", "[model_providers.vendor]", *(f"{key} = {json.dumps(value)}" for key, value in provider.items())]
    return "\n".join(lines) + "\n"


def _env(home: Path, vendor_url: str, own: Mapping[str, str]) -> dict[str, str]:
    """The agent's whole environment: HOME and the XDG folders in a fresh `home`, the vendor as its proxy (so a
    call past its base URL is refused and recorded), and `own`."""
    home.mkdir(parents=True)
    return command_env({
        "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local/state"), "XDG_DATA_HOME": str(home / ".local/share"),
        "HTTPS_PROXY": vendor_url, "HTTP_PROXY": vendor_url, "NO_PROXY": "127.0.0.1,localhost", **own,
    })

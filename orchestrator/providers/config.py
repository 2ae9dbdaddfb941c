"""Where credentials and endpoints come from: the environment, the TOML config file and the OS keyring.
It turns them into one list of rotation candidates per provider, and masks keys for display.
"""
from __future__ import annotations

import hashlib
import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal, Mapping, TypeVar

import msgspec
from msgspec import Struct

from orchestrator.core import secrets
from orchestrator.core.errors import InputError
from orchestrator.providers.catalog import Override

Kind = Literal["openai", "anthropic"]

VENDORS: dict[str, Kind] = {"openai": "openai", "anthropic": "anthropic", "ollama": "openai"}
DEFAULT_URL = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com",
               "ollama": "http://localhost:11434/v1"}
KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
URL_ENV = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}
RESERVED = {*VENDORS, "scripted"}  # names a model string already means something by
_ENDPOINT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_HOST_PORT = re.compile(r"(?P<name>\[[^\]]*\]|[^:]*)(?::(?P<port>\d+))?")
_S = TypeVar("_S", bound=Struct)
_P = TypeVar("_P", bound="_Provider")
_K = TypeVar("_K", bound="_Keys")


def mask(key: str | None) -> str:
    """A key as people may see it: enough to tell two apart, never enough to use one. A long key shows its
    first 3 and last 4 characters, as the vendors' own consoles do; a short one (a local server's password)
    would be given away by that, so it shows none of its characters, only a fingerprint."""
    if not key:
        return "(no key)"
    if len(key) < 20:
        return f"key#{hashlib.sha256(key.encode()).hexdigest()[:4]}"
    return f"{key[:3]}…{key[-4:]}"


class Candidate(Struct, frozen=True):
    """One way to reach a provider: an address and the key to use there (None: the server wants none)."""

    base_url: str
    api_key: str | None = None

    def __repr__(self) -> str:  # a stray repr in a traceback or log must not carry the key
        return f"Candidate({self.label!r})"

    @property
    def label(self) -> str:
        """How logs and `models` name this candidate: masked key and address."""
        return f"{mask(self.api_key)} at {self.base_url}" if self.api_key else self.base_url


class Source(Struct, kw_only=True):
    """A provider or a named endpoint with everything needed to build it."""

    name: str
    kind: Kind
    candidates: list[Candidate]
    headers: dict[str, str] = {}
    explicit: bool = True  # the user configured it (Ollama's built-in default is not)
    missing: list[str] = []  # environment variables the file names for keys, unset


class Config(Struct, kw_only=True):
    path: Path
    sources: dict[str, Source]
    models: dict[str, Override] = {}
    sandbox: dict = {}  # the [sandbox] table as written; tools/jail.py's Settings reads it
    skills: dict[str, Any] = {}  # the [skills] table, read by the skills layer (roots and their order)
    evolve: dict[str, Any] = {}  # the [evolve] table, read by room/evolution.py (the self-improvement pass)

    @property
    def shown_path(self) -> str:
        home = Path.home()
        return f"~/{self.path.relative_to(home)}" if self.path.is_relative_to(home) else str(self.path)

    def hint(self, name: str) -> str:
        """What to set so that `name` has a candidate (only sources without one need it)."""
        src = self.sources[name]
        if src.missing:
            if any(m.startswith("secret ") for m in src.missing):
                return (f"{name}: not configured — set {' or '.join(src.missing)} with `orchestrator secrets set "
                        f"NAME` (named in {self.shown_path})")
            return (f"{name}: not configured — set {' or '.join(src.missing)} "
                    f"(named by api_key_env in {self.shown_path})")
        # Without a key variable named in the file only a vendor can lack candidates: Ollama and
        # endpoints fall back to their address without a key.
        return (f"{name}: not configured — set {KEY_ENV[name]}, or add [providers.{name}] keys "
                f"to {self.shown_path}")

    def nothing_configured(self) -> str:
        return ("no model provider is configured — set OPENAI_API_KEY or ANTHROPIC_API_KEY, add "
                f"[providers.NAME] keys or an [endpoints.NAME] table to {self.shown_path}, or start "
                "`ollama serve` and use ollama/MODEL")


# --- the file's shape ------------------------------------------------------------------------

class _Keys(Struct, forbid_unknown_fields=True, kw_only=True):
    base_url: str | None = None
    api_key: str | None = None
    api_key_env: str | None = None
    keys: list[str] = []


class _Provider(_Keys):
    headers: dict[str, str] = {}
    candidates: list[_Keys] = []  # more addresses (or keys) for the same provider


class _Endpoint(_Provider):
    kind: Kind = "openai"


def config_path(env: Mapping[str, str]) -> Path:
    if explicit := env.get("ORCHESTRATOR_CONFIG"):
        return Path(explicit).expanduser()
    base = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else Path.home() / ".config"
    return base / "orchestrator" / "config.toml"


def ollama_url(host: str) -> str:
    """OLLAMA_HOST as Ollama's own clients read it: `host`, `host:port` or a URL; a bare host gets port 11434."""
    host = host.strip().rstrip("/")
    if "://" not in host:
        host_port, _, path = host.partition("/")
        m = _HOST_PORT.fullmatch(host_port)
        name, port = (m["name"], m["port"]) if m else (f"[{host_port}]", None)  # a bare IPv6 address
        # 0.0.0.0 tells a server to listen everywhere; a client reaches that server on loopback.
        if name in ("", "0.0.0.0", "[::]"):
            name = "127.0.0.1"
        host = f"http://{name}:{port or 11434}" + (f"/{path}" if path else "")
    return host if host.endswith("/v1") else host + "/v1"


def load_config(env: Mapping[str, str] | None = None) -> Config:
    """Read the file (if any) and the environment. The environment wins for addresses; keys from both
    become candidates, the file's first."""
    env = os.environ if env is None else env
    path, raw = config_file(env)
    where = str(path)
    unknown = set(raw) - {"providers", "endpoints", "models", "mcp_servers", "sandbox", "skills", "serve", "evolve"}
    if unknown:
        raise InputError(f"{where}: unknown table [{sorted(unknown)[0]}]; the file has [providers.NAME], "
                         "[endpoints.NAME], [models.\"PROVIDER/MODEL\"], [mcp_servers.NAME], [sandbox], "
                         "[skills], [serve] and [evolve]")
    providers = _table(raw, "providers", where)
    endpoints = _table(raw, "endpoints", where)
    models = _table(raw, "models", where)

    sources: dict[str, Source] = {}
    for name in providers:
        if name not in VENDORS:
            raise InputError(f"{where}: [providers.{name}]: unknown provider; known are "
                             f"{', '.join(VENDORS)}; for another server use [endpoints.{name}]")
    for name, vendor in VENDORS.items():
        table = _convert(providers.get(name, {}), _Provider, f"providers.{name}", where)
        _no_headers(table.headers, vendor, f"providers.{name}", where)
        table, unfilled = _filled(table, f"providers.{name}", where, env)
        source = _vendor(name, vendor, table, name in providers, env)
        source.missing[:0] = unfilled
        source.explicit = source.explicit or bool(unfilled)
        sources[name] = source
    for name, value in endpoints.items():
        section = f"endpoints.{name}"
        if not _ENDPOINT_NAME.fullmatch(name):
            raise InputError(f"{where}: [{section}]: an endpoint name uses letters, digits, `_`, `.` or `-`")
        if name in RESERVED:
            instead = f"use [providers.{name}]" if name in VENDORS else "it names the scripted model"
            raise InputError(f"{where}: [{section}]: {name!r} is reserved; {instead}")
        written = _convert(value, _Endpoint, section, where)
        if not written.base_url:
            raise InputError(f"{where}: [{section}]: base_url is required")
        _no_headers(written.headers, written.kind, section, where)
        endpoint, unfilled = _filled(written, section, where, env)
        candidates, missing = _candidates(endpoint, endpoint.base_url or "", [], needs_key=None, env=env)
        sources[name] = Source(name=name, kind=endpoint.kind, candidates=candidates, headers=endpoint.headers,
                               missing=unfilled + missing)
    overrides = {key: _convert(value, Override, f'models."{key}"', where) for key, value in models.items()}
    sandbox = raw.get("sandbox", {})
    if not isinstance(sandbox, dict):
        raise InputError(f"{where}: [sandbox] must be a table (network = \"ask\", writable = [...], enabled = true)")
    return Config(path=path, sources=sources, models=overrides, sandbox=sandbox,
                  skills=_table(raw, "skills", where), evolve=_table(raw, "evolve", where))


def config_file(env: Mapping[str, str]) -> tuple[Path, dict[str, Any]]:
    """The config file's path and its tables ({} when there is no file); `mcp_servers` is read by mcplink."""
    path = config_path(env)
    return path, _read(path, named=bool(env.get("ORCHESTRATOR_CONFIG")))


def _read(path: Path, *, named: bool) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if named:
            raise InputError(f"{path}: no such file (named by ORCHESTRATOR_CONFIG)") from None
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read the config file ({exc})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: not valid TOML: {exc}") from None


def _table(raw: dict[str, Any], name: str, where: str) -> dict[str, Any]:
    value = raw.get(name, {})
    if not isinstance(value, dict):
        raise InputError(f"{where}: `{name}` must be a table ([{name}.NAME])")
    return value


def _convert(value: Any, cls: type[_S], section: str, where: str) -> _S:
    try:
        return msgspec.convert(value, cls)
    except msgspec.ValidationError as exc:
        msg = str(exc)
        # msgspec names the spot from the table's root (`$`); say it the way the file spells it.
        msg = msg.replace("`$", f"`{section}") if " - at `$" in msg else f"{msg} - in [{section}]"
        raise InputError(f"{where}: {msg}") from None


def _no_headers(headers: dict[str, str], kind: Kind, section: str, where: str) -> None:
    # The Anthropic provider sends only its own headers; extra ones would be silently dropped.
    if headers and kind == "anthropic":
        raise InputError(f"{where}: [{section}]: headers are supported for OpenAI-compatible servers only")


def _filled(table: _P, section: str, where: str, env: Mapping[str, str]) -> tuple[_P, list[str]]:
    """The table with `${VAR}` and `${secret:NAME}` filled in (keys, headers, addresses), and what could not be
    for keys: a key that is not there leaves its entry without one, as an unset `api_key_env` does. A literal key
    or credential header is pointed out, once, with the command that moves it into the keyring."""
    unfilled: list[str] = []

    def key(value: str, setting: str) -> str | None:
        if secrets.literal_credential(value, "key"):
            secrets.warn_literal(secrets.where_in(where, value), f"[{section}] {setting}", value,
                                 secrets.suggested_name(section.split(".")[-1], "key"))
        try:
            return secrets.expand(value, env, f"{where}: [{section}] {setting}")
        except InputError:
            unfilled.extend(_unfilled(value, env))
            return None

    def entry(e: _K) -> _K:
        keys = [k for k in (key(v, "keys") for v in e.keys) if k]
        api_key = key(e.api_key, "api_key") if e.api_key else None
        url = secrets.expand(e.base_url, env, f"{where}: [{section}] base_url") if e.base_url else None
        return msgspec.structs.replace(e, keys=keys, api_key=api_key, base_url=url)

    headers = {}
    for name, value in table.headers.items():
        if secrets.literal_credential(value, name):
            secrets.warn_literal(secrets.where_in(where, value), f"[{section}] headers.{name}", value,
                                 secrets.suggested_name(section.split(".")[-1], name))
        headers[name] = secrets.expand(value, env, f"{where}: [{section}] headers.{name}")
    filled = entry(table)
    return msgspec.structs.replace(filled, headers=headers, candidates=[entry(c) for c in table.candidates]), \
        list(dict.fromkeys(unfilled))


def _unfilled(value: str, env: Mapping[str, str]) -> list[str]:
    """How `missing` names what a key refers to and is not there: the variable, or the secret (with no keyring,
    the variable that stands in for it)."""
    out = [m.group(1) for m in re.finditer(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", value) if m.group(1) not in env]
    for name in secrets.needed(value):
        if secrets.lookup(name, env) is None:
            out.append(f"{secrets.ENV_PREFIX}{name}" if "environment" in secrets.missing_hint(name)
                       else f"secret {name}")
    return out


def _vendor(name: str, kind: Kind, table: _Provider, in_file: bool, env: Mapping[str, str]) -> Source:
    if name == "ollama":
        from_env = env.get("OLLAMA_HOST", "").strip()
        base = ollama_url(from_env or table.base_url or DEFAULT_URL[name])
        candidates, missing = _candidates(table, base, [], needs_key=None, env=env)
        return Source(name=name, kind=kind, candidates=candidates, headers=table.headers,
                      explicit=in_file or bool(from_env), missing=missing)
    base = env.get(URL_ENV[name], "").strip() or table.base_url or DEFAULT_URL[name]
    env_keys = [k.strip() for k in env.get(KEY_ENV[name], "").split(",") if k.strip()]
    # The vendor's own API needs a key; any other address (a proxy, a local server) may not.
    candidates, missing = _candidates(table, base, env_keys, needs_key=DEFAULT_URL[name], env=env)
    return Source(name=name, kind=kind, candidates=candidates, headers=table.headers,
                  explicit=bool(candidates or missing), missing=missing)


def _candidates(table: _Provider, base: str, extra_keys: list[str], *, needs_key: str | None,
                env: Mapping[str, str]) -> tuple[list[Candidate], list[str]]:
    """The table's own address with each of its keys, then every `candidates` entry the same way.
    An address without a key is a candidate too, unless it is `needs_key` (the vendor's own API)."""
    out: list[Candidate] = []
    missing: list[str] = []
    for entry, url, extra in [(table, base, extra_keys), *((c, c.base_url or base, []) for c in table.candidates)]:
        keys = [*entry.keys, *([entry.api_key] if entry.api_key else [])]
        unset = False
        if entry.api_key_env:
            if env.get(entry.api_key_env, "").strip():
                keys += [k.strip() for k in env[entry.api_key_env].split(",") if k.strip()]
            else:
                unset = True
                missing.append(entry.api_key_env)
        keys += extra
        for k in keys:
            secrets.remember(k)  # from the file, the environment or the keyring: masked in every log line
        if keys:
            out += [Candidate(url, k) for k in keys]
        elif needs_key is None or (not unset and url.rstrip("/") != needs_key.rstrip("/")):
            # A local server: an endpoint's or Ollama's key is optional, so an unset variable leaves the address
            # without a key (`missing` still names it). A vendor's key variable, once named, is required.
            out.append(Candidate(url))
    return list(dict.fromkeys(out)), missing

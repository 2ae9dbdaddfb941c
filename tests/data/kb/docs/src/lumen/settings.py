"""Where settings come from, in order: defaults, the config file, environment variables, flags."""
from __future__ import annotations

import os
import tomllib
from pathlib import Path

DEFAULT_PATH = Path("/etc/lumen/lumen.toml")

ENV_OVERRIDES = {
    "LUMEN_LOG_LEVEL": "log.level",
    "LUMEN_LISTEN": "listen_address",
    "LUMEN_DATA_DIR": "ledger.dir",
}


def config_path() -> Path:
    """`LUMEN_CONFIG` names the file; without it the default path is used."""
    return Path(os.environ.get("LUMEN_CONFIG", DEFAULT_PATH))


def load_settings(flags: dict[str, str] | None = None) -> dict[str, object]:
    settings: dict[str, object] = {}
    path = config_path()
    if path.exists():
        settings.update(_flatten(tomllib.loads(path.read_text())))
    for env, key in ENV_OVERRIDES.items():
        if env in os.environ:
            settings[key] = os.environ[env]
    settings.update(flags or {})  # command-line flags win over everything
    return settings


def _flatten(table: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in table.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out

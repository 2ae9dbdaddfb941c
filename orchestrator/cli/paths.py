"""Where the command line keeps things by default: the rooms database (XDG data folder, `--db`,
ORCHESTRATOR_DB). Every command module reads its defaults here; nothing here imports them back."""
from __future__ import annotations

import os
from pathlib import Path


def default_db() -> Path:
    if env := os.environ.get("ORCHESTRATOR_DB"):
        return Path(env)
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "orchestrator" / "orchestrator.db"


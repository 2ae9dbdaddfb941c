"""Where the shipped data folders (agents/, prompts/, scenarios/) live, and the user's state folder.

In a wheel they sit under orchestrator/_data; in a checkout or editable install, at the repo root.
"""
from __future__ import annotations

import importlib.resources
import os
from pathlib import Path


def data_dir(name: str) -> Path:
    packaged = Path(str(importlib.resources.files("orchestrator"))) / "_data" / name
    return packaged if packaged.is_dir() else Path(__file__).resolve().parents[2] / name


def state_dir() -> Path:
    """The project's folder in the user's XDG state folder: logs, locks and the external agents' HOMEs."""
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "orchestrator"

"""The command line: `orchestrator` and its command groups (main.py builds the parser).

The command line owns its process, so it turns on the start-up tricks (core/startup.py) before anything
imports structlog or httpx.
"""
from orchestrator.core import startup

startup.tune()

from orchestrator.cli.main import main  # noqa: E402 - after the tricks are on

__all__ = ["main"]

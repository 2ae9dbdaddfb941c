"""The command line: `orchestrator` and its command groups (main.py builds the parser)."""

from orchestrator.cli.main import main

__all__ = ["main"]

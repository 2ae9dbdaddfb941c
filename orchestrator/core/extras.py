"""The optional extras (serve, mcp, postgres, docs, vectors, otel) and how to install one: said the same way
by every command that finds one missing, since the package is installed from a checkout or a built wheel.
"""
from __future__ import annotations

DIST = "groupchat-orchestrator"  # the distribution's name, as in pyproject.toml


def install_hint(extra: str) -> str:
    """How to add `extra` to the environment that runs orchestrator (the README's "Install" says more), said
    after the words "needs the `extra` extra: "."""
    return (f"`pip install -e '.[{extra}]'` in a checkout, or `pip install 'dist/WHEEL.whl[{extra}]'` for a "
            "wheel built there (README: Install)")

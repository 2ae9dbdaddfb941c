"""The path sandbox: every file a tool touches must resolve inside the workspace.

Resolution follows symlinks before the check, so a link that points out is refused like `..`.
"""
from __future__ import annotations

from pathlib import Path

from orchestrator.tools.base import ToolError


def resolve(workspace: Path, path: str) -> Path:
    root = workspace.resolve()
    target = (root / path).resolve()
    if target != root and root not in target.parents:
        raise ToolError(f"{path}: outside the workspace; only files under the workspace can be used")
    return target

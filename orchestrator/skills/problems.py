"""What can be wrong with a skill, as `file:line: severity: message`: the one shape every check reports in,
from the SKILL.md reader to the checks of the files it bundles and the commands it would run.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

# error: cannot be loaded; spec: breaks the specification but loads (the guide's lenient reading);
# blocked: a check refused its content, so it is listed but never shown to a model;
# asks: loads, but a command it would run asks the user first (the user sees it listed); note: advice.
Severity = Literal["error", "spec", "blocked", "asks", "note"]
_WORDS = {"error": "error", "spec": "spec", "blocked": "blocked", "asks": "asks first", "note": "note"}
_FAILING = ("error", "spec", "blocked")


@dataclass(frozen=True)
class Problem:
    file: Path
    line: int
    severity: Severity
    message: str  # fixed phrases and paths: never the checked text itself

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {_WORDS[self.severity]}: {self.message}"

    @property
    def failing(self) -> bool:
        return self.severity in _FAILING

    def where(self, folder: Path) -> str:
        """`references/x.md:3`: the file relative to the skill's folder, and the line."""
        rel = self.file.relative_to(folder).as_posix() if self.file.is_relative_to(folder) else str(self.file)
        return f"{rel}:{self.line}"

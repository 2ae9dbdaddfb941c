"""Regular expressions compiled when first used: a module's pattern tables cost nothing at import
(the shell's risk classes hold two dozen; compiling them took about 8 ms of every start)."""
from __future__ import annotations

import re
from typing import Any


class Pattern:
    """`re.compile(source, flags)`, put off until a method of the pattern is first called."""

    __slots__ = ("_source", "_flags", "_compiled")

    def __init__(self, source: str, flags: int = 0):
        self._source, self._flags = source, flags
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> Any:
        if self._compiled is None:
            self._compiled = re.compile(self._source, self._flags)
        return getattr(self._compiled, name)

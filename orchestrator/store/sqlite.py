"""sqlite-utils, loaded on first use: the module, with click, pluggy and dateutil, is ~50 ms that importing a
room need not pay. In a tuned process (core/startup.py) it loads without numpy and pandas, which it imports
whenever they are installed only to map their scalar types to columns this project never stores.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.core import startup


def _load():  # noqa: ANN202 (the module)
    def load():  # noqa: ANN202
        import sqlite_utils

        return sqlite_utils

    return startup.hidden_while(("numpy", "pandas"), load)


class _OnFirstUse:
    """Stands for the module: the first name read from it (a store opening, `sqlite_utils.Database`) imports it
    and copies its names here, so later reads are plain attribute lookups."""

    def __getattr__(self, name: str):  # noqa: ANN204 (any of the module's names)
        if "Database" not in self.__dict__:
            self.__dict__.update(vars(_load()))
        try:
            return self.__dict__[name]
        except KeyError:
            raise AttributeError(f"module 'sqlite_utils' has no attribute {name!r}") from None


if TYPE_CHECKING:  # the checker sees the module itself: its names and their types
    import sqlite_utils
else:
    sqlite_utils = _OnFirstUse()

"""sqlite-utils, loaded on first use and without numpy and pandas: it imports them whenever they are installed,
only to map their scalar types to columns, which this project never stores (numpy alone is ~70 ms and ~16 MB at
start-up); and the module itself, with click, pluggy and dateutil, is ~50 ms that importing a room need not pay.
"""
from __future__ import annotations

import sys


def _load():  # noqa: ANN202 (the module)
    hidden = [name for name in ("numpy", "pandas") if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # `import name` raises ImportError meanwhile
    try:
        import sqlite_utils
    finally:
        for name in hidden:
            if sys.modules.get(name, False) is None:
                del sys.modules[name]
    return sqlite_utils


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


sqlite_utils = _OnFirstUse()

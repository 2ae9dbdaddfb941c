"""sqlite-utils, loaded without numpy and pandas: it imports them whenever they are installed, only to map
their scalar types to columns, which this project never stores (numpy alone is ~70 ms and ~16 MB at start-up).
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


sqlite_utils = _load()

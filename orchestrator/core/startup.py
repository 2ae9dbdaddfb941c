"""What an application built on the package may turn on for its own process: leaner imports and the collector
policy of a process that holds many rooms. The CLI and serve's workers turn both on; a library user's process
is left as it is unless it asks (`tune()`).

Each of these changes the whole process (its import system, its garbage collector), which only the program
that owns the process may decide: importing the package or opening a room never does.
"""
from __future__ import annotations

import importlib.machinery
import sys

# structlog and httpx import rich (httpx also click and pygments) whenever they are installed (dev tools pull
# them in): structlog for pretty tracebacks never used (core/log.py prints plain ones), httpx for its
# command-line client, a few MB and tens of ms at start-up. While either of them is being imported, those are
# hidden; they stay importable for everyone else.
_RICH_USERS = ("structlog", "httpx")
_HIDDEN = ("rich", "click", "pygments")

_TUNED = False


def tune() -> None:
    """Turn on, for this process: the lean imports (above, and sqlite-utils without numpy and pandas) and the
    collector policy (freezing what is alive when the first room opens; a host's Heap). Idempotent."""
    global _TUNED
    if not _TUNED:
        _TUNED = True
        sys.meta_path.insert(0, _WithoutRich())


def tuned() -> bool:
    """Whether the program owning this process asked for the tricks above."""
    return _TUNED


def hidden_while(names: tuple[str, ...], load):  # noqa: ANN001, ANN201 - any import step and its result
    """`load()` with `names` unimportable meanwhile (when tuned, and not imported already)."""
    hidden = [name for name in names if _TUNED and name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # `import name` raises ImportError meanwhile
    try:
        return load()
    finally:
        for name in hidden:
            if sys.modules.get(name, False) is None:
                del sys.modules[name]


class _Hiding:  # an import loader (not importlib.abc's: importing that alone is slow)
    def __init__(self, loader):  # noqa: ANN001
        self._loader = loader

    def create_module(self, spec):  # noqa: ANN001, ANN201 (the import system's protocol)
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:  # noqa: ANN001
        hidden_while(_HIDDEN, lambda: self._loader.exec_module(module))


class _WithoutRich:  # a meta path finder
    def find_spec(self, name, path, target=None):  # noqa: ANN001, ANN201
        if name not in _RICH_USERS:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _Hiding(spec.loader)
        return spec

"""orchestrator: a multi-agent group-chat orchestrator for LLM agents.

A room hosted by a commander, workers assigned through tool calls, one bus, one stop path.
"""
import importlib.machinery
import sys

__version__ = "0.1.0"

# structlog and httpx import rich (httpx also click and pygments) whenever they are installed (dev tools pull
# them in): structlog for pretty tracebacks we never use (core/log.py prints plain ones), httpx for its
# command-line client: about 3.5 MB and tens of ms at start-up, measured. While either of them is being
# imported, those are hidden; they stay importable for everyone else.
_RICH_USERS = ("structlog", "httpx")
_HIDDEN = ("rich", "click", "pygments")


class _Hiding:  # an import loader (not importlib.abc's: importing that alone costs ~30 ms)
    def __init__(self, loader):  # noqa: ANN001
        self._loader = loader

    def create_module(self, spec):  # noqa: ANN001, ANN201 (the import system's protocol)
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:  # noqa: ANN001
        hidden = [name for name in _HIDDEN if name not in sys.modules]
        for name in hidden:
            sys.modules[name] = None  # type: ignore[assignment]  # `import name` raises ImportError meanwhile
        try:
            self._loader.exec_module(module)
        finally:
            for name in hidden:
                if sys.modules.get(name, False) is None:
                    del sys.modules[name]


class _WithoutRich:  # a meta path finder
    def find_spec(self, name, path, target=None):  # noqa: ANN001, ANN201
        if name not in _RICH_USERS:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _Hiding(spec.loader)
        return spec


sys.meta_path.insert(0, _WithoutRich())

"""A package's dependency step: its exact command run in the OS sandbox with the network, the package's
folder its only writable place (its .git read-only), and what the step left behind checked afterwards.

Whether it may run at all is the user's answer, asked by the command line and kept in the registry.
"""
from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import trio

from orchestrator.tools.jail import Settings, backend
from orchestrator.tools.process import SHELL, run_command
from orchestrator.tools.seccomp import open_filter
from orchestrator.tools.session import ToolSession
from orchestrator.tools.shell import confinement

TIMEOUT = 1800.0  # seconds: a large install on a slow network, not forever
MADE = (".venv", "node_modules")  # the folders the step makes, where its tools' own links belong
_JAIL = trio.CapacityLimiter(1)


class StepFailed(Exception):
    """The dependency step did not finish; the message says how, with the end of its output."""


async def run(folder: Path, command: str) -> str:
    """Run `command` in `folder` confined; returns the end of its output, or raises StepFailed."""
    jail = backend()
    if why := await trio.to_thread.run_sync(jail.unavailable, limiter=_JAIL):
        raise StepFailed(f"not run: {why}")
    limits = Settings().limits.for_job()
    confined = confinement(ToolSession(folder), folder, True, (), (folder / ".git",))
    fd = open_filter(True)
    argv = jail.argv([SHELL, "-c", command], replace(confined, limits=limits, seccomp=fd))
    result = await run_command(argv, cwd=folder, timeout=TIMEOUT, limits=limits,
                               pass_fds=[fd] if fd is not None else [])
    tail = "\n".join(result.output.strip().splitlines()[-8:])
    if result.timed_out:
        raise StepFailed(f"stopped after {TIMEOUT:g} s\n{tail}")
    if result.returncode != 0:
        why = f"went over the sandbox's {result.over} limit" if result.over else f"exit code {result.returncode}"
        raise StepFailed(f"{why}\n{tail}")
    if stray := await trio.to_thread.run_sync(stray_links, folder, limiter=_JAIL):
        raise StepFailed(f"it made a symbolic link outside {' and '.join(MADE)} ({stray}), which could lead a "
                         "reader out of the package")
    return tail


def stray_links(folder: Path) -> str:
    """The first symbolic link under `folder` outside the folders the step makes ("" when there is none)."""
    for top, dirs, files in os.walk(folder):
        here = Path(top)
        if here == folder:
            dirs[:] = [d for d in dirs if d not in (*MADE, ".git")]
        for name in dirs + files:
            if (here / name).is_symlink():
                return str((here / name).relative_to(folder))
    return ""

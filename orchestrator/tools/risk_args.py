"""Reading a command's argv for the risk classifier (tools/risk.py and its risk_* families): options, the
values of those that take one, and operands; nothing here knows what any program does."""
from __future__ import annotations


def parse(args: list[str], short: str = "", long: frozenset[str] = frozenset()) -> tuple[list, list]:
    """(option, value) pairs and positional words; `short`/`long` name the options taking a value."""
    opts, pos, i = [], [], 0
    while i < len(args):
        a = args[i]
        if a == "--":
            pos += args[i + 1:]
            break
        if a.startswith("--"):
            name, eq, value = a.partition("=")
            if not eq and name in long and i + 1 < len(args):
                value, eq = args[i + 1], "="
                i += 1
            opts.append((name, value if eq else None))
        elif a.startswith("-") and len(a) > 1:
            for k, ch in enumerate(a[1:], 1):
                if ch in short:
                    value = a[k + 1:]
                    if not value and i + 1 < len(args):
                        i += 1
                        value = args[i]
                    opts.append(("-" + ch, value))
                    break
                opts.append(("-" + ch, None))
        else:
            pos.append(a)
        i += 1
    return opts, pos

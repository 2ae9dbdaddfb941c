"""The `orchestrator tokens PATH...` command: the token estimate of each file and their total.

Plain output is one `TOKENS  PATH` line per file and a `TOKENS  total` line; `--json` prints one
`{"path", "tokens"}` object per line, files only. `-` reads standard input.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from orchestrator.core.errors import InputError
from orchestrator.core.tokens import estimate


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.buffer.read().decode("utf-8", "replace")
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{path}: is a folder, not a file")
    try:
        data = p.read_bytes()
        if b"\0" in data[:8192]:  # text never holds NUL bytes; images, archives and executables do
            raise InputError(f"{path}: a binary file; tokens estimates text")
        # Undecodable bytes still cost tokens: count them as replacement characters, do not fail.
        return data.decode("utf-8", "replace")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from None


async def cmd_tokens(args: argparse.Namespace) -> int:
    counts = [(path, estimate(_read(path))) for path in args.paths]  # read all first: bad input, no output
    if args.json:
        for path, tokens in counts:
            print(json.dumps({"path": path, "tokens": tokens}, ensure_ascii=False))
        return 0
    width = max(len(str(sum(n for _, n in counts))), 6)
    for path, tokens in counts:
        print(f"{tokens:>{width}}  {path}")
    print(f"{sum(n for _, n in counts):>{width}}  total")
    return 0


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("tokens", help="estimate the tokens of files, as the engine counts them")
    p.add_argument("paths", nargs="+", metavar="PATH", help="files to estimate; - reads standard input")
    p.add_argument("--json", action="store_true", help='one {"path", "tokens"} object per line')
    p.set_defaults(fn=cmd_tokens)
    return p

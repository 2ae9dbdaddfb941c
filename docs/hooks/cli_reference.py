"""The build's generated pages: the command-line reference from the parser itself, the API reference from
`orchestrator.__all__`, and the changelog.

MkDocs runs this as a hook (mkdocs.yml), so the reference always says what `--help` says; tests import it too.
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- cli-reference -->"
API_MARKER = "<!-- api-reference -->"
# argparse wraps help to the terminal's width; the page and the tests both pin it, so they compare equal.
WIDTH = "100"


@contextmanager
def pinned_width() -> Iterator[None]:
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        yield
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


def commands(p: argparse.ArgumentParser, words: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every parser under `p`, the top one first, each with the words that reach it (`("mcp", "serve")`)."""
    yield words, p
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, child in action.choices.items():
                if id(child) in seen:  # an alias names a parser already listed
                    continue
                seen.add(id(child))
                yield from commands(child, (*words, name))


def helps() -> list[tuple[tuple[str, ...], str]]:
    """(words, `--help` text) for the program and every command and action, as the parser prints them."""
    if str(ROOT) not in sys.path:  # the checkout being documented, whichever copy is installed
        sys.path.insert(0, str(ROOT))
    from orchestrator.cli.main import parser

    with pinned_width():
        return [(words, p.format_help()) for words, p in commands(parser(full=True))]


def reference() -> str:
    out: list[str] = []
    for words, text in helps():
        name = " ".join(("orchestrator", *words))
        level = "#" * min(2 + len(words), 4)
        out += [f"{level} `{name}`", "", "```text", text.rstrip(), "```", ""]
    return "\n".join(out)


def api() -> str:
    """One entry per name of `orchestrator.__all__`, documented where it is defined (the package itself only
    re-exports them, lazily)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import orchestrator

    where: dict[str, str] = orchestrator._WHERE
    aliases: dict[str, str] = orchestrator._ALIASES
    out: list[str] = []
    for name in orchestrator.__all__:
        target = f"{where[name]}.{aliases.get(name, name)}"
        out += [f"::: {target}", "    options:", "      show_root_heading: true", "      show_root_full_path: false",
                f'      heading: "{name}"', f'      toc_label: "{name}"', ""]
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri == "reference/api.md":
        if API_MARKER not in markdown:
            raise ValueError(f"docs/reference/api.md lost its {API_MARKER} line, where the generated reference goes")
        return markdown.replace(API_MARKER, api())
    if page.file.src_uri == "reference/cli.md":
        if MARKER not in markdown:
            raise ValueError(f"docs/reference/cli.md lost its {MARKER} line, where the generated reference goes")
        return markdown.replace(MARKER, reference())
    return markdown


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    # The changelog lives at the top of the repository, where people look for it; the site shows the same file.
    files.append(File.generated(config, "changelog.md", content=(ROOT / "CHANGELOG.md").read_text()))
    return files

"""The files a skill bundles beside SKILL.md, read as the model could be shown them: every text through the
injection scanner as SKILL.md is, encoded and binary files checked for being asked to decode or run.

A skill loads whole or not at all: one flagged file blocks it, since whoever wrote that file wrote the rest
and the instructions that point the model at it.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Callable

from orchestrator.skills import commands, encoded, passed
from orchestrator.skills.encoded import Asset
from orchestrator.skills.problems import Problem
from orchestrator.tools.base import ToolError

MAX_FILES = 200  # bundled files listed on activation
MAX_CHECKED = 1_000  # files checked in one skill; a skill holding more is blocked, not half checked
MAX_TEXT_BYTES = 1 << 20  # one file the model may read: SKILL.md's own limit
MAX_SKILL_TEXT = 4 << 20  # all of one skill's text the scanner reads
HEAD = 8192  # bytes read_file looks at to call a file binary
DOCUMENTS = (".pdf", ".docx")  # read_file shows the text it extracts from them

# Reads the first `cap` bytes and one more, so that "larger than cap" can be told: the checked open in a
# folder agents can write, plain reads in the user's own.
Read = Callable[[Path, int], bytes]


def bundled_files(folder: Path, *, every: bool = False, limit: int = MAX_FILES) -> list[str]:
    """The skill's other files, relative to its folder, sorted: hidden entries and links skipped, or with
    `every`, all the model could read there (hidden files, links to files; only git's own folder left out)."""
    out: list[str] = []
    for here, dirs, files in os.walk(folder):
        shown = (lambda d: d != ".git") if every else (lambda d: not d.startswith("."))
        dirs[:] = sorted(d for d in dirs if shown(d) and not os.path.islink(os.path.join(here, d)))
        for name in sorted(files):
            path = Path(here) / name
            if (name.startswith(".") and not every) or (path.parent == folder and name in ("SKILL.md", "skill.md")):
                continue
            try:
                mode = os.lstat(path).st_mode
                if not (stat.S_ISREG(mode) or (every and stat.S_ISLNK(mode) and path.is_file())):
                    continue
            except OSError:
                continue
            out.append(path.relative_to(folder).as_posix())
            if len(out) >= limit:
                return out
    return out


def scanned(path: Path, text: str) -> list[Problem]:
    """The scanner's findings in one text (through the cache), each at its file and line."""
    if text.startswith("#!"):
        # A #! line names a program (`/usr/bin/env python3`), which beside a docstring's "Prints ..." reads
        # to the scanner as a request for the environment: it is scanned on its own, the lines kept.
        shebang, _, rest = text.partition("\n")
        found = {f.kind: (f, n) for f, n in [*passed.findings("\n" + rest), *passed.findings(shebang)]}
        findings = list(found.values())
    else:
        findings = passed.findings(text)
    return [Problem(path, line, "blocked", f"the injection scanner flagged {finding}") for finding, line in findings]


def check(folder: Path, skill_file: Path, skill_text: str, read: Read) -> list[Problem]:
    """Every problem in what the skill bundles, and in the commands it and its files would run."""
    rels = bundled_files(folder, every=True, limit=MAX_CHECKED + 1)
    if len(rels) > MAX_CHECKED:
        return [Problem(skill_file, 1, "blocked", f"the folder holds more than {MAX_CHECKED} files, too many to "
                                                  "check")]
    out: list[Problem] = []
    texts: list[tuple[Path, str]] = [(skill_file, skill_text)]
    assets: list[Asset] = []
    budget = MAX_SKILL_TEXT - len(skill_text)
    for rel in rels:
        path = folder / rel
        try:
            data = read(path, MAX_TEXT_BYTES)
        except (OSError, ToolError) as exc:
            why = str(exc) if isinstance(exc, ToolError) else exc.strerror or str(exc)
            out.append(Problem(path, 1, "blocked", f"cannot be checked: {why}"))
            continue
        kind, text = _read_as_shown(rel, data)
        if kind in ("media", "opaque"):
            assets.append(Asset(path, rel, kind))
            continue
        if len(data) > MAX_TEXT_BYTES or len(text) > budget:
            limit = (f"{MAX_TEXT_BYTES >> 20} MiB" if len(data) > MAX_TEXT_BYTES
                     else f"{MAX_SKILL_TEXT >> 20} MiB for the whole skill")
            out.append(Problem(path, 1, "blocked", f"more text than the scanner reads (at most {limit}), and the "
                                                   "model could read all of it"))
            continue
        budget -= len(text)
        out += scanned(path, text)
        if kind == "encoded":
            assets.append(Asset(path, rel, kind))
        else:
            texts.append((path, text))
    out += encoded.check(folder, texts, assets)
    out += commands.check(skill_file, skill_text, script=False)
    for path, text in texts[1:]:
        rel = path.relative_to(folder).as_posix()
        if commands.is_shell_script(rel, text):
            out += commands.check(path, text, script=True)
        elif path.suffix.lower() in (".md", ".markdown"):
            out += commands.check(path, text, script=False)
    return out


def _read_as_shown(rel: str, data: bytes) -> tuple[encoded.Kind, str]:
    """What the file is, and its text as read_file would show it ("" for media and other binaries)."""
    suffix = Path(rel).suffix.lower()
    if suffix in DOCUMENTS:
        if len(data) > MAX_TEXT_BYTES:
            return "text", ""  # read_file would extract it all: too large to check, so blocked as text is
        from orchestrator.core.documents import DocumentError, document_text  # only for a skill bundling one

        try:
            return "text", document_text(suffix, data)
        except DocumentError:
            return "opaque", ""  # read_file cannot show it either
    try:
        text: str | None = data[:MAX_TEXT_BYTES].decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        # cut inside a character at the limit is still text
        text = data[:exc.start].decode("utf-8-sig") if exc.start >= MAX_TEXT_BYTES - 3 else None
    kind = encoded.kind_of(rel, data[:HEAD], text)
    if kind in ("media", "opaque"):
        return kind, ""
    # what read_file shows of bytes that are not UTF-8: the rest of the text, which the scanner must see
    return kind, text if text is not None else data[:MAX_TEXT_BYTES].decode("utf-8", "replace")

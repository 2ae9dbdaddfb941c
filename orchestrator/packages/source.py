"""Which addresses a package may be cloned from: https, ssh and git URLs, scp-like ssh addresses, and
local folders (file), and nothing else; the protocols git itself is then allowed to use.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from orchestrator.core.errors import InputError

ALLOWED = ("https", "ssh", "git", "file")
_SCP = re.compile(r"^(?:[A-Za-z0-9._-]+@)?[A-Za-z0-9.-]+:(?!//)[^\s]+$")  # git@host:owner/repo.git
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class Source:
    url: str  # what git is given
    protocol: str  # one of ALLOWED: the only one git may use for it (file only for a local source)


def parse(text: str) -> Source:
    """The source the user typed, or InputError naming the protocols there are."""
    text = text.strip()
    if not text or text.startswith("-"):  # never an option to git
        raise InputError(f"{text!r} is not a repository address; give an https://, ssh://, git:// or "
                         "file:// URL, or a local folder")
    if "://" not in text and (os.path.isabs(os.path.expanduser(text)) or text.startswith(".")):
        folder = Path(os.path.expanduser(text)).resolve()
        if not folder.is_dir():
            raise InputError(f"{text}: no such folder; give a git repository's folder or URL")
        return Source(folder.as_uri(), "file")
    protocol, why = classify(text)
    if why:
        raise InputError(f"{text}: {why}; allowed protocols: {', '.join(ALLOWED)} "
                         "(e.g. https://host/owner/repo.git, git@host:owner/repo.git, /path/to/folder)")
    return Source(text, protocol)


def classify(url: str) -> tuple[str, str]:
    """The protocol of a repository address, or why it is refused: a remote helper (ext::, fd::, ...), a
    protocol outside ALLOWED, or something that is no address at all."""
    if "::" in url.split("/", 1)[0]:
        return "", f"the {url.split('::', 1)[0]}:: transport is refused"
    if "://" in url:
        scheme = urlsplit(url).scheme.lower()
        return (scheme, "") if scheme in ALLOWED else ("", f"the {scheme or 'empty'} protocol is refused")
    if _SCP.match(url):
        return "ssh", ""
    return "", "not a repository address"


def default_name(source: Source) -> str:
    """The package's name when --name is not given: the address's last part without `.git`."""
    last = source.url.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    name = last[:-4] if last.endswith(".git") else last
    return check_name(name, hint=True)


def check_name(name: str, *, hint: bool = False) -> str:
    if not NAME.match(name) or name in (".", ".."):
        extra = "; pass --name NAME" if hint else ""
        raise InputError(f"{name!r} cannot name a package: letters, digits, '.', '_' and '-', at most 64, "
                         f"starting with a letter or digit{extra}")
    return name

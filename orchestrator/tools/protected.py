"""What in a workspace runs code later outside the sandbox: git's metadata in every shape, files other tools
run by themselves, the orchestrator's own configuration, and the build files that run when the user runs them.

A Guard finds them before each command (to be bound read-only in the jail), compares after it (what a command
created of them is set aside, renamed beside itself; what it changed of the build files is reported), and
the file tools refuse writing them unless the user says yes. Names are protected, not just what exists:
a `.git` rebuilt under a new name, or created where there was none, is new and is set aside.
"""
from __future__ import annotations

import os
import re
import shlex
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

# git runs what these configure (hooks, config keys, submodules) and hook managers run what they list
GIT = frozenset({
    ".git", ".gitmodules", ".pre-commit-config.yaml", ".husky", ".githooks",
    "lefthook.yml", "lefthook.yaml", ".lefthook.yml", ".lefthook.yaml",
    "lefthook-local.yml", "lefthook-local.yaml", ".lefthook-local.yml", ".lefthook-local.yaml",
})
# editors, dev containers and environment managers run these on their own when the folder is opened or entered
OPENED = frozenset({
    ".vscode", ".devcontainer", ".devcontainer.json", ".idea", ".zed", ".fleet", ".envrc", ".direnv",
    ".exrc", ".nvimrc", ".nvim.lua", ".dir-locals.el", ".dir-locals-2.el",
    "mise.toml", ".mise.toml", "mise.local.toml", ".mise.local.toml", ".mise",
})
OPENED_SUFFIXES = (".code-workspace",)
# the orchestrator's own: agent definitions picked up from the folder, and project skills
OWN_ANYWHERE = frozenset({".agents"})
OWN_AT_ROOT = frozenset({"agents"})
# run when the user runs make, pytest, npm, cargo ...: left writable (agents edit them as their work), reported
BUILD = frozenset({
    "Makefile", "makefile", "GNUmakefile", "conftest.py", "pytest.ini", "tox.ini", "noxfile.py", "setup.py",
    "setup.cfg", "pyproject.toml", "package.json", ".npmrc", ".yarnrc", ".yarnrc.yml", ".pnpmfile.cjs",
    "justfile", "Justfile", ".justfile", "Taskfile.yml", "Taskfile.yaml", "CMakeLists.txt", "meson.build",
    "build.gradle", "build.gradle.kts", "settings.gradle", "settings.gradle.kts", "gradlew", "pom.xml",
    "Cargo.toml", "build.rs", "Rakefile", "Gemfile", "composer.json", "Dockerfile", "docker-compose.yml",
    "compose.yaml", "compose.yml", "docker-compose.yaml", "Vagrantfile",
})
BUILD_SUFFIXES = (".mk",)
# in a home folder that a command can write: the shell's startup, git's and the orchestrator's own settings,
# and the programs the user's shell finds first
HOME_FILES = (
    ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc", ".zshenv", ".zprofile",
    ".zlogin", ".zlogout", ".cshrc", ".tcshrc", ".kshrc", ".mkshrc", ".inputrc", ".pam_environment",
    ".xprofile", ".xinitrc", ".xsession", ".gitconfig", ".ssh", ".gnupg", ".local/bin", ".config/git",
    ".config/fish", ".config/orchestrator", ".config/autostart", ".config/systemd", ".config/environment.d",
    ".config/nvim", ".vimrc", ".emacs", ".emacs.d", ".config/direnv", ".config/mise", ".pythonrc",
    ".npmrc", ".cargo/config.toml", ".cargo/config", ".local/share/orchestrator",
    # what those source or read as settings that run programs
    ".bash_aliases", ".bash_functions", ".bashrc.d", ".zshrc.d", ".zsh", ".oh-my-zsh", ".tmux.conf",
    ".config/tmux", ".screenrc", ".vim", ".gdbinit", ".xsessionrc", ".config/Code", ".vscode",
    ".local/share/applications", ".config/pip", ".pip", ".condarc", ".config/uv", ".wgetrc", ".curlrc",
)
# git config keys whose value names a program git runs; a program inside the workspace is protected too
_PROGRAM_KEYS = ("fsmonitor", "sshcommand", "editor", "pager", "external", "command", "clean", "smudge",
                 "process", "driver", "helper", "program", "textconv", "askpass", "hookspath")
# what stays read-only in a .git the user let a command write (commits, branches): what git runs or
# follows, and the other repositories it holds
GIT_INNER = ("hooks", "config", "config.worktree", "commondir", "modules", "worktrees")
MAX_CONFIG = 1 << 20  # bytes of a git config read for program paths


def kind(name: str, at_root: bool) -> str | None:
    """Why a file or folder of this name is protected ("git", "opened", "own"), or None."""
    if name in GIT:
        return "git"
    if name in OPENED or name.endswith(OPENED_SUFFIXES):
        return "opened"
    if name in OWN_ANYWHERE or (at_root and name in OWN_AT_ROOT):
        return "own"
    return None


def is_build(name: str) -> bool:
    return name in BUILD or name.endswith(BUILD_SUFFIXES)


WHY = {
    "git": "git runs what it configures (hooks, config, submodules)",
    "opened": "an editor, dev container or environment tool runs what it configures",
    "own": "it configures the orchestrator itself (agents, skills)",
    "home": "a startup or settings file of the user's own programs",
}


def reason(root: Path, path: Path) -> str | None:
    """Why writing `path` (inside `root`) would plant something that runs later outside the sandbox, or None."""
    if not path.is_relative_to(root):
        return None
    parts = path.relative_to(root).parts
    for i, part in enumerate(parts):
        if why := kind(part, i == 0):
            return f"{Path(*parts[:i + 1])}: {WHY[why]}"
    return None


def home_targets(roots: Iterable[Path], homes: Iterable[Path]) -> list[Path]:
    """The home files of HOME_FILES that lie inside a root a command can write."""
    out = []
    for h in homes:
        for rel in HOME_FILES:
            p = h / rel
            if any(p.is_relative_to(r) for r in roots):
                out.append(p)
    return out


@dataclass(frozen=True)
class Entry:
    path: Path
    identity: tuple[int, int]  # (dev, ino) as lstat saw it: a moved folder keeps it, a rebuilt one does not
    link: str | None  # a symbolic link's target, to restore it should a command replace the link


@dataclass
class Scan:
    """One look at a workspace: its protected entries, its build files' states, and what to bind read-only."""
    entries: dict[Path, Entry] = field(default_factory=dict)
    builds: dict[Path, tuple[int, int, int, int]] = field(default_factory=dict)  # dev, ino, size, mtime_ns
    extra: list[Path] = field(default_factory=list)  # resolved git dirs and programs git config names
    roots: tuple[Path, ...] = ()  # what the command can write: the workspace and its writable folders

    def read_only(self, lifted: Iterable[Path] = ()) -> list[Path]:
        """Real paths to bind read-only: protected entries (a link's target, when it is inside what the
        command can write: elsewhere it is not there at all), then what git resolves."""
        lifted = tuple(lifted)
        out: list[Path] = []
        for e in self.entries.values():
            real = Path(os.path.realpath(e.path)) if e.link is not None else e.path
            if not any(real.is_relative_to(r) for r in self.roots):
                continue  # a link out of the writable folders: binding it would make its target visible
            if not any(e.path.is_relative_to(w) for w in lifted):
                out.append(real)
            elif e.path.name == ".git" and real.is_dir():  # a writable .git still runs nothing new
                out += [real / inner for inner in GIT_INNER
                        if not any((e.path / inner).is_relative_to(w) and w != e.path for w in lifted)]
        out += [p for p in self.extra if not any(p.is_relative_to(w) for w in lifted)]
        return [p for p in dict.fromkeys(out) if os.path.lexists(p)]


def scan(workspace: Path, homes: Iterable[Path] = (), roots: Iterable[Path] = ()) -> Scan:
    """Walk `workspace` (no link followed) for protected names and build files; resolve each repository's
    git dir, common dir and the programs its config names; add the home files inside `roots`."""
    found = Scan(roots=(workspace, *roots))
    for path, st in _walk(workspace, found.builds):
        found.entries[path] = Entry(path, (st.st_dev, st.st_ino),
                                    os.readlink(path) if stat.S_ISLNK(st.st_mode) else None)
    for path in list(found.entries):
        if path.name == ".git":
            found.extra += _git_paths(workspace, path)
        if path.name in GIT and path.name not in (".git", ".gitmodules"):  # hook managers' files and folders
            found.extra += _named_by_hooks(workspace, path.parent, path)
    for p in home_targets((workspace, *roots), homes):
        try:
            st = os.lstat(p)
        except OSError:
            continue
        found.entries[p] = Entry(p, (st.st_dev, st.st_ino), os.readlink(p) if stat.S_ISLNK(st.st_mode) else None)
    return found


def _walk(top: Path, builds: dict[Path, tuple[int, int, int, int]]) -> Iterator[tuple[Path, os.stat_result]]:
    """Protected entries under `top` with their lstat; build files' states go to `builds`. Protected folders
    are not entered (they are bound read-only whole), nor are links. Plain strings and one set lookup per
    entry: a workspace is walked twice per command."""
    stack = [(str(top), True)]
    while stack:
        folder, at_root = stack.pop()
        try:
            with os.scandir(folder) as entries:
                for e in entries:
                    name = e.name
                    special = name in _SPECIAL or name.endswith(_SUFFIXES)
                    try:
                        if special and kind(name, at_root):
                            yield Path(e.path), e.stat(follow_symlinks=False)
                        elif e.is_dir(follow_symlinks=False):
                            stack.append((e.path, False))
                        elif special and is_build(name) and e.is_file(follow_symlinks=False):
                            st = e.stat(follow_symlinks=False)
                            builds[Path(e.path)] = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
                    except OSError:
                        pass  # gone since the listing
        except OSError:
            continue


_SPECIAL = GIT | OPENED | OWN_ANYWHERE | OWN_AT_ROOT | BUILD
_SUFFIXES = OPENED_SUFFIXES + BUILD_SUFFIXES


def _git_paths(workspace: Path, dotgit: Path) -> list[Path]:
    """What a `.git` resolves to (a pointer's gitdir, a worktree's common dir) and the files its config names
    as programs or includes: inside the workspace, or outside it where that repository names this very
    checkout back (so a planted pointer cannot make another repository visible in the jail)."""
    out: list[Path] = []
    gitdir = _pointed(dotgit) if dotgit.is_file() and not dotgit.is_symlink() else Path(os.path.realpath(dotgit))
    if gitdir is None or not _is_git_dir(gitdir):
        return out
    inside = gitdir.is_relative_to(workspace)
    if not inside and not _names_back(gitdir, dotgit):
        return out
    if gitdir != dotgit:
        out.append(gitdir)
    dirs = [gitdir]
    common = _read_small(gitdir / "commondir")
    if common:
        c = Path(os.path.realpath(gitdir / common.strip()))
        # a worktree's own gitdir lies in its common dir's worktrees/: anything else was written there
        if _is_git_dir(c) and (c.is_relative_to(workspace) or gitdir.parent == c / "worktrees"):
            out.append(c)
            dirs.append(c)
    top = dotgit.parent
    for d in dirs:
        out += _config_paths(workspace, top, d / "config")
        out += _config_paths(workspace, top, d / "config.worktree")
        out += _named_by_hooks(workspace, top, d / "hooks")
    return out


MAX_HOOKS = 64  # files of one hooks folder read for the programs they name
_WORD = re.compile(r"[\w.@+~-]*/[\w./@+~-]+|[\w.@+-]+\.(?:sh|bash|py|js|mjs|cjs|ts|rb|pl|ps1)\b")


def _named_by_hooks(workspace: Path, top: Path, where: Path) -> list[Path]:
    """The workspace files that hooks (a hooks folder's scripts, a hook manager's config or folder) name as
    programs to run: git runs the hook from the checkout's top, and the hook runs them, so an agent that
    rewrote `scripts/lint.sh` would have its code run by the user's next commit."""
    try:
        files = [where] if where.is_file() else sorted(p for p in where.iterdir() if p.is_file())[:MAX_HOOKS]
    except OSError:
        return []
    out: list[Path] = []
    for f in files:
        if f.name.endswith(".sample"):
            continue
        for word in _WORD.findall(_read_small(f) or ""):
            path = Path(os.path.expanduser(word))
            path = Path(os.path.realpath(path if path.is_absolute() else top / path))
            if path.is_relative_to(workspace) and path.is_file():
                out.append(path)
    return out


def _names_back(gitdir: Path, dotgit: Path) -> bool:
    """Does the repository at `gitdir` (outside the workspace) name this checkout as its own? A linked
    worktree's gitdir holds a `gitdir` file naming the checkout's `.git`; a submodule's, core.worktree."""
    back = _read_small(gitdir / "gitdir")
    if back and os.path.realpath(back.strip()) == os.path.realpath(dotgit):
        return True
    for line in (_read_small(gitdir / "config") or "").splitlines():
        key, _, value = line.strip().partition("=")
        if key.strip().lower() == "worktree" and value.strip():
            return os.path.realpath(gitdir / value.strip().strip('"')) == os.path.realpath(dotgit.parent)
    return False


def _pointed(pointer: Path) -> Path | None:
    text = _read_small(pointer)
    if not text or not text.startswith("gitdir:"):
        return None
    return Path(os.path.realpath(pointer.parent / text[len("gitdir:"):].strip()))


def _is_git_dir(path: Path) -> bool:
    return path.is_dir() and (path / "HEAD").is_file()


def _read_small(path: Path) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(MAX_CONFIG).decode("utf-8", errors="replace")
    except OSError:
        return None


def _config_paths(workspace: Path, top: Path, config: Path, depth: int = 0) -> list[Path]:
    """Programs (core.fsmonitor, core.hooksPath, diff/filter/merge drivers, `!` aliases ...) and included
    config files a git config names inside the workspace: git would run or read them unsandboxed."""
    text = _read_small(config)
    if text is None or depth > 5:
        return []
    out: list[Path] = []
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = line[1:line.find("]")].split(" ", 1)[0].strip().lower() if "]" in line else ""
            line = line[line.find("]") + 1:].strip() if "]" in line else ""
            if not line:
                continue
        key, _, value = line.partition("=")
        key, value = key.strip().lower(), value.strip().strip('"')
        if not value:
            continue
        if key == "path" and section in ("include", "includeif"):
            inc = Path(os.path.expanduser(value))
            inc = inc if inc.is_absolute() else config.parent / inc
            out.append(inc)
            out += _config_paths(workspace, top, inc, depth + 1)
        elif key.endswith(_PROGRAM_KEYS) or (section == "alias" and value.startswith("!")):
            out += _program(top, value.lstrip("!"))
    return [Path(os.path.realpath(p)) for p in out if Path(os.path.realpath(p)).is_relative_to(workspace)]


def _program(top: Path, value: str) -> list[Path]:
    try:
        words = shlex.split(value)
    except ValueError:
        words = value.split()
    return [Path(os.path.expanduser(w)) if os.path.isabs(os.path.expanduser(w)) else top / w
            for w in words[:1] if "/" in w]

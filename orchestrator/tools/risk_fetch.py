"""Package runners that fetch code from a URL or a repository and run it at once (npx github:…, uvx --from
git+…, deno run -A https://…, go run pkg@v, nix run github:…); a registry package run by name is not one."""
from __future__ import annotations

import re

from orchestrator.core.patterns import Pattern
from orchestrator.tools.risk_args import parse

# npm-style specs that name a repository or a tarball instead of a registry package; `user/repo` is GitHub
# shorthand to npm, while `@scope/pkg` is a registry name and `./dir` a local folder.
_JS_REMOTE = Pattern(r"(?i)^(?:git\+[a-z]+:|git:|github:|gitlab:|bitbucket:|gist:|https?://|ftp://|"
                     r"[\w.-]+@[\w.-]+:)|^[a-z0-9][\w.-]*/[\w.-]+(?:#\S*)?$")
# pip-style requirements fetched from a URL or a repository, also as a direct reference `name @ url`.
_PY_REMOTE = Pattern(r"(?i)(?:^|@\s*)(?:git\+|hg\+|svn\+|bzr\+|https?://|ftp://)")
_DENO_REMOTE = Pattern(r"(?i)^(?:https?://|jsr:|npm:)")
# Nix flake references outside this machine; `nixpkgs#hello` is the registry, `.#dev` the project.
_FLAKE_REMOTE = Pattern(r"(?i)^(?:github:|gitlab:|sourcehut:|git\+|hg\+|https?://|tarball\+|file\+https?)")

# Runners by program, with the subcommands that fetch and run (None: the program itself does).
_JS_RUNNERS = {"npx": None, "pnpx": None, "bunx": None, "npm": {"exec", "x", "init", "create"},
               "pnpm": {"dlx", "exec", "create"}, "yarn": {"dlx", "create"}, "bun": {"x", "create"}}
_JS_VALUES = frozenset({"--package", "--call", "--workspace", "--prefix", "--registry", "--cache", "--userconfig"})
_UV_VALUES = frozenset({"--from", "--with", "--with-editable", "--with-requirements", "--python", "--index",
                        "--index-url", "--extra-index-url", "--default-index", "--find-links", "--constraints",
                        "--overrides", "--directory", "--project", "--env-file", "--cache-dir", "--config-file",
                        "--package", "--group", "--extra"})
_DENO_VALUES = frozenset({"--config", "--import-map", "--cert", "--location", "--seed", "--name", "--root",
                          "--log-level", "--ext", "--lock", "--v8-flags"})
# Deno's permission flags: remote code granted any of them acts outside Deno's own sandbox.
_DENO_GRANTS = Pattern(r"^(?:--allow-(?!import\b)[\w-]+(?:=.*)?|-[a-zA-Z]*[ARWNESP][a-zA-Z]*)$")
_GO_VALUES = {"-C", "-exec", "-tags", "-ldflags", "-gcflags", "-asmflags", "-mod", "-modfile", "-o", "-p",
              "-pkgdir", "-toolexec", "-overlay", "-buildmode", "-compiler", "-gccgoflags", "-installsuffix",
              "-pgo", "-coverpkg", "-covermode"}


def fetched_code(prog: str, args: list[str]) -> str | None:
    """Why `prog args` fetches code from outside a package registry and runs it, or None."""
    if prog in _JS_RUNNERS:
        return _js_runner(prog, args)
    if prog in ("uvx", "uv", "pipx"):
        return _py_runner(prog, args)
    if prog in ("deno", "dx"):
        return _deno(prog, args)
    if prog == "go":
        sub, target = go_target(args)
        if sub == "run" and target and _go_remote(target):
            return "go run builds and runs a module fetched at a version"
    if prog == "nix":
        _, pos = parse(args, "", frozenset({"--command", "-c", "--override-input", "--profile"}))
        if pos[:1] in (["run"], ["shell"], ["develop"]) and any(_FLAKE_REMOTE.match(p) for p in pos[1:2]):
            return "nix runs a flake fetched from a repository"
    return None


def _js_runner(prog: str, args: list[str]) -> str | None:
    opts, pos = parse(args, "pcw", _JS_VALUES)
    subs = _JS_RUNNERS[prog]
    if subs is not None:
        if not pos or pos[0] not in subs:
            return None
        pos = pos[1:]
    specs = [v for o, v in opts if o in ("-p", "--package") and v] + pos[:1]
    if any(_JS_REMOTE.match(s) for s in specs):
        return "runs a package fetched from a repository or a URL"
    return None


def _py_runner(prog: str, args: list[str]) -> str | None:
    opts, pos = parse(args, "pwf", _UV_VALUES | {"--spec", "--pip-args"})
    if prog == "uv":
        if pos[:2] == ["tool", "run"]:
            pos = pos[2:]
        elif pos[:1] == ["run"]:
            pos = pos[1:]
            if any(o in ("--with", "-w", "--with-requirements") and v and _PY_REMOTE.search(v) for o, v in opts) \
                    or pos[:1] and re.match(r"(?i)^https?://", pos[0]):
                return "uv run fetches code from a repository or a URL and runs it"
            return None
        else:
            return None
    elif prog == "pipx":
        if pos[:1] != ["run"]:
            return None
        pos = pos[1:]
    sources = [v for o, v in opts if o in ("--from", "--with", "-w", "--spec") and v] + pos[:1]
    if any(_PY_REMOTE.search(s) for s in sources):
        return "runs a tool fetched from a repository or a URL"
    return None


def _deno(prog: str, args: list[str]) -> str | None:
    opts, pos = parse(args, "cLn", _DENO_VALUES)
    if prog == "deno" and not (pos and _DENO_REMOTE.match(pos[0])):  # `deno URL` is `deno run URL`
        if not pos or pos[0] not in ("run", "x", "install", "serve"):
            return None
        sub, pos = pos[0], pos[1:]
        if sub == "install" and not {"-g", "--global"} & {o for o, _ in opts}:
            return None  # without --global, install adds the project's dependencies
    if not pos or not _DENO_REMOTE.match(pos[0]):
        return None
    before = args[:args.index(pos[0])]  # flags after the module are the module's own arguments
    if any(_DENO_GRANTS.match(a) for a in before):
        return "deno runs code fetched from a URL or a registry with permissions granted"
    return None


def go_target(args: list[str]) -> tuple[str, str]:
    """The go subcommand and its first package operand (flags and their values skipped)."""
    if not args:
        return "", ""
    sub, i = args[0], 1
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in _GO_VALUES else 1
    return sub, args[i] if i < len(args) else ""


def _go_remote(target: str) -> bool:
    return "@" in target and not target.startswith((".", "/"))


def installs_remote_program(prog: str, args: list[str]) -> bool:
    """`go install mod@version`: fetched and built, for a later command of the same text to run."""
    if prog != "go":
        return False
    sub, target = go_target(args)
    return sub == "install" and _go_remote(target)


def runs_from_foreign_index(prog: str, args: list[str]) -> bool:
    """A runner told to fetch from another registry or index (npx --registry, uvx --index-url)."""
    if prog in _JS_RUNNERS:
        return any(a == "--registry" or a.startswith("--registry=") for a in args)
    if prog in ("uvx", "uv", "pipx") and (prog != "uv" or args[:1] == ["run"] or args[:2] == ["tool", "run"]):
        return any(a.split("=")[0] in ("--index", "--index-url", "--extra-index-url", "--default-index", "-i")
                   for a in args)
    return False

"""Reading a shell command before it runs: the blocklist of commands refused outright, the risk
classifier that turns a dangerous command into a question, and whether it wants the network; nothing runs.

The classifier is the asking layer in front of the OS sandbox (tools/jail.py), which holds what it
misses. Text it cannot see into (eval, a computed command name, code piped into a shell or handed to an
interpreter) is *opaque*: contained, it runs; with the network or without the sandbox, it asks.
Families with modules of their own: risk_fetch (package runners fetching code), risk_sync (copies to remote
storage), risk_namespace (namespace and credential tools), risk_heredoc (here-document bodies)."""
from __future__ import annotations

import itertools
import posixpath
import re
import shlex
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache

from orchestrator.core.patterns import Pattern
from orchestrator.tools import risk_namespace as namespace
from orchestrator.tools.risk_args import parse as _parse
from orchestrator.tools.risk_fetch import fetched_code, installs_remote_program, runs_from_foreign_index
from orchestrator.tools.risk_heredoc import Heredoc, body_number, lift_heredocs
from orchestrator.tools.risk_sync import deletes_at_destination, sends_away

EXFILTRATION = "exfiltration"
DESTRUCTIVE = "destructive"
DISK = "disk"
PRIVILEGE = "privilege"
CREDENTIALS = "credentials"
BOMB = "resource-bomb"
REMOTE_CODE = "remote-code"
PERSISTENCE = "persistence"
INFRASTRUCTURE = "infrastructure"
SUPPLY_CHAIN = "package-source"
OPAQUE = "opaque"
UNSANDBOXED = "unsandboxed"

# Most serious first: the order the user is asked in when one command carries several risks.
LABELS = {
    BOMB: "fork or resource bomb",
    DISK: "disk and filesystem tools",
    REMOTE_CODE: "runs code fetched from the network",
    EXFILTRATION: "data exfiltration",
    PRIVILEGE: "privilege escalation",
    CREDENTIALS: "credentials and system paths",
    PERSISTENCE: "startup files, hooks and scheduled jobs",
    INFRASTRUCTURE: "containers, clusters and cloud resources",
    DESTRUCTIVE: "destructive deletion",
    SUPPLY_CHAIN: "installs from an unusual package source",
    OPAQUE: "code the classifier cannot read",
    UNSANDBOXED: "runs without the sandbox",
}


@dataclass(frozen=True)
class Risk:
    category: str
    reason: str  # a fixed phrase, never the command's own text

    @property
    def label(self) -> str:
        return LABELS[self.category]


@dataclass(frozen=True)
class Verdict:
    blocked: str | None  # why the command is never run, or None
    risks: tuple[Risk, ...]  # at most one per category, most serious first
    network: bool = False  # it uses the network (a client, a package manager, a URL)


def classify(command: str) -> Risk | None:
    """The most serious risk of `command`, or None for an ordinary command."""
    risks = assess(command).risks
    return risks[0] if risks else None


def blocked(command: str) -> str | None:
    return assess(command).blocked


@lru_cache(maxsize=256)
def assess(command: str) -> Verdict:
    script = _Script()
    _read(command, 0, False, script)
    found: dict[str, str] = {}
    for category, reason in _risks(script):
        found.setdefault(category, reason)
    return Verdict(_blocked(script), tuple(Risk(c, found[c]) for c in LABELS if c in found), _wants_network(script))


# --- reading the text -----------------------------------------------------------------------
# Here-document bodies are lifted out first: data unless a shell or an interpreter reads them (then
# they are read as its code), their substitutions read when the delimiter is unquoted. shlex then
# splits the text into simple commands across pipes, &&, ; and newlines; $(...), `...` and
# <(...) are lifted out and read on their own, as are `sh -c '...'`, eval, `ssh host '...'`, su -c
# and find -exec. Env-var prefixes, wrappers (sudo, env, xargs, timeout, ...) and binary paths are
# peeled off to find the program. Text that cannot be read exactly (an unbalanced quote) is read
# word by word, and quoted literals are looked at too: every doubt leans towards asking. Beyond
# reach: what a script file, a variable or a decoded string does at run time, and interpreter code
# beyond the sensitive paths and fork loops it names.

_SUB = "$__subst__"  # stands in for a $(...), `...` or <(...) whose text is read on its own
_MAX_DEPTH = 12  # nesting beyond this is refused rather than half read
_PUNCT = "();<>|&\n"
_FD_NUMBER = Pattern(r"(?<![\w$])\d+(?=[<>])")  # the 2 of 2>&1 is not an argument
_ASSIGNMENT = Pattern(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_KEYWORDS = {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}"}
_HEADERS = {"for", "case", "select", "esac", "in"}  # loop/case headers: their words run nothing
_SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "fish"}
_INTERPRETERS = Pattern(r"^(python[\d.]*|pypy[\d.]*|perl|ruby|node|nodejs|php|lua|Rscript)$")


@dataclass
class Cmd:
    words: list[str] = field(default_factory=list)
    redirects: list[tuple[str, str]] = field(default_factory=list)
    fed: bool = False  # stdin comes from a pipe, a file or a here-string
    wrappers: list[str] = field(default_factory=list)  # sudo, env, xargs, find ... that run it
    found_build: bool = False  # run by `find -exec` on build artefacts only
    find_roots: list[str] = field(default_factory=list)  # where the `find` that runs it starts
    argv: list[str] = field(default_factory=list)
    stdin_text: str | None = None  # what a here-document or here-string hands it as input
    script_code: tuple[str, str] | None = None  # (language, code) of a file the same text wrote and this runs
    upstream: Cmd | None = None  # the command piping into it

    @property
    def prog(self) -> str:
        return posixpath.basename(self.argv[0].lstrip("\\")) if self.argv else ""

    @property
    def args(self) -> list[str]:
        return self.argv[1:]

    def writes(self) -> list[str]:
        return [t for op, t in self.redirects if ">" in op]


@dataclass
class _Script:
    cmds: list[Cmd] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)  # every script text read, nested ones too
    words: list[str] = field(default_factory=list)  # every word and redirect target, for path scans
    code: list[str] = field(default_factory=list)  # inline interpreter code (python -c, perl -e)
    heredocs: list[Heredoc] = field(default_factory=list)  # bodies lifted out, by their MARK number
    written: dict[str, str] = field(default_factory=dict)  # files a here-document was written to: their text
    background_loop: bool = False
    too_deep: bool = False


def _read(text: str, depth: int, fed: bool, script: _Script) -> None:
    if depth > _MAX_DEPTH:
        script.too_deep = True
        return
    text, docs = lift_heredocs(text, len(script.heredocs))
    script.heredocs += docs
    script.texts.append(text)
    for doc in docs:
        if doc.expands:  # an unquoted body's $(...) and `...` run when the shell expands it
            for sub in _lift_substitutions(doc.body)[1]:
                _read(sub, depth + 1, False, script)
    outer, inner = _lift_substitutions(text.replace("\\\n", ""))
    for sub in inner:
        _read(sub, depth + 1, False, script)
    cmds, script.background_loop = _split(_tokens(_FD_NUMBER.sub("", outer)), script.background_loop)
    for cmd in cmds:
        cmd.fed = cmd.fed or fed  # every command of `sh -c '...'` shares the shell's stdin
        script.words += cmd.words + [t for _, t in cmd.redirects]
        _unwrap(cmd, depth, script)


def _lift_substitutions(text: str) -> tuple[str, list[str]]:
    """Replace each $(...), `...`, <(...) and >(...) by a placeholder; return their texts.

    Quoting is ignored on purpose: a substitution inside single quotes is text to this shell but
    may be a command to the `sh -c` it is handed to, so it is read either way.
    """
    out, inner, i = [], [], 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            out.append(text[i:i + 2])
            i += 2
        elif c == "`":
            j = i + 1
            while j < len(text) and text[j] != "`":
                j += 2 if text[j] == "\\" else 1
            inner.append(text[i + 1:j])
            out.append(_SUB)
            i = j + 1
        elif c in "$<>" and text.startswith("(", i + 1):
            end = _closing_paren(text, i + 1)
            inner.append(text[i + 2:end])
            out.append(_SUB)
            i = end + 1
        else:
            out.append(c)
            i += 1
    return "".join(out), inner


def _closing_paren(text: str, start: int) -> int:
    depth, j = 0, start
    while j < len(text):
        c = text[j]
        if c == "\\":
            j += 2
            continue
        if c in "'\"":
            j = text.find(c, j + 1)
            if j < 0:
                return len(text)
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return j
        j += 1
    return len(text)


def _tokens(text: str) -> list[str]:
    lexer = shlex.shlex(_plain_ansi_quotes(text), posix=True, punctuation_chars=_PUNCT)
    lexer.whitespace = " \t\r"  # newlines separate commands, so they are punctuation here
    lexer.whitespace_split = True
    lexer.commenters = ""  # a quoted '#' must not hide the rest of the line
    try:
        return list(lexer)
    except ValueError:  # an unbalanced quote: the shell would refuse it; read the bare words
        return re.findall(r"[();<>|&\n]+|[^\s();<>|&]+", text.replace("'", " ").replace('"', " "))


def _plain_ansi_quotes(text: str) -> str:
    """$'...' rewritten as a '...' string that shlex ends where bash does: in bash's ANSI-C quoting \\'
    does not end the string, and to shlex it would, leaving the rest of the text inside a quote."""
    if "$'" not in text:
        return text
    out, quote, i = [], "", 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\" and quote == '"':
                out.append(text[i:i + 2])
                i += 2
                continue
            quote = "" if c == quote else quote
            out.append(c)
            i += 1
        elif c == "\\":
            out.append(text[i:i + 2])
            i += 2
        elif text.startswith("$'", i):
            j, body = i + 2, []
            while j < len(text) and text[j] != "'":
                if text[j] == "\\" and j + 1 < len(text):
                    body.append("'\\''" if text[j + 1] == "'" else text[j:j + 2])  # \' becomes '\''
                    j += 2
                else:
                    body.append(text[j])
                    j += 1
            if j >= len(text):  # never closed: left as it is, for the unbalanced-quote reading
                out.append(text[i:])
                break
            out.append("'" + "".join(body) + "'")
            i = j + 1
        else:
            quote = c if c in "'\"" else ""
            out.append(c)
            i += 1
    return "".join(out)


def _is_op(token: str) -> bool:
    return bool(token) and all(ch in _PUNCT for ch in token)


def _split(tokens: list[str], background_loop: bool) -> tuple[list[Cmd], bool]:
    """Simple commands, their redirects and pipes; and whether a while/until loop backgrounds work."""
    cmds, cur, pending, loops = [], Cmd(), None, 0
    for tok in tokens:
        if _is_op(tok) and ("<" in tok or ">" in tok):
            pending = tok
        elif _is_op(tok):
            done = cur if cur.words or cur.redirects else None
            if done:
                cmds.append(done)
            piped = tok in ("|", "|&")
            cur, pending = Cmd(fed=piped, upstream=done if piped else None), None
            if "&" in tok and tok not in ("&&", "|&") and loops > 0:
                background_loop = True
        elif pending:
            cur.redirects.append((pending, tok))
            cur.fed = cur.fed or pending in ("<", "<<", "<<<", "<>")
            pending = None
        else:
            if not cur.words and tok in ("while", "until"):
                loops += 1
            elif not cur.words and tok == "done":
                loops = max(0, loops - 1)
            cur.words.append(tok)
    if cur.words or cur.redirects:
        cmds.append(cur)
    return cmds, background_loop


# Options that take a value, per wrapper, so the wrapped command is found after them.
_WRAPPER_VALUES = {
    "sudo": "ugpCDrtUTh", "doas": "uC", "env": "uCS", "nice": "n", "ionice": "cnp", "timeout": "sk",
    "xargs": "IiELnPsda", "stdbuf": "ioe", "exec": "a", "watch": "nd", "pkexec": "", "nohup": "",
    "setsid": "", "command": "", "builtin": "", "busybox": "", "chroot": "", "flock": "w", "time": "fo",
    "unbuffer": "", "chronic": "", "strace": "oespu", "runuser": "", "su": "",  # su: see _after_wrapper
    **namespace.WRAPPERS,
}
_WRAPPER_OPERANDS = {"timeout": 1, "chroot": 1, "flock": 1}  # positional words before the command
_PRIVILEGED = {"sudo", "doas", "su", "pkexec", "runuser", "sudoedit", "run0"}
_NAMESPACED = set(namespace.WRAPPERS) - _PRIVILEGED | {"ip-netns", "capsh"}


def _unwrap(cmd: Cmd, depth: int, script: _Script) -> None:
    argv = list(cmd.words)
    while argv:
        prog = posixpath.basename(argv[0].lstrip("\\"))
        if argv[0] in _KEYWORDS or _ASSIGNMENT.match(argv[0]):
            argv = argv[1:]
        elif argv[0] == "function":
            argv = argv[2:]
        elif argv[0] in _HEADERS:
            argv = []
        elif prog in _WRAPPER_VALUES and not namespace.inspects_only(prog, argv[1:]):
            cmd.wrappers.append(prog)
            argv, nested = _after_wrapper(prog, argv[1:])
            if nested is not None:
                _read(nested, depth + 1, cmd.fed, script)
        elif prog == "ip" and (inner := namespace.netns_command(argv)) is not None:
            cmd.wrappers.append("ip-netns")
            argv = inner
        else:
            break
    cmd.argv = argv
    cmd.stdin_text = _stdin_text(cmd, script)
    script.cmds.append(cmd)
    prog, args = cmd.prog, cmd.args
    fed_text = cmd.stdin_text
    if prog in ("cat", "tee") and fed_text is not None:
        for target in cmd.writes() + (_parse(args)[1] if prog == "tee" else []):
            script.written[_normal(target)] = fed_text
    _run_written(cmd, depth, script)
    if prog in _SHELLS:
        body = _shell_script(args)
        if body is not None:
            _read(body, depth + 1, cmd.fed, script)
        elif fed_text is not None and _reads_stdin(args):
            _read(fed_text, depth + 1, False, script)
    elif prog in ("source", ".") and args[:1] in (["/dev/stdin"], ["/proc/self/fd/0"]) and fed_text is not None:
        _read(fed_text, depth + 1, False, script)
    elif prog == "eval" and args:
        _read(" ".join(args), depth + 1, cmd.fed, script)
    elif prog == "ssh":
        _, pos = _parse(args, "bcDEeFIiJLlmOopQRSWw")
        if len(pos) > 1:
            _read(" ".join(pos[1:]), depth + 1, cmd.fed, script)
        elif pos and fed_text is not None:  # the remote login shell reads its input as commands
            _read(fed_text, depth + 1, False, script)
    elif prog == "capsh" and (inner_argv := namespace.capsh_command(args)) is not None:
        _unwrap(Cmd(words=inner_argv, wrappers=cmd.wrappers + ["capsh"], fed=cmd.fed), depth + 1, script)
    elif prog == "sg" and (nested := namespace.sg_script(args)) is not None:
        _read(nested, depth + 1, cmd.fed, script)
    elif prog in ("find", "gfind"):
        for exec_words in _find_execs(args):
            roots = list(itertools.takewhile(lambda a: not a.startswith(("-", "(", "!")), args))
            exec_cmd = Cmd(words=exec_words, wrappers=cmd.wrappers + ["find"], found_build=_find_is_build(args),
                           find_roots=roots)
            _unwrap(exec_cmd, depth + 1, script)
    elif _INTERPRETERS.match(prog):
        opts, _ = _parse(args, "ceEmWXr")
        script.code += [v for o, v in opts if o in ("-c", "-e", "-E", "-r") and v]
        if (body := _stdin_code(cmd, fed_text)) is not None:
            script.code.append(body)
            script.words.append(body)  # a body names paths and URLs like inline code does


def _run_written(cmd: Cmd, depth: int, script: _Script) -> None:
    """A file the same text wrote from a here-document and now runs (`cat > x.sh <<EOF ... EOF; sh x.sh`)
    is read as the code it is: data while written, commands or a language once run."""
    if not script.written or not cmd.argv:
        return
    prog, args = cmd.prog, cmd.args
    if "/" in cmd.argv[0]:
        file, language = cmd.argv[0], ""
    elif prog in _SHELLS and _shell_script(args) is None or prog in ("source", "."):
        file, language = next((a for a in args if not a.startswith(("-", "+"))), ""), "sh"
    elif _INTERPRETERS.match(prog):
        _, pos = _parse(args, "ceEmWXr")
        file, language = (pos[0] if pos else ""), prog
    else:
        return
    text = script.written.get(_normal(file)) if file else None
    if text is None:
        return
    if not language:  # run directly: its #! line says what reads it
        first = text.split("\n", 1)[0]
        words = first[2:].split() if first.startswith("#!") else []
        language = posixpath.basename(words[-1]) if words else "sh"
    if language in _SHELLS:
        _read(text, depth + 1, False, script)
    else:
        cmd.script_code = (language, text)
        script.code.append(text)
        script.words.append(text)


def _normal(path: str) -> str:
    return posixpath.normpath(path) if path else path


def _stdin_text(cmd: Cmd, script: _Script) -> str | None:
    """The text a here-document or here-string hands `cmd` as its input; the last input redirect wins."""
    inputs = [(op, t) for op, t in cmd.redirects if op in ("<", "<<", "<<<", "<>")]
    up = cmd.upstream
    if not inputs:  # `cat <<EOF | sh` hands sh the body as it stands
        return up.stdin_text if up is not None and up.prog == "cat" and up.args in ([], ["-"]) else None
    op, target = inputs[-1]
    if op == "<<<":
        return target
    number = body_number(target) if op == "<<" else None
    return script.heredocs[number].body if number is not None and number < len(script.heredocs) else None


def _reads_stdin(args: list[str]) -> bool:
    """A shell without -c reads its commands from its input unless it is handed a script file (-s keeps
    reading the input even then)."""
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-o", "-O", "+o", "+O"):
            i += 2
            continue
        if a == "--":
            return "s" in "".join(x[1:] for x in args[:i] if x.startswith("-") and not x.startswith("--"))
        if a.startswith(("-", "+")) and not a.startswith("--") and len(a) > 1:
            if "s" in a[1:]:
                return True
        elif not a.startswith("--"):
            return a in _STDIN_FILES
        i += 1
    return True


_STDIN_FILES = {"-", "/dev/stdin", "/proc/self/fd/0", "/dev/fd/0"}


def _stdin_code(cmd: Cmd, fed_text: str | None) -> str | None:
    """The code an interpreter reads from its input (`python3 - <<EOF`, `node <<< '...'`), or None when
    it runs a script file, a module, inline code, or reads no readable text."""
    if fed_text is None:
        return None
    opts, pos = _parse(cmd.args, "ceEmWXrfpI" if cmd.prog not in ("awk", "gawk", "mawk", "nawk") else "fvF",
                       frozenset({"--eval", "--print", "--command", "--input-type"}))
    if any(o in ("-c", "-e", "-E", "-r", "-m", "-p", "--eval", "--print", "--command", "-f") for o, _ in opts):
        return None
    return fed_text if pos[:1] in ([], ["-"]) else None


def _after_wrapper(prog: str, args: list[str]) -> tuple[list[str], str | None]:
    """The wrapped command's argv, and a script text when the wrapper takes one (su -c, watch)."""
    if prog in ("su", "runuser"):  # su [-] [user] [-c script]: the user is no command
        for k, a in enumerate(args):
            if a in ("-c", "--command") and k + 1 < len(args):
                return [], args[k + 1]
            if a.startswith("--command="):
                return [], a.partition("=")[2]
        return (args[args.index("--") + 1:] if "--" in args else []), None
    values, long, i = _WRAPPER_VALUES[prog], namespace.WRAPPER_LONG.get(prog, ()), 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        if args[i] == "--":
            i += 1
            break
        if prog == "command" and args[i] in ("-v", "-V"):
            return [], None  # `command -v x` only looks x up
        takes = args[i][1:2] in values and len(args[i]) == 2 or args[i] in long
        i += 2 if takes else 1
    while prog == "env" and i < len(args) and _ASSIGNMENT.match(args[i]):
        i += 1
    rest = args[i + _WRAPPER_OPERANDS.get(prog, 0):]
    if prog == "watch":
        return [], " ".join(rest)
    return rest, None


def _shell_script(args: list[str]) -> str | None:
    """The script of `sh [options] -c 'script'`, or None when the shell runs a file or stdin."""
    has_c, i = False, 0
    while i < len(args):
        a = args[i]
        if a in ("-o", "-O", "+o", "+O"):
            i += 2
            continue
        if a.startswith(("-", "+")) and not a.startswith("--") and len(a) > 1:
            has_c = has_c or "c" in a[1:]
        elif not a.startswith("--"):
            return a if has_c else None
        i += 1
    return None


def _find_execs(args: list[str]) -> list[list[str]]:
    out, i = [], 0
    while i < len(args):
        if args[i] in ("-exec", "-execdir", "-ok", "-okdir"):
            j = i + 1
            while j < len(args) and args[j] not in (";", "+"):
                j += 1
            out.append(args[i + 1:j])
            i = j
        i += 1
    return out


# --- paths ----------------------------------------------------------------------------------

_BUILD_DIRS = {
    "build", "dist", "target", "out", "_build", "node_modules", "__pycache__", ".pytest_cache",
    ".mypy_cache", ".ruff_cache", ".tox", ".nox", ".cache", ".coverage", "htmlcov", "coverage",
    ".eggs", ".next", ".nuxt", ".parcel-cache", ".turbo", ".gradle", ".hypothesis", ".venv", "venv",
    "tmp", ".tmp",
}
_BUILD_PATTERNS = {"*.pyc", "*.pyo", "*.o", "*.class", "*.egg-info", ".DS_Store"} | _BUILD_DIRS
_ROOTISH = Pattern(
    r"^(/+\.?\.?|/+\*|~/?\*?|\$\{?HOME\}?/?\*?"
    r"|/+(bin|boot|dev|etc|home|lib|lib32|lib64|opt|proc|root|run|sbin|srv|sys|usr|var)/*\*?)$")
_BLOCK_DEVICE = Pattern(
    r"^/dev/(sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|disk/|mapper/|md\d|dm-\d|mem$|kmem$|port$)")
_SYSTEM = Pattern(r"^(/etc|/boot|/usr|/bin|/sbin|/lib|/lib32|/lib64|/sys|/proc/sys|/var/spool/cron|/root)(/|$)")
_SECRETS = Pattern(
    r"(?<![\w.-])\.(ssh|aws|gnupg|kube|azure|password-store|vault-token|netrc|pgpass|git-credentials"
    r"|pypirc|docker/config\.json|config/gcloud)(?![\w-])"
    r"|\bid_(rsa|dsa|ecdsa|ed25519)\b"
    r"|/etc/(shadow|gshadow|sudoers|passwd|master\.passwd)\b"
    r"|/proc/[^/\s]+/(environ|mem)\b"
    r"|Library/Keychains|\.kdbx\b"
    r"|(?<![\w-])\.(npmrc|yarnrc(\.yml)?|vault-token|terraformrc|s3cfg|boto|bash_history|zsh_history|"
    r"python_history|psql_history|mysql_history|node_repl_history|lesshst|histfile|oci|mozilla|thunderbird"
    r"|config/(gh|hub|glab-cli|doctl|rclone|op|1password|google-chrome|chromium|BraveSoftware|"
    r"microsoft-edge|vivaldi|opera|heroku|netlify|vercel|configstore|git/credentials|sops|age)"
    r"|cargo/credentials|gem/credentials|composer/auth\.json|gradle/gradle\.properties|m2/settings\.xml"
    r"|terraform\.d/credentials|huggingface|cache/huggingface|local/share/keyrings|kaggle|wrangler|fly"
    r"|databrickscfg|pulumi/credentials|snowsql|dbt/profiles|sentryclirc|circleci|travis|"
    r"docker/config\.json|password-store)(?![\w-])"
    r"|\bterraform\.rc\b|\bcredentials\.tfrc\.json\b|\bLogin Data\b|\bCookies\b|key4\.db|logins\.json"
    r"|Library/Application Support/(Google/Chrome|Firefox|BraveSoftware)|AppData/(Local|Roaming)/"
    r"|(?<![\w.-])\.env(?!\.(example|sample|template|dist)\b)(\.[\w-]+)?(?![\w./-])")
_LOCAL_URL = Pattern(
    r"^([a-z][a-z0-9+.-]*://)?([^@/\s]*@)?(localhost|127(\.\d+){3}|0\.0\.0\.0|\[::1\]|::1)(:\d+)?([/?#]|$)", re.I)
_REMOTE_SPEC = Pattern(r"^(scp://|rsync://|sftp://|[^/\s:]+::?)")  # host:path, user@host:, host::module
_GIT_URL = Pattern(r"://|^[^/\s]+@[^/\s]+:")
_FORK_LOOP = Pattern(r"fork.*\b(while|loop|for)\b|\b(while|loop|for)\b.*fork", re.S)
_FUNCTION = Pattern(
    r"(?:function\s+)?([^\s(){};|&<>]+)\s*\(\s*\)\s*[{(](.*?)[})]|function\s+([^\s(){};|&<>]+)\s*\{(.*?)\}", re.S)


def _rootish(path: str) -> bool:
    return bool(_ROOTISH.match(path) or path.startswith("/") and _ROOTISH.match(posixpath.normpath(path)))


def _inside(path: str) -> bool:
    """A relative path that stays under the current folder as far as the text shows."""
    return bool(path) and not path.startswith(("/", "~", "$")) and ".." not in path.split("/") and "$" not in path


def _build_target(path: str) -> bool:
    parts = [p for p in path.split("/") if p not in ("", ".")]
    return _inside(path) and any(p in _BUILD_DIRS or p.endswith(".egg-info") for p in parts)


def _fork_bomb(text: str) -> bool:
    for m in _FUNCTION.finditer(text):
        name, body = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        calls_itself = re.search(rf"(?<![^\s;|&{{(]){re.escape(name)}(?![^\s;|&}})])", body)
        if calls_itself and re.search(r"(?<![|&])[|&](?![|&])", body):  # a single | or &, not || or &&
            return True
    return False


def _size(text: str) -> float:
    """Bytes in a size like 100G, 10MiB or 512k; 0 when unreadable."""
    m = re.match(r"^\+?(\d+(?:\.\d+)?)\s*([kmgtpe]?)(i?b)?$", text.strip(), re.I)
    if not m:
        return 0
    power = "kmgtpe".index(m.group(2).lower()) + 1 if m.group(2) else 0
    return float(m.group(1)) * 1024 ** power


# --- the blocklist --------------------------------------------------------------------------

def _blocked(script: _Script) -> str | None:
    if script.too_deep:
        return "nested too deeply to check"
    if _fork_bomb_found(script):
        return "a fork bomb"
    for cmd in script.cmds:
        reason = _blocked_cmd(cmd)
        if reason:
            return reason
    return None


def _blocked_cmd(cmd: Cmd) -> str | None:
    prog, args = cmd.prog, cmd.args
    opts, pos = _parse(args)
    flags = {o for o, _ in opts}
    if prog == "rm" and "--no-preserve-root" in flags:
        return "deletes the root filesystem"
    recursive = flags & {"-r", "-R", "--recursive"}
    if prog in ("rm", "chmod", "chown", "chgrp") and recursive and any(_rootish(p) for p in pos):
        return f"{prog} on the root, home or a system folder"
    if prog == "mv" and any(_rootish(p) for p in pos[:-1]):
        return "moves the root, home or a system folder"
    if (prog.startswith("mkfs") or prog in ("mkswap", "wipefs")) and any(a.startswith("/dev/") for a in args):
        return "formats a device"
    writes = cmd.writes() + [a[3:] for a in args if prog == "dd" and a.startswith("of=")]
    if prog in ("tee", "shred", "blkdiscard", "wipefs"):
        writes += pos
    if prog in ("cp", "mv", "install", "pv") and pos:
        writes.append(pos[-1])
    if any(_BLOCK_DEVICE.match(w) for w in writes):
        return "writes to a disk device"
    if "/proc/sysrq-trigger" in writes:
        return "triggers a kernel sysrq action"
    if prog in ("shutdown", "reboot", "halt", "poweroff", "killall5") or (
            prog in ("init", "telinit") and pos[:1] in (["0"], ["6"])) or (
            prog in ("systemctl", "loginctl") and {"poweroff", "reboot", "halt", "kexec", "suspend",
                                                     "hibernate", "hybrid-sleep"} & set(args)):
        return "shuts down or reboots the machine"
    if prog == "kill" and len(args) >= 2 and args[-1] == "-1":
        return "signals every process"
    return None


# --- the risk classifier --------------------------------------------------------------------

_NETWORK = {"curl", "wget", "nc", "ncat", "netcat", "socat", "telnet", "ssh", "scp", "sftp", "rsync",
            "ftp", "tftp", "lftp", "mail", "mailx", "sendmail", "mutt", "http", "https", "xh",
            "dig", "nslookup", "host", "drill"}
_ENCODERS = {"base64", "base32", "basenc", "xxd", "uuencode", "hexdump", "od"}
_DISK_TOOLS = {"dd", "fdisk", "sfdisk", "cfdisk", "gdisk", "sgdisk", "parted", "mount", "umount",
               "losetup", "wipefs", "mkswap", "swapon", "swapoff", "hdparm", "blkdiscard", "cryptsetup",
               "e2fsck", "fsck", "tune2fs", "resize2fs", "debugfs", "pvcreate", "vgcreate", "lvcreate",
               "pvremove", "vgremove", "lvremove", "zpool", "badblocks"}
_ACCOUNT_TOOLS = {"setcap", "visudo", "usermod", "useradd", "userdel", "groupadd", "adduser",
                  "passwd", "chpasswd", "gpasswd"}
_CURL_VALUES = "dFTHoXuAebcxwmKErCyYzDUQ"
_CURL_LONG = frozenset({
    "--data", "--data-binary", "--data-raw", "--data-ascii", "--data-urlencode", "--json", "--form",
    "--form-string", "--upload-file", "--header", "--output", "--request", "--user", "--user-agent",
    "--referer", "--cookie", "--cookie-jar", "--proxy", "--write-out", "--max-time", "--url",
    "--connect-timeout", "--config", "--cert", "--key", "--cacert", "--range", "--retry",
    "--resolve", "--limit-rate", "--dump-header", "--output-dir"})
_CURL_SENDS = {"-d", "-F", "-T", "--data", "--data-binary", "--data-raw", "--data-ascii",
               "--data-urlencode", "--json", "--form", "--form-string", "--upload-file"}
_WGET_SENDS = {"--post-data", "--post-file", "--body-data", "--body-file"}


def _risks(script: _Script):
    if _fork_bomb_found(script):
        yield BOMB, "defines a process that multiplies itself"
    if script.background_loop:
        yield BOMB, "starts background work in an unbounded loop"
    progs = {c.prog for c in script.cmds}
    if progs & _ENCODERS and progs & _NETWORK:
        yield EXFILTRATION, "encodes data and uses the network"
    spared, used = _only_written_or_locked(script), Counter(script.words)
    for word in script.words:
        if "/dev/tcp/" in word or "/dev/udp/" in word:
            yield EXFILTRATION, "opens a raw network connection"
        if _SECRETS.search(word) and not 0 < used[word] <= spared[word]:
            yield CREDENTIALS, "touches a credential or secrets file"  # inline interpreter code is a word too
    for cmd in script.cmds:
        yield from _cmd_risks(cmd)
    yield from _families(script)
    yield from _opaque(script)


def _only_written_or_locked(script: _Script) -> Counter:
    """Words that only name a file being created or locked down (`cp .env.example .env`, `chmod 600
    .env`): nothing is read out of it. A word used any other way still counts."""
    spared: Counter = Counter()
    for cmd in script.cmds:
        _, pos = _parse(cmd.args)
        spared.update(cmd.writes())
        if cmd.prog in ("cp", "install", "touch") and pos:
            spared.update(pos[-1:] if cmd.prog != "touch" else pos)
        elif cmd.prog == "chmod" and pos and re.match(r"^0?[0-7]00$|^(go|og|o|g|a)[-=]r?w?x?$", pos[0]):
            spared.update(pos[1:])
    return spared


def _fork_bomb_found(script: _Script) -> bool:
    return any(_fork_bomb(t) for t in script.texts) or any(_FORK_LOOP.search(c) for c in script.code)


def _cmd_risks(cmd: Cmd):
    prog, args = cmd.prog, cmd.args
    if set(cmd.wrappers) & _PRIVILEGED or prog in _PRIVILEGED:
        yield PRIVILEGE, "runs as another user"
    if set(cmd.wrappers) & _NAMESPACED:
        yield PRIVILEGE, "runs in other namespaces, another root or with changed credentials"
    if not prog:
        if any("$" in t or "*" in t for t in cmd.writes()):
            yield DESTRUCTIVE, "truncates files"
        return
    for check in (_exfiltration, _deletion, _disk, _privilege, _system, _bomb):
        found = check(cmd, prog, args)
        if found:
            yield found


def _remote(urls: list[str]) -> bool:
    return not urls or any(not _LOCAL_URL.match(u) for u in urls)


def _exfiltration(cmd: Cmd, prog: str, args: list[str]):
    risk = EXFILTRATION
    if reason := sends_away(prog, args):
        return risk, reason
    if prog == "curl":
        opts, pos = _parse(args, _CURL_VALUES, _CURL_LONG)
        urls = pos + [v for o, v in opts if o == "--url" and v]
        if _remote(urls) and any(o in _CURL_SENDS for o, _ in opts):
            return risk, "curl sends data to a remote host"
        if _remote(urls) and any(_SUB in a or "`" in a for a in args):
            return risk, "curl puts command output into a request"
    elif prog == "wget":
        opts, pos = _parse(args, "OoPUeaiTtwQlADIXRB", frozenset(_WGET_SENDS | {"--method", "--header"}))
        if _remote(pos) and (any(o in _WGET_SENDS for o, _ in opts) or any(_SUB in a for a in args)):
            return risk, "wget sends data to a remote host"
    elif prog in ("http", "https", "xh"):
        _, pos = _parse(args, "abvo")
        urls = [p for p in pos if not p.isupper()][:1]
        items = pos[pos.index(urls[0]) + 1:] if urls else []
        if _remote(urls) and (cmd.fed or any("=" in i or "@" in i for i in items)):
            return risk, "sends data to a remote host"
    elif prog in ("nc", "ncat", "netcat", "telnet"):
        opts, pos = _parse(args, "epcsiwgGIOpqTxX", frozenset({"--exec", "--sh-exec", "--lua-exec"}))
        if any(o in ("-e", "-c", "--exec", "--sh-exec", "--lua-exec") for o, _ in opts):
            return risk, "hands a shell to a network peer"
        if cmd.fed and _remote(pos[:1]):
            return risk, "pipes data to a network peer"
    elif prog == "socat":
        hosts = [m.group(1) for a in args for m in [re.match(r"(?i)^(?:tcp|udp|ssl|openssl|sctp)[46]?"
                                                               r"(?:-connect|-sendto)?:([^:,]+)", a)] if m]
        if hosts and _remote(hosts):
            return risk, "connects data to a remote host"
    elif prog == "ssh" and cmd.fed:
        return risk, "pipes data to a remote host"
    elif prog in ("scp", "rsync"):
        _, pos = _parse(args, "PioFcSlJD" if prog == "scp" else "eBfT", frozenset({
            "--rsh", "--exclude", "--include", "--filter", "--files-from", "--port", "--password-file"}))
        if len(pos) >= 2 and _REMOTE_SPEC.match(pos[-1]) and not all(_REMOTE_SPEC.match(p) for p in pos[:-1]):
            return risk, f"{prog} copies files to a remote host"
    elif prog in ("sftp", "ftp", "tftp", "lftp"):
        if cmd.fed or any(a.startswith(("-b", "-e")) for a in args):
            return risk, "uploads through a file-transfer client"
    elif prog in ("mail", "mailx", "sendmail", "mutt"):
        return risk, "sends mail"
    elif prog == "openssl" and args[:1] == ["s_client"] and cmd.fed:
        return risk, "pipes data to a remote host"
    elif prog in ("dig", "nslookup", "host", "drill", "ping", "ping6", "traceroute", "whois") and any(
            _SUB in a or "`" in a or "$" in a for a in args):
        return risk, "puts command output into a DNS lookup"
    elif prog == "git":
        sub, rest = _git_sub(args)
        if sub == "push" and any(_GIT_URL.search(a) for a in rest):
            return risk, "pushes to a repository named by URL"
        if sub == "send-email":
            return risk, "mails patches"
    return None


def _git_sub(args: list[str]) -> tuple[str, list[str]]:
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in ("-C", "-c") else 1
    return (args[i], args[i + 1:]) if i < len(args) else ("", [])


def _deletion(cmd: Cmd, prog: str, args: list[str]):
    risk = DESTRUCTIVE
    opts, pos = _parse(args)
    flags = {o for o, _ in opts}
    if prog in ("rm", "unlink"):
        if not pos and "xargs" in cmd.wrappers:
            return risk, "deletes whatever xargs is fed"
        if flags & {"-r", "-R", "--recursive"} and any(not _ok_recursive(p, cmd) for p in pos):
            return risk, "deletes a folder and everything in it"
        if "{}" in pos and not cmd.found_build:
            return risk, "deletes what find matches"
        if any(p.startswith(("/", "~", "$HOME", "${HOME}")) and not p.startswith("/tmp/") for p in pos):
            return risk, "deletes files outside the workspace"
    elif prog in ("find", "gfind") and "-delete" in args and not _find_is_build(args) and not _find_is_named(args):
        return risk, "find deletes what it matches"
    elif prog == "git":
        sub, rest = _git_sub(args)
        sub_opts, sub_pos = _parse(rest)
        sub_flags = {o for o, _ in sub_opts}
        if sub == "clean" and sub_flags & {"-f", "--force"} and not sub_flags & {"-n", "--dry-run"}:
            return risk, "git clean deletes untracked files"
        if sub == "reset" and "--hard" in sub_flags:
            return risk, "git reset --hard discards uncommitted work"
        if sub == "push" and (sub_flags & {"-f", "--force", "--force-with-lease", "--mirror"}
                              or any(p.startswith("+") for p in sub_pos)):
            return risk, "force-pushes over remote history"
        if sub in ("checkout", "restore") and not sub_flags & {"--staged", "-S", "-b", "-B"} and (
                "." in sub_pos or ":/" in sub_pos):
            return risk, "discards every uncommitted change"
        if sub == "stash" and sub_pos[:1] == ["clear"]:
            return risk, "drops every stash"
    elif prog == "shred":
        return risk, "overwrites files beyond recovery"
    elif prog == "truncate":
        t_opts, t_pos = _parse(args, "sr", frozenset({"--size", "--reference"}))
        size = next((v for o, v in t_opts if o in ("-s", "--size")), None)
        many = len(t_pos) > 1 or any(ch in p for p in t_pos for ch in "*?[{$")
        if size is not None and _size(size.lstrip("<>/%")) == 0 and many:
            return risk, "truncates many files"
    elif prog in (":", "true") and any("$" in t or "*" in t for t in cmd.writes()):
        return risk, "truncates files"
    return None


def _ok_recursive(path: str, cmd: Cmd) -> bool:
    return _build_target(path) or (path == "{}" and cmd.found_build)


def _find_is_build(args: list[str]) -> bool:
    """find limited to relative roots and build-artefact names (find . -name '*.pyc' -delete)."""
    roots = []
    for a in args:
        if a.startswith(("-", "(", "!")):
            break
        roots.append(a)
    names = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-name", "-iname", "-path")]
    return (all(_inside(r) for r in roots) and bool(names)
            and all(posixpath.basename(n.rstrip("/")) in _BUILD_PATTERNS for n in names))


def _find_is_named(args: list[str]) -> bool:
    """find under relative roots, limited to names with a literal part (find . -name '*.orig' -delete),
    never negated: deleting what matches a name is `rm *.orig`, not emptying the tree."""
    roots = []
    for a in args:
        if a.startswith(("-", "(", "!")):
            break
        roots.append(a)
    names = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-name", "-iname")]
    return (all(_inside(r) for r in roots) and bool(names) and not {"!", "-not", "-o", "-or"} & set(args)
            and all(len(re.sub(r"[*?\[\]]", "", n)) >= 2 for n in names))


def _disk(cmd: Cmd, prog: str, args: list[str]):
    if prog not in _DISK_TOOLS and not prog.startswith(("mkfs", "fsck.")):
        return None
    if prog == "mount" and not args:
        return None  # lists the mounts
    if prog in ("fdisk", "sfdisk", "parted") and args and all(a in ("-l", "--list") for a in args):
        return None
    return DISK, f"{prog} works on disks or filesystems"


_SETUID = Pattern(r"^0?[2-7][0-7]{3}$|^([ugoa]*[+=][rwxXt]*s[rwxXt]*,?)+")


def _privilege(cmd: Cmd, prog: str, args: list[str]):
    risk = PRIVILEGE
    if prog in _ACCOUNT_TOOLS:
        return risk, f"{prog} changes accounts or capabilities"
    if reason := namespace.namespace_tool(prog, args):
        return risk, reason
    _, pos = _parse(args)
    if prog == "chmod" and pos and any(
            re.match(r"^[ugoa]*[+=][rwxXt]*s", part) for part in pos[0].split(",")) or (
            prog == "chmod" and pos and re.match(r"^0?[2-7][0-7]{3}$", pos[0])):
        return risk, "sets a setuid or setgid bit"
    if prog == "install" and any(o in ("-m", "--mode") and v and _SETUID.match(v)
                                 for o, v in _parse(args, "mogtS", frozenset({"--mode", "--owner", "--group"}))[0]):
        return risk, "installs a setuid or setgid program"
    if prog == "chown" and pos and re.match(r"^(root|0)?(:(root|0|wheel|sudo)?)?$", pos[0]) and pos[0] not in ("", ":"):
        return risk, "gives files to root"
    if prog == "chgrp" and pos and pos[0] in ("root", "0", "wheel", "sudo"):
        return risk, "gives files to root's group"
    return None


def _system(cmd: Cmd, prog: str, args: list[str]):
    _, pos = _parse(args)
    targets = cmd.writes()
    if prog == "tee":
        targets += pos
    elif prog in ("cp", "mv", "install", "ln", "rsync") and len(pos) >= 2:
        targets.append(pos[-1])
    elif prog in ("rm", "touch", "chmod", "chown", "chgrp", "truncate", "mkdir") or (prog == "sed" and any(
            a.startswith(("-i", "--in-place")) for a in args)):
        targets += pos
    elif prog == "dd":
        targets += [a[3:] for a in args if a.startswith("of=")]
    if any(_SYSTEM.match(t) for t in targets):
        return CREDENTIALS, "writes to a system folder"
    if prog == "crontab" and not set(args) & {"-l", "-r"}:
        return CREDENTIALS, "installs scheduled jobs"
    return None


def _bomb(cmd: Cmd, prog: str, args: list[str]):
    risk = BOMB
    if prog in ("stress", "stress-ng"):
        return risk, "loads the machine on purpose"
    files = [t for t in cmd.writes() if t != "/dev/null"]
    if prog == "yes" and files:
        return risk, "fills a file without end"
    reads = args + [t for op, t in cmd.redirects if "<" in op]
    endless = any(r.split("if=")[-1] in ("/dev/zero", "/dev/urandom", "/dev/random") for r in reads)
    if endless and prog not in ("head", "dd") and files:
        return risk, "fills a file without end"
    if prog == "dd" and endless and not any(a.startswith("count=") for a in args):
        return risk, "fills a file without end"
    if prog in ("fallocate", "truncate"):
        opts, _ = _parse(args, "losr", frozenset({"--length", "--size"}))
        if any(o in ("-l", "--length", "-s", "--size") and _size(v or "") >= 2 ** 30 for o, v in opts):
            return risk, "allocates a huge file"
    return None


# --- what the text hides: opaque code -------------------------------------------------------
# A command name computed at run time, eval, a shell or interpreter reading code from a pipe, a
# here-string or a substitution, and interpreter one-liners that do more than compute and print.

_RUNNERS = _SHELLS | {"source", "."}
_DOWNLOADERS = {"curl", "wget", "fetch", "aria2c", "http", "https", "xh", "lwp-request", "GET",
                "iwr", "irm", "invoke-webrequest", "invoke-restmethod"}  # PowerShell's, read lowercased
_UNPACKERS = {"tar", "bsdtar", "unzip", "gunzip", "cpio", "7z", "xz", "zstd", "bunzip2"}
_SAVES = Pattern(r"^(?:-[a-zA-Z]*[oO]|--output(?:-document)?|--remote-name)(?:=|$)|^-[oO].")  # -so, -fsSLo
_EVALUATORS = {"eval", "iex", "invoke-expression"}  # PowerShell's names are case-insensitive


def _opaque(script: _Script):
    for cmd in script.cmds:
        name = cmd.argv[0] if cmd.argv else ""
        unread = cmd.fed and cmd.stdin_text is None  # its input is a pipe or a file, not text read here
        if cmd.script_code and not _harmless_code(*cmd.script_code):
            yield OPAQUE, "runs a script written by the same command that does more than compute and print"
        if name and ("$" in name or _SUB in name or "`" in name):
            yield OPAQUE, "the command's name is computed when it runs"
        prog, args = cmd.prog, cmd.args
        if prog.lower() in _EVALUATORS:
            yield OPAQUE, f"{prog} runs text built at run time"
        elif prog == "alias" and any("=" in a for a in args):
            yield OPAQUE, "alias gives a command another meaning"
        elif prog in _RUNNERS:
            body = _shell_script(args) if prog in _SHELLS else None
            files = [a for a in args if not a.startswith(("-", "+"))]
            if body is not None and ("$" in body or _SUB in body or "`" in body or (
                    set(cmd.wrappers) & {"xargs", "find", "parallel"} and "{}" in body)):
                yield OPAQUE, "a shell runs a script built at run time"
            elif body is None and (any(_SUB in a for a in files) or unread and (
                    _reads_stdin(args) if prog in _SHELLS else not files or files[0] in _STDIN_FILES)):
                yield OPAQUE, "a shell runs code from a pipe, a file or a substitution"
        elif _INTERPRETERS.match(prog) or prog in ("awk", "gawk", "mawk", "nawk", "busybox", "expect",
                                                   "tclsh", "osascript", "deno", "bun", "pwsh", "powershell"):
            opts, pos = _parse(args, "ceEmWXrfpI" if prog not in ("awk", "gawk", "mawk", "nawk") else "fvF",
                               frozenset({"--eval", "--print", "--command"}))
            code = [v for o, v in opts if o in _CODE_OPTIONS.get(_family_of(prog), ("-c", "-e")) and v]
            if prog in ("deno", "bun") and pos[:1] in (["eval"], ["-e"]):
                code = pos[1:2] or [""]
            if prog in ("deno", "bun") and pos[:2] == ["run", "-"]:  # reads its module from its input
                code, pos = ([cmd.stdin_text], pos) if cmd.stdin_text is not None else (code, ["-"])
            if not code and _INTERPRETERS.match(prog) and (body := _stdin_code(cmd, cmd.stdin_text)) is not None:
                code = [body]
            # input text is read as code only for the languages read above; to the others it stays unread
            unread = unread if _INTERPRETERS.match(prog) or prog in ("deno", "bun") else cmd.fed
            if prog in ("awk", "gawk", "mawk", "nawk"):
                code = pos[:1] if not any(o == "-f" for o, _ in opts) else []
                if code and not re.search(r"\bsystem\s*\(|\|\s*getline|print[^;}]*\|\s*\"|>\s*\"", code[0]):
                    continue
            if code and not all(_harmless_code(prog, c) for c in code):
                yield OPAQUE, f"{prog} runs inline code that does more than compute and print"
            elif not code and (
                    (unread and not pos) or any(p in ("-", "/dev/stdin") and unread or _SUB in p for p in pos[:1])):
                yield OPAQUE, f"{prog} runs code from a pipe, a here-string or a substitution"
            elif any(v in ("http.server", "SimpleHTTPServer", "pyftpdlib", "uploadserver")
                     for o, v in opts if o == "-m") and not re.search(r"(?:-b|--bind)[= ](127\.|localhost|::1)",
                                                                       " ".join(args)):
                yield EXFILTRATION, "serves the workspace's files to the network"


_CODE_OPTIONS = {"python": ("-c",), "node": ("-e", "-p", "--eval", "--print"), "perl": ("-e", "-E"),
                 "ruby": ("-e",), "php": ("-r",), "pwsh": ("-c", "--command", "-Command")}


def _family_of(prog: str) -> str:
    for family in ("python", "pypy", "node", "perl", "ruby", "php", "pwsh", "powershell"):
        if prog.startswith(family):
            return {"pypy": "python", "powershell": "pwsh"}.get(family, family)
    return prog


_PY_SAFE_MODULES = {"sys", "json", "math", "platform", "datetime", "time", "re", "string", "random", "statistics",
                    "itertools", "functools", "collections", "decimal", "fractions", "textwrap", "uuid", "hashlib",
                    "calendar", "pprint", "unicodedata", "keyword", "operator", "base64", "binascii", "zlib",
                    "struct", "secrets", "sysconfig", "locale", "enum", "dataclasses", "typing", "copy", "heapq",
                    "bisect", "array", "difflib", "html", "colorsys", "ipaddress", "shlex", "this"}
_PY_SAFE_NAMES = {"print", "len", "range", "str", "int", "float", "sum", "min", "max", "sorted", "list", "dict", "set",
                  "tuple", "enumerate", "zip", "abs", "round", "repr", "format", "bool", "isinstance", "hex", "oct",
                  "bin", "ord", "chr", "any", "all", "map", "filter", "reversed", "divmod", "pow", "hash", "type",
                  "bytes", "bytearray", "frozenset", "iter", "next", "slice", "complex", "ascii", "callable",
                  "True", "False", "None", "Exception", "ValueError", "KeyError", "TypeError", "SystemExit",
                  "StopIteration", "NotImplemented", "Ellipsis", "id"}
_PY_VERSION_ATTRS = {"__version__", "version", "__file__", "VERSION", "version_info", "__name__"}
_PY_BAD_ATTRS = {"modules", "exec_module", "load_module", "import_module", "settrace",
                 "setprofile", "_getframe", "call_tracing", "addaudithook", "breakpointhook", "setrecursionlimit",
                 "exit"}


def _harmless_code(prog: str, code: str) -> bool:
    """Inline code we can read all of and that only computes and prints (python -c "print(1+1)")."""
    if prog.startswith(("python", "pypy")):
        return _harmless_python(code)
    if prog in ("node", "nodejs", "deno", "bun"):
        if any(_SECRETS.search(m.group()) for m in _JS_PLAIN_REQUIRE.finditer(code)):
            return False
        return _harmless_words(_JS_PLAIN_REQUIRE.sub("JSON", code), _JS_SAFE, r"//.*|/\*.*?\*/")
    if prog == "perl":
        # s/// and tr/// without the e flag are text, not code: perl -pi -e 's/a/b/g' file
        code = re.sub(r"\b(?:s|tr|y)([/|#!,{])(?:\\.|(?!\1).)*\1(?:\\.|(?!\1).)*\1([a-df-z]*)(?![e\w])", " ", code)
        code = re.sub(r"\bm?/(?:\\.|[^/\\])*/[a-z]*", " ", code)
        return _harmless_words(code, _PERL_SAFE, r"#.*")
    if prog == "ruby":
        return _harmless_words(code, _RUBY_SAFE, r"#.*")
    return _harmless_words(code, {"print", "echo", "puts", "PHP_VERSION", "phpversion", "cat"}, r"#.*")


def _harmless_python(code: str) -> bool:
    import ast
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError):
        return False
    defined = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    defined |= {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    defined |= {a.arg for n in ast.walk(tree) if isinstance(n, ast.arguments) for a in n.args}
    versioned: set[str] = set()
    if _reads_only_plain_files(tree):
        defined.add("open")
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            module = (node.module or "") if isinstance(node, ast.ImportFrom) else ""
            for alias in node.names:
                top = (module or alias.name).split(".")[0]
                bound = alias.asname or alias.name.split(".")[0]
                if top in _PY_SAFE_MODULES:
                    defined.add(bound)
                elif isinstance(node, ast.Import):
                    versioned.add(bound)  # only its version may be read
                else:
                    return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if node.attr.startswith("_") and node.attr not in _PY_VERSION_ATTRS or node.attr in _PY_BAD_ATTRS:
                return False
            if isinstance(node.value, ast.Name) and node.value.id in versioned and node.attr not in _PY_VERSION_ATTRS:
                return False
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id not in _PY_SAFE_NAMES and node.id not in defined and node.id not in versioned:
                return False
        elif isinstance(node, (ast.Global, ast.Nonlocal, ast.Await, ast.AsyncFunctionDef)):
            return False
    return True


def _reads_only_plain_files(tree) -> bool:
    """Every open() names a literal path, not a credential file, and opens it for reading: a one-liner
    that reads the project's JSON or TOML is as harmless as `cat`."""
    import ast
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
             and n.func.id == "open"]
    for call in calls:
        path = call.args[0] if call.args else None
        modes = call.args[1:2] + [k.value for k in call.keywords if k.arg == "mode"]
        if not (isinstance(path, ast.Constant) and isinstance(path.value, str)) or _SECRETS.search(path.value):
            return False
        if any(not (isinstance(m, ast.Constant) and isinstance(m.value, str) and set(m.value) <= set("rbt"))
               for m in modes) or len(call.args) > 2 or any(k.arg not in ("mode", "encoding") for k in call.keywords):
            return False
    return bool(calls)


# require() of the project's own files and of read-only core modules: node -e "require('./package.json')"
_JS_PLAIN_REQUIRE = Pattern(r"""\brequire\s*\(\s*(['"])(?:\./(?![\w./-]*\.\.)[\w./-]+|"""
                               r"""(?:node:)?(?:os|path|util|url|assert|semver))\1\s*\)""")
_JS_SAFE = {"console", "log", "error", "info", "warn", "process", "version", "versions", "platform", "arch",
            "argv", "JSON", "stringify", "parse", "Math", "max", "min", "floor", "ceil", "round", "random", "abs",
            "Date", "now", "toISOString", "String", "Number", "parseInt", "parseFloat", "Array", "from", "map",
            "filter", "reduce", "join", "split", "length", "let", "const", "var", "new", "return", "for", "of",
            "in", "if", "else", "true", "false", "null", "undefined", "typeof", "keys", "values", "entries",
            "Object", "toString", "toFixed", "push", "slice", "sort", "trim", "replace", "toUpperCase",
            "toLowerCase", "includes", "startsWith", "endsWith", "node", "v8", "uptime", "memoryUsage", "BigInt"}
_PERL_SAFE = {"print", "say", "printf", "join", "split", "map", "grep", "sort", "length", "uc", "lc", "chomp",
              "reverse", "sprintf", "if", "unless", "for", "foreach", "my", "while", "ARGV", "_", "STDIN", "n", "q",
              "qq", "qw", "and", "or", "not", "eq", "ne", "lt", "gt", "le", "ge", "x", "int", "abs", "sqrt", "ucfirst",
              "lcfirst", "next", "last", "V", "scalar", "keys", "values", "exists", "defined", "chop", "F", "NR"}
_RUBY_SAFE = {"puts", "print", "p", "pp", "RUBY_VERSION", "RUBY_PLATFORM", "VERSION", "each", "map", "select",
              "to_s", "to_i", "to_f", "to_a", "sum", "size", "length", "upcase", "downcase", "reverse", "join",
              "split", "sort", "times", "do", "end", "if", "else", "elsif", "unless", "gets", "chomp", "STDIN",
              "read", "lines", "ARGV", "first", "last", "inspect", "strip", "true", "false", "nil", "Time", "now",
              "Integer", "Float", "String", "format", "round", "max", "min", "uniq", "count", "with_index"}


def _harmless_words(code: str, safe: set[str], comments: str) -> bool:
    code = re.sub(comments, " ", code)
    text = re.sub(r"'(?:\\.|[^'\\])*'|\"(?:\\.|[^\"\\$`])*\"", " ", code)  # strings without interpolation
    if re.search(r"[`]|\$\(|\$\{|#\{|\beval\b|\brequire\b|\bimport\b|\buse\b|\bopen\b", text):
        return False
    declared = set(re.findall(r"\b(?:let|const|var|my|function|def)\s+\$?([A-Za-z_]\w*)", text))
    declared |= set(re.findall(r"\b([A-Za-z_]\w*)\s*=(?!=)", text))
    for params in re.findall(r"\(([\w\s,]*)\)\s*=>|\b(\w+)\s*=>", text):
        declared |= set(re.findall(r"\w+", " ".join(params)))
    for word in re.findall(r"[A-Za-z_]\w*", text):
        if word not in safe and word not in declared:
            return False
    return True


# --- families: fetched code, persistence, infrastructure, package sources, git, processes --------

_PKG = {"pip", "pip3", "uv", "pipx", "poetry", "pdm", "npm", "pnpm", "yarn", "bun", "cargo", "go", "gem", "bundle",
        "composer", "apt", "apt-get", "dnf", "yum", "apk", "brew", "conda", "mamba", "mvn", "gradle", "dotnet",
        "nuget", "npx", "pnpx", "bunx", "uvx", "dx", "deno", "rustup", "nix", "nix-env", "snap", "flatpak", "helm"}
_NET_PROGS = (_NETWORK | _DOWNLOADERS | _PKG | {"ping", "traceroute", "gh", "hub", "glab", "aws", "gcloud", "gsutil",
              "az", "kubectl", "terraform", "tofu", "pulumi", "doctl", "oci", "rclone", "docker", "podman", "twine",
              "aria2c", "git-lfs", "ngrok", "s3cmd", "heroku", "vercel", "netlify", "fly", "flyctl", "wrangler",
              "azcopy", "restic", "borg", "duplicity", "croc", "wormhole", "magic-wormhole", "ffsend", "smbclient",
              "ncftpput", "b2"})
_GIT_NET = {"push", "pull", "fetch", "clone", "ls-remote", "submodule", "remote", "lfs"}
_URL = Pattern(r"(?i)\b(?:https?|ftp|wss?|git|ssh|s3|gs)://")
_STARTUP = Pattern(
    r"(?:^|/)(?:\.bashrc|\.bash_profile|\.bash_login|\.bash_logout|\.profile|\.zshrc|\.zprofile|\.zshenv|\.zlogin|"
    r"\.kshrc|\.cshrc|\.tcshrc|\.inputrc|\.xinitrc|\.xprofile|\.pam_environment|\.gitconfig|\.npmrc|\.pypirc|"
    r"\.curlrc|\.wgetrc|\.vimrc|\.exrc|\.config/fish/|\.config/autostart/|\.config/systemd/|\.config/git/|"
    r"\.local/share/systemd/|Library/LaunchAgents/|\.ssh/authorized_keys|\.ssh/config|\.ssh/rc|\.git/hooks/|"
    r"\.git/config|\.husky/|/etc/profile|/etc/bash\.bashrc|/etc/cron|/etc/systemd/|/etc/init\.d/|/etc/rc\.local)")
_HOMEISH = Pattern(r"^(~|\$\{?HOME\}?|/home/|/root(/|$)|/Users/)")
_GIT_EXEC_KEYS = Pattern(
    r"(?i)^(core\.(fsmonitor|hookspath|sshcommand|pager|editor|askpass|gitproxy|attributesfile|excludesfile)|"
    r"alias\..*|filter\..*|diff\..*\.(textconv|command)|merge\..*\.driver|credential\..*|include\.path|"
    r"includeif\..*|url\..*|http\..*proxy|sequence\.editor|gpg\.program|uploadpack\..*|receive\..*|"
    r"remote\..*\.(url|pushurl|uploadpack|receivepack)|protocol\..*|init\.templatedir|sendemail\..*)$")
_CLOUD = {"aws", "gcloud", "az", "gsutil", "doctl", "oci", "rclone", "s3cmd", "heroku", "vercel", "netlify",
          "fly", "flyctl", "wrangler", "pulumi"}
_CLOUD_MUTATE = Pattern(r"(?i)^(delete|remove|rm|rb|destroy|terminate|purge|drop|detach|revoke|deregister|"
                           r"disable|stop|reset|wipe|nuke|cleanup|prune|dedupe|uninstall|undeploy|down|sync|mv|"
                           r"move|put|update|create|modify|set|attach|run|deploy|up|apply|import|restore|rsync|"
                           r"invoke|start|reboot|scale|replace|copy|cp|upload|publish|release|promote)(?:[-_].*)?$")
_CLOUD_SECRETS = Pattern(r"(?i)(print-access-token|print-identity-token|get-access-token|get-secret-value|"
                            r"get-session-token|export-credentials|get-login-password|get-authorization-token|"
                            r"access-secret|secret show|secrets versions access|get-parameters?$|configure get|"
                            r"configure export|keys list|credentials|auth token)")
_CLOUD_VALUES = frozenset({"--exclude", "--include", "--profile", "--region", "--acl", "--storage-class", "--sse",
                           "--sse-kms-key-id", "--content-type", "--cache-control", "--metadata", "--endpoint-url",
                           "--output", "--query", "--project", "--grants", "--expires", "--page-size", "--zone",
                           "--format", "--filter", "--config", "--transfers", "--checkers", "--bwlimit",
                           "--account-name", "--container-name", "--resource-group", "--name"})
_BUCKET = Pattern(r"(?i)^(s3|gs|az|r2|b2|[\w-]+):")  # s3://bucket, gs://bucket, an rclone remote
_KUBE_MUTATE = {"delete", "drain", "cordon", "uncordon", "taint", "scale", "apply", "replace", "patch", "edit",
                "create", "set", "rollout", "label", "annotate", "exec", "cp", "run", "expose", "autoscale",
                "debug", "certificate"}
_PUBLISH = {("npm", "publish"), ("pnpm", "publish"), ("yarn", "publish"), ("cargo", "publish"), ("gem", "push"),
            ("twine", "upload"), ("poetry", "publish"), ("uv", "publish"), ("docker", "push"), ("podman", "push"),
            ("gh", "gist"), ("gh", "release"), ("dotnet", "nuget"), ("nuget", "push"), ("flit", "publish"),
            ("hatch", "publish"), ("vsce", "publish"), ("gh", "repo")}


def _wants_network(script: _Script) -> bool:
    for cmd in script.cmds:
        prog, args = cmd.prog, cmd.args
        if prog == "git":
            if _git_sub(args)[0] in _GIT_NET:
                return True
        elif prog in ("docker", "podman"):
            if set(args) & {"pull", "push", "login", "build", "run", "search", "buildx", "compose"}:
                return True
        elif prog in _NET_PROGS and not (prog in _PKG and set(args) & {"--offline", "--no-index", "list", "show",
                                                                        "freeze", "--version", "-V", "test", "run"}):
            return True
        elif fetched_code(prog, args):
            return True
    return any(_URL.search(w) for w in script.words) or any("/dev/tcp/" in w or "/dev/udp/" in w
                                                           for w in script.words)


def _families(script: _Script):
    progs = {c.prog for c in script.cmds}
    fetches = bool({p.lower() for p in progs} & _DOWNLOADERS) or any(
        c.prog == "git" and _git_sub(c.args)[0] in ("clone", "pull", "fetch") for c in script.cmds)
    for cmd in script.cmds:
        if fetches and cmd.prog.lower() in _RUNNERS | _EVALUATORS | {"python", "python3", "perl", "ruby", "node",
                                                                      "php", "sudo"} and (
                cmd.fed or any(_SUB in a for a in cmd.args)):
            yield REMOTE_CODE, "downloads code and runs it"
    runs_a_file = any(c.prog in ("chmod", "bash", "sh", "source", ".", "python", "python3")
                      or c.argv[:1] and "/" in c.argv[0] for c in script.cmds)
    saves = any(c.prog in _DOWNLOADERS and any(_SAVES.match(a) for a in c.args) or c.prog == "wget"
                or c.prog in _UNPACKERS and c.fed for c in script.cmds)
    if fetches and runs_a_file and saves:
        yield REMOTE_CODE, "downloads a file and runs it"
    for cmd in script.cmds:
        if reason := fetched_code(cmd.prog, cmd.args):
            yield REMOTE_CODE, reason
    installed = [i for i, c in enumerate(script.cmds) if installs_remote_program(c.prog, c.args)]
    if installed and any(c.prog not in _ONLY_LOOKS for c in script.cmds[installed[0] + 1:]):
        yield REMOTE_CODE, "installs a program from a repository and runs it"
    if progs & {"env", "printenv", "set", "export", "declare"} and progs & (_NETWORK | _DOWNLOADERS) and any(
            c.prog in ("env", "printenv", "set", "export", "declare") and not c.args and c.fed is False
            for c in script.cmds):
        yield EXFILTRATION, "sends the environment over the network"
    if any(_ENDLESS.search(t) for t in script.texts) and progs & (_NETWORK | _DOWNLOADERS):
        yield PERSISTENCE, "calls the network in an endless loop (a beacon)"
    for cmd in script.cmds:
        if "find" in cmd.wrappers and cmd.prog in _MUTATORS and any(
                _HOMEISH.match(r) or _rootish(r) or r.startswith("/") and not r.startswith("/tmp/")
                for r in cmd.find_roots):
            yield DESTRUCTIVE, "find changes files across the home or system folders"
    remotes_added = any(c.prog == "git" and _git_sub(c.args)[0] == "remote" and set(_git_sub(c.args)[1][:1])
                        & {"add", "set-url"} for c in script.cmds)
    for cmd in script.cmds:
        yield from _family_cmd(cmd, cmd.prog, cmd.args, remotes_added)


_ONLY_LOOKS = {"echo", "printf", "true", ":", "cd", "which", "type", "command", "hash", "ls", ""}
_ENDLESS = Pattern(r"\bwhile\s+(?:true|:|\[\s*1\s*\]|\(\(\s*1\s*\)\))\s*;?\s*do\b|\bfor\s*\(\(\s*;\s*;\s*\)\)")
_MUTATORS = {"sed", "rm", "chmod", "chown", "mv", "cp", "tee", "truncate", "shred", "ln", "perl", "unlink"}


def _family_cmd(cmd: Cmd, prog: str, args: list[str], remotes_added: bool):
    opts, pos = _parse(args)
    flags = {o for o, _ in opts}
    targets = cmd.writes()
    if prog in ("tee", "touch", "truncate", "mkdir") or (
            prog == "sed" and any(a.startswith(("-i", "--in-place")) for a in args)):
        targets += pos
    elif prog in ("cp", "mv", "rsync", "ln", "install", "scp") and len(pos) >= 2:
        targets.append(pos[-1])
    elif prog == "dd":
        targets += [a[3:] for a in args if a.startswith("of=")]
    for t in targets:
        if t in ("/dev/null", "/dev/stdout", "/dev/stderr") or t.startswith("/dev/fd/"):
            continue
        if _STARTUP.search(t):
            yield PERSISTENCE, "writes a shell startup file, git hook or config, or a scheduled job"
        elif prog == "mkdir" and t not in cmd.writes():
            continue  # a new folder overwrites nothing: mkdir -p ~/.cache/tool
        elif _HOMEISH.match(t) or ".." in t.split("/") or (t.startswith("/") and not t.startswith("/tmp/")):
            yield DESTRUCTIVE, "writes outside the workspace"
    if prog == "mv" and any(_HOMEISH.match(p) or p.startswith("/") and not p.startswith("/tmp/")
                            or ".." in p.split("/") for p in pos[:-1]):
        yield DESTRUCTIVE, "moves files from outside the workspace"
    if prog == "mv" and pos[-1:] == ["/dev/null"]:
        yield DESTRUCTIVE, "moves files into /dev/null"
    if prog in ("rm", "unlink", "rmdir", "shred") and any(".." in p.split("/") or p.startswith("$") for p in pos):
        yield DESTRUCTIVE, "deletes files outside the workspace or named by a variable"
    if prog == "rsync" and any(o.startswith(("--delete", "--remove-source-files")) or o == "--del" for o in flags):
        yield DESTRUCTIVE, "rsync deletes files at the destination"
    if deletes_at_destination(prog, args):
        yield DESTRUCTIVE, "sync deletes files at the destination"
    if prog in ("chmod", "chown", "chgrp") and any(
            _STARTUP.search(p) or _SECRETS.search(p) and not _inside(p) or _rootish(p) for p in pos[1:]):
        yield PRIVILEGE, "changes permissions of startup, credential or home files"
    if prog in ("grep", "egrep", "rg", "ag", "ack", "git-grep") and pos and _SECRET_WORD.search(pos[0]) and any(
            _HOMEISH.match(p) or _rootish(p) or p.startswith("/") for p in pos[1:]):
        yield CREDENTIALS, "searches the home or system folders for secrets"
    if prog in ("chmod", "chown", "chgrp") and flags & {"-R", "--recursive"}:
        mode = pos[0] if pos else ""
        if prog != "chmod" or re.match(r"^0?[0-7]?[0-7][0-7][2367]$|.*[ao][+=][rwx]*w", mode) or any(
                not _inside(p) for p in pos[1:]):
            yield PRIVILEGE, "changes permissions or owners of a whole tree"
    if prog == "chmod" and pos and re.match(r"^0?[0-7]?[0-7][0-7][2367]$|^(a|o|ugo)?\+[rwx]*w", pos[0]) and any(
            not _inside(p) for p in pos[1:]):
        yield PRIVILEGE, "makes files outside the workspace writable by everyone"
    if prog == "crontab" and flags & {"-r", "-ir", "-ri"} | {"-r"} and any("r" in o for o in flags):
        yield DESTRUCTIVE, "removes every scheduled job"
    if prog in ("at", "batch", "launchctl", "schtasks") or (
            prog == "systemctl" and set(args) & {"enable", "link", "edit", "set-property", "preset", "mask",
                                                 "disable", "stop", "kill", "isolate", "daemon-reload"}):
        yield PERSISTENCE, "changes services or scheduled jobs"
    if prog in ("pkill", "killall", "skill", "slay") and (
            flags & {"-u", "-U", "-G", "-g", "-s", "-P", "--uid", "--euid", "--user", "--group", "--session"}
            or any(p in (".", ".*", "-1", "1") for p in pos) or not pos):
        yield DESTRUCTIVE, "kills processes by user, group or everything"
    if prog in ("pkill", "killall") and any(_HOST_PROCESS.match(p) for p in pos):
        yield DESTRUCTIVE, "kills by name programs the session and the desktop run in"
    if prog == "kill" and any(p in ("1", "0") for p in pos):
        yield DESTRUCTIVE, "kills init or the whole process group"
    if prog in ("iptables", "ip6tables", "nft", "ufw", "firewall-cmd", "sysctl", "modprobe", "insmod", "rmmod",
                "setenforce", "chattr", "swapoff", "hostnamectl", "timedatectl", "update-alternatives",
                "dpkg-reconfigure", "aa-disable", "auditctl") and not (prog == "sysctl" and not flags & {"-w", "-p"}):
        yield PRIVILEGE, "changes system settings"
    yield from _git_family(prog, args, remotes_added)
    yield from _infra_family(cmd, prog, args)
    yield from _package_family(prog, args)
    if any(p == (prog, (pos or [""])[0]) for p in _PUBLISH) or (prog == "gh" and pos[:2] in (
            ["gist", "create"], ["repo", "create"], ["release", "upload"], ["release", "create"], ["secret", "set"])):
        yield EXFILTRATION, "publishes or uploads to a public service"
    if prog in ("gh", "hub", "glab") and (pos[:2] == ["auth", "token"] or pos[:2] == ["auth", "status"] and
                                          "--show-token" in args or pos[:1] == ["api"] and any("secrets" in p for p in pos)):
        yield CREDENTIALS, "prints an access token"
    if prog in ("security", "secret-tool", "keyctl", "op", "pass", "gopass", "vault", "bw", "lpass", "keepassxc-cli") \
            and pos[:1] not in (["--version"], ["version"], ["help"]):
        yield CREDENTIALS, "reads a password store or keychain"
    if prog in ("printenv", "echo", "printf") and any(
            _SECRET_VAR.search(v) for a in args for v in (
                [a] if prog == "printenv" else re.findall(r"\$\{?([A-Za-z_]\w*)", a))):
        yield CREDENTIALS, "prints a secret from the environment"
    if prog in ("gpg", "gpg2") and flags & {"--export-secret-keys", "--export-secret-subkeys"}:
        yield CREDENTIALS, "exports private keys"
    keyfile = [n for a, n in zip(args, args[1:]) if a == "-f"] + [a[2:] for a in args if a.startswith("-f") and a[2:]]
    new_key_inside = bool(keyfile) and all(_inside(k) for k in keyfile)  # a deploy key for the project
    if prog == "ssh-keygen" and not flags & {"-l", "-L", "-F", "-Y", "-B"} and not new_key_inside or (
            prog == "ssh-add" and not flags & {"-l", "-L"}):
        yield CREDENTIALS, "creates or loads SSH keys"
    if prog in ("socat",) and any(re.match(r"(?i)^(exec|system):", a) for a in args):
        yield EXFILTRATION, "hands a shell to a network peer"
    if prog in ("nc", "ncat", "netcat", "socat") and (flags & {"-l", "-lp", "-lvp", "-lnvp", "--listen"} or any(
            a.lower().startswith(("tcp-listen", "tcp4-listen", "udp-listen")) for a in args)):
        yield EXFILTRATION, "opens a listening socket"
    if prog in ("history",) and flags & {"-c", "-w", "-d"} or prog == "unset" and "HISTFILE" in args:
        yield DESTRUCTIVE, "erases the shell history"


_HOST_PROCESS = Pattern(r"(?i)^-?(?:python[\d.]*|node|nodejs|bash|sh|zsh|fish|ssh|sshd|systemd|init|"
                           r"x(?:org|wayland)|gnome-shell|plasmashell|kwin\w*|finder|dock|explorer|"
                           r"docker|dockerd|containerd|tmux|screen|code|orchestrator|java|ruby|perl)$")
_SECRET_WORD = Pattern(r"(?i)passw|secret|token|api.?key|credential|private.?key|BEGIN .*PRIVATE")
# names under which the environment carries secrets: AWS_SECRET_ACCESS_KEY, GITHUB_TOKEN, DB_PASSWORD
_SECRET_VAR = Pattern(r"(?i)(?:SECRET|TOKEN|PASSW(?:OR)?D|PASSPHRASE|API_?KEY|PRIVATE_?KEY|ACCESS_?KEY|"
                         r"CREDENTIAL|AUTH|COOKIE)")


def _git_family(prog: str, args: list[str], remotes_added: bool):
    if prog != "git":
        return
    sub, rest = _git_sub(args)
    opts, pos = _parse(rest)
    flags = {o for o, _ in opts}
    if any(a == "-c" and i + 1 < len(args) and _GIT_EXEC_KEYS.match(args[i + 1].split("=")[0])
           for i, a in enumerate(args[:args.index(sub)] if sub in args else args)):
        yield PERSISTENCE, "git -c sets a key that runs a program"
    if sub == "push":
        if flags & {"-d", "--delete", "--prune", "--mirror", "--all"} or any(p.startswith(":") and len(p) > 1
                                                                            for p in pos):
            yield DESTRUCTIVE, "deletes or overwrites branches on the remote"
        if remotes_added:
            yield EXFILTRATION, "pushes to a remote added by the same command"
    elif sub == "remote" and pos[:1] in (["add"], ["set-url"]) and any(_GIT_URL.search(p) for p in pos):
        yield EXFILTRATION, "points the repository at a new remote"
    elif sub == "branch" and ("-D" in flags or flags & {"-d", "--delete"} and flags & {"-f", "--force"}):
        yield DESTRUCTIVE, "force-deletes a branch"
    elif sub in ("filter-branch", "filter-repo") or sub == "reflog" and pos[:1] == ["expire"] or (
            sub == "gc" and any(o.startswith("--prune") for o in flags)) or (
            sub == "update-ref" and "-d" in flags):
        yield DESTRUCTIVE, "rewrites or drops history"
    elif sub == "config":
        keys = [p for p in pos if "." in p][:1]
        if keys and _GIT_EXEC_KEYS.match(keys[0]) and len(pos) >= 2:
            yield PERSISTENCE, "sets a git key that runs a program (hooks, fsmonitor, pager, aliases)"


def _infra_family(cmd: Cmd, prog: str, args: list[str]):
    opts, pos = _parse(args)
    flags = {o for o, _ in opts}
    if prog in ("docker", "podman", "nerdctl"):
        sub = pos[:2]
        if sub[:1] in (["run"], ["create"], ["exec"]) or sub == ["container", "run"]:
            docker_opts = _parse(args, "vpeuwhlm", frozenset({"--volume", "--mount", "--pid", "--net", "--network",
                                                              "--cap-add", "--device", "--userns", "--security-opt",
                                                              "--ipc", "--uts", "--cgroupns"}))[0]
            mounts = [v for o, v in docker_opts if o in ("-v", "--volume", "--mount") and v]
            if flags & {"--privileged"} or any(o in ("--pid", "--net", "--network", "--ipc", "--userns", "--uts",
                                                     "--cgroupns") for o in flags) and any(
                    a.endswith("=host") or a == "host" for a in args) or flags & {"--cap-add", "--device"}:
                yield PRIVILEGE, "starts a privileged container or shares the host's namespaces"
            if any(re.match(r"(?i)^(seccomp|apparmor|systempaths)[=:]unconfined$|^label[=:]disable$", v or "")
                   for o, v in docker_opts if o == "--security-opt"):
                yield PRIVILEGE, "starts a container with its security profile switched off"
            if any(re.match(r"^(/|~|\$HOME|/var/run/docker\.sock)", _mount_source(m)) and not
                   re.match(r"^(\$\{?PWD\}?|\.)", _mount_source(m)) for m in mounts):
                yield PRIVILEGE, "mounts host folders into a container"
        if sub[:1] in (["rm"], ["rmi"], ["kill"]) and (flags & {"-f", "--force"} or any(_SUB in a for a in args)) or \
                pos[:2] in (["system", "prune"], ["volume", "rm"], ["volume", "prune"], ["image", "prune"],
                            ["container", "prune"], ["network", "prune"], ["builder", "prune"]) or \
                pos[:1] == ["compose"] and "down" in pos and flags & {"-v", "--volumes", "--rmi"}:
            yield INFRASTRUCTURE, "removes containers, images or volumes"
        if sub[:1] == ["login"]:
            yield CREDENTIALS, "logs in to a registry"
    elif prog in ("kubectl", "oc", "k9s", "kubeadm"):
        if pos[:1] and pos[0] in _KUBE_MUTATE and pos[:2] not in (["rollout", "status"], ["rollout", "history"]) \
                or prog == "kubeadm":
            yield INFRASTRUCTURE, "changes a Kubernetes cluster"
        if pos[:2] in (["get", "secret"], ["get", "secrets"], ["describe", "secret"]) or "secret" in pos[:3] and \
                flags & {"-o", "--output"} or pos[:2] == ["config", "view"] and "--raw" in flags:
            yield CREDENTIALS, "reads cluster secrets"
    elif prog in ("helm",) and pos[:1] and pos[0] in ("uninstall", "delete", "upgrade", "install", "rollback"):
        yield INFRASTRUCTURE, "changes a Kubernetes release"
    elif prog in ("terraform", "tofu", "terragrunt", "pulumi", "cdk", "serverless", "sls") and pos[:1] and pos[0] in (
            "destroy", "apply", "import", "taint", "untaint", "force-unlock", "state", "up", "deploy", "remove",
            "refresh", "run-all", "cancel", "stack"):
        if not (pos[0] == "state" and pos[1:2] in (["list"], ["show"], ["pull"])):
            yield INFRASTRUCTURE, "changes or destroys cloud infrastructure"
    elif prog in _CLOUD:
        joined = " ".join(pos)
        if _CLOUD_SECRETS.search(joined):
            yield CREDENTIALS, "reads cloud credentials or secrets"
        verbs = [p for p in pos[:4] if _CLOUD_MUTATE.match(p)]
        if verbs:
            verb = verbs[0].lower()
            # the operands after the verb, option values left out: a local one before a bucket uploads
            ops = _parse(args, "gn", _CLOUD_VALUES)[1]
            ops = ops[ops.index(verbs[0]) + 1:] if verbs[0] in ops else ops
            buckets = [bool(_BUCKET.match(o)) for o in ops]
            uploads = any(not b and any(buckets[k + 1:]) for k, b in enumerate(buckets))
            downloads = verb in ("sync", "rsync") and not uploads and not all(buckets)
            if verb in ("cp", "copy", "sync", "rsync", "mv", "move", "upload") and uploads:
                yield EXFILTRATION, "copies files to cloud storage"
            if downloads and flags & {"--delete", "-d", "--delete-unmatched-destination-objects"}:
                yield DESTRUCTIVE, "sync deletes files at the destination"
            if verb not in ("cp", "copy", "upload") and not downloads or flags & {"--recursive", "-r"} and "rm" in pos:
                yield INFRASTRUCTURE, "changes or deletes cloud resources"


def _mount_source(mount: str) -> str:
    """The host side of `-v SRC:DST` or `--mount type=bind,source=SRC,target=DST`."""
    m = re.search(r"(?:^|,)(?:source|src)=([^,]*)", mount)
    return m.group(1) if m else mount


def _package_family(prog: str, args: list[str]):
    opts, pos = _parse(args, "i", frozenset({"--index-url", "--extra-index-url", "--registry", "--source",
                                             "--find-links", "--git", "--index", "--github"}))
    flags = {o for o, _ in opts}
    sub = pos[0] if pos else ""
    if runs_from_foreign_index(prog, args):
        yield SUPPLY_CHAIN, "runs a package from a foreign package index"
    if prog in ("pip", "pip3", "uv", "pipx", "poetry", "pdm") or (prog.startswith("python") and "pip" in args):
        if "pip" in args:
            _, pos = _parse(args[args.index("pip") + 1:], "i", frozenset({"--index-url", "--extra-index-url"}))
        if sub in ("install", "add", "sync") or "install" in pos:
            if flags & {"-i", "--index-url", "--extra-index-url", "--find-links", "-f", "--trusted-host", "--index"}:
                yield SUPPLY_CHAIN, "installs from a foreign package index"
            if any(re.search(r"(?i)(^|@\s*)(git\+|hg\+|svn\+|https?://|ftp://)|.*\.(whl|tar\.gz|zip)$", p) and not
                   p.startswith(("./", "dist/")) and ("://" in p) for p in pos):
                yield SUPPLY_CHAIN, "installs from a URL or a git repository"
            if flags & {"--break-system-packages", "--user"} or prog == "pipx" and "--global" in flags:
                yield SUPPLY_CHAIN, "installs outside the project"
        if sub == "config" and "set" in pos:
            yield PERSISTENCE, "changes where packages come from"
    elif prog in ("npm", "pnpm", "yarn", "bun", "cnpm"):
        if sub in ("install", "i", "add", "ci", "update", "upgrade", "link") or prog == "yarn" and sub == "global":
            if flags & {"-g", "--global", "--location"} or prog == "yarn" and sub == "global":
                yield SUPPLY_CHAIN, "installs packages globally"
            if flags & {"--registry"}:
                yield SUPPLY_CHAIN, "installs from a foreign package index"
            if any(re.match(r"(?i)^(git\+|git:|github:|gitlab:|bitbucket:|https?://|file:/)", p) or
                   re.match(r"^[\w-]+/[\w.-]+(#.*)?$", p) for p in pos[1:]):
                yield SUPPLY_CHAIN, "installs from a URL or a git repository"
        if sub == "config" and "set" in pos or sub == "set" and "registry" in " ".join(pos):
            yield PERSISTENCE, "changes where packages come from"
    elif prog == "bundle" and sub == "add" and flags & {"--git", "--github", "--source"}:
        yield SUPPLY_CHAIN, "installs from a foreign source"
    elif prog in ("gh", "hub") and pos[:2] in (["extension", "install"], ["ext", "install"], ["extensions", "install"]):
        yield SUPPLY_CHAIN, "installs a gh extension from a repository"
    elif prog in ("gem", "cargo", "go", "composer") and sub in ("install", "get", "require"):
        if flags & {"--source", "--git", "--index", "--registry"} or any("://" in p for p in pos):
            yield SUPPLY_CHAIN, "installs from a foreign source"
        if prog == "composer" and "global" in pos:
            yield SUPPLY_CHAIN, "installs packages globally"
    elif prog in ("apt", "apt-get", "dnf", "yum", "apk", "zypper", "pacman", "snap", "flatpak", "port",
                  "dpkg", "rpm") and sub in ("install", "remove", "purge", "autoremove", "reinstall", "upgrade",
                                             "dist-upgrade", "erase", "add", "del", "-i", "-S", "-R", "uninstall"):
        yield SUPPLY_CHAIN, "changes system packages"
    elif prog in ("add-apt-repository",) or prog == "curl" and any(".list" in a and "sources" in a for a in args):
        yield SUPPLY_CHAIN, "adds a package source"

"""Reading a shell command before it runs (E17): the blocklist of commands refused outright, and
the risk classifier that turns a dangerous command into a question for the user; nothing is executed."""
from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass, field
from functools import lru_cache

EXFILTRATION = "exfiltration"
DESTRUCTIVE = "destructive"
DISK = "disk"
PRIVILEGE = "privilege"
CREDENTIALS = "credentials"
BOMB = "resource-bomb"

# Most serious first: the order the user is asked in when one command carries several risks.
LABELS = {
    BOMB: "fork or resource bomb",
    DISK: "disk and filesystem tools",
    EXFILTRATION: "data exfiltration",
    PRIVILEGE: "privilege escalation",
    CREDENTIALS: "credentials and system paths",
    DESTRUCTIVE: "destructive deletion",
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
    return Verdict(_blocked(script), tuple(Risk(c, found[c]) for c in LABELS if c in found))


# --- reading the text -----------------------------------------------------------------------
# shlex splits the text into simple commands across pipes, &&, ; and newlines; $(...), `...` and
# <(...) are lifted out and read on their own, as are `sh -c '...'`, eval, `ssh host '...'`, su -c
# and find -exec. Env-var prefixes, wrappers (sudo, env, xargs, timeout, ...) and binary paths are
# peeled off to find the program. Text that cannot be read exactly (an unbalanced quote) is read
# word by word, and quoted literals are looked at too: every doubt leans towards asking. Beyond
# reach: what a script file, a variable or a decoded string does at run time, and interpreter code
# beyond the sensitive paths and fork loops it names.

_SUB = "$__subst__"  # stands in for a $(...), `...` or <(...) whose text is read on its own
_MAX_DEPTH = 12  # nesting beyond this is refused rather than half read
_PUNCT = "();<>|&\n"
_FD_NUMBER = re.compile(r"(?<![\w$])\d+(?=[<>])")  # the 2 of 2>&1 is not an argument
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_KEYWORDS = {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}"}
_HEADERS = {"for", "case", "select", "esac", "in"}  # loop/case headers: their words run nothing
_SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "fish"}
_INTERPRETERS = re.compile(r"^(python[\d.]*|pypy[\d.]*|perl|ruby|node|nodejs|php|lua|Rscript)$")


@dataclass
class Cmd:
    words: list[str] = field(default_factory=list)
    redirects: list[tuple[str, str]] = field(default_factory=list)
    fed: bool = False  # stdin comes from a pipe, a file or a here-string
    wrappers: list[str] = field(default_factory=list)  # sudo, env, xargs, find ... that run it
    found_build: bool = False  # run by `find -exec` on build artefacts only
    argv: list[str] = field(default_factory=list)

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
    background_loop: bool = False
    too_deep: bool = False


def _read(text: str, depth: int, fed: bool, script: _Script) -> None:
    if depth > _MAX_DEPTH:
        script.too_deep = True
        return
    script.texts.append(text)
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
    lexer = shlex.shlex(text, posix=True, punctuation_chars=_PUNCT)
    lexer.whitespace = " \t\r"  # newlines separate commands, so they are punctuation here
    lexer.whitespace_split = True
    lexer.commenters = ""  # a quoted '#' must not hide the rest of the line
    try:
        return list(lexer)
    except ValueError:  # an unbalanced quote: the shell would refuse it; read the bare words
        return re.findall(r"[();<>|&\n]+|[^\s();<>|&]+", text.replace("'", " ").replace('"', " "))


def _is_op(token: str) -> bool:
    return bool(token) and all(ch in _PUNCT for ch in token)


def _split(tokens: list[str], background_loop: bool) -> tuple[list[Cmd], bool]:
    """Simple commands, their redirects and pipes; and whether a while/until loop backgrounds work."""
    cmds, cur, pending, loops = [], Cmd(), None, 0
    for tok in tokens:
        if _is_op(tok) and ("<" in tok or ">" in tok):
            pending = tok
        elif _is_op(tok):
            if cur.words or cur.redirects:
                cmds.append(cur)
            cur, pending = Cmd(fed=tok in ("|", "|&")), None
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
}
_WRAPPER_OPERANDS = {"timeout": 1, "chroot": 1, "flock": 1}  # positional words before the command
_PRIVILEGED = {"sudo", "doas", "su", "pkexec", "runuser"}


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
        elif prog in _WRAPPER_VALUES:
            cmd.wrappers.append(prog)
            argv, nested = _after_wrapper(prog, argv[1:])
            if nested is not None:
                _read(nested, depth + 1, cmd.fed, script)
        else:
            break
    cmd.argv = argv
    script.cmds.append(cmd)
    prog, args = cmd.prog, cmd.args
    if prog in _SHELLS:
        body = _shell_script(args)
        if body is not None:
            _read(body, depth + 1, cmd.fed, script)
    elif prog == "eval" and args:
        _read(" ".join(args), depth + 1, cmd.fed, script)
    elif prog == "ssh":
        _, pos = _parse(args, "bcDEeFIiJLlmOopQRSWw")
        if len(pos) > 1:
            _read(" ".join(pos[1:]), depth + 1, cmd.fed, script)
    elif prog in ("find", "gfind"):
        for nested in _find_execs(args):
            inner = Cmd(words=nested, wrappers=cmd.wrappers + ["find"], found_build=_find_is_build(args))
            _unwrap(inner, depth + 1, script)
    elif _INTERPRETERS.match(prog):
        opts, _ = _parse(args, "ceEmWXr")
        script.code += [v for o, v in opts if o in ("-c", "-e", "-E", "-r") and v]


def _after_wrapper(prog: str, args: list[str]) -> tuple[list[str], str | None]:
    """The wrapped command's argv, and a script text when the wrapper takes one (su -c, watch)."""
    if prog in ("su", "runuser"):  # su [-] [user] [-c script]: the user is no command
        for k, a in enumerate(args):
            if a in ("-c", "--command") and k + 1 < len(args):
                return [], args[k + 1]
            if a.startswith("--command="):
                return [], a.partition("=")[2]
        return (args[args.index("--") + 1:] if "--" in args else []), None
    values, i = _WRAPPER_VALUES[prog], 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        if args[i] == "--":
            i += 1
            break
        if prog == "command" and args[i] in ("-v", "-V"):
            return [], None  # `command -v x` only looks x up
        takes = args[i][1:2] in values and len(args[i]) == 2
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


def _parse(args: list[str], short: str = "", long: frozenset[str] = frozenset()) -> tuple[list, list]:
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


# --- paths ----------------------------------------------------------------------------------

_BUILD_DIRS = {
    "build", "dist", "target", "out", "_build", "node_modules", "__pycache__", ".pytest_cache",
    ".mypy_cache", ".ruff_cache", ".tox", ".nox", ".cache", ".coverage", "htmlcov", "coverage",
    ".eggs", ".next", ".nuxt", ".parcel-cache", ".turbo", ".gradle", ".hypothesis", ".venv", "venv",
    "tmp", ".tmp",
}
_BUILD_PATTERNS = {"*.pyc", "*.pyo", "*.o", "*.class", "*.egg-info", ".DS_Store"} | _BUILD_DIRS
_ROOTISH = re.compile(
    r"^(/+\.?\.?|/+\*|~/?\*?|\$\{?HOME\}?/?\*?"
    r"|/+(bin|boot|dev|etc|home|lib|lib32|lib64|opt|proc|root|run|sbin|srv|sys|usr|var)/*\*?)$")
_BLOCK_DEVICE = re.compile(
    r"^/dev/(sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|disk/|mapper/|md\d|dm-\d|mem$|kmem$|port$)")
_SYSTEM = re.compile(r"^(/etc|/boot|/usr|/bin|/sbin|/lib|/lib32|/lib64|/sys|/proc/sys|/var/spool/cron|/root)(/|$)")
_SECRETS = re.compile(
    r"(?<![\w.-])\.(ssh|aws|gnupg|kube|azure|password-store|vault-token|netrc|pgpass|git-credentials"
    r"|pypirc|docker/config\.json|config/gcloud)(?![\w-])"
    r"|\bid_(rsa|dsa|ecdsa|ed25519)\b"
    r"|/etc/(shadow|gshadow|sudoers|passwd|master\.passwd)\b"
    r"|/proc/[^/\s]+/(environ|mem)\b"
    r"|Library/Keychains|\.kdbx\b"
    r"|(?<![\w.-])\.env(?!\.(example|sample|template|dist)\b)(\.[\w-]+)?(?![\w./-])")
_LOCAL_URL = re.compile(
    r"^([a-z][a-z0-9+.-]*://)?([^@/\s]*@)?(localhost|127(\.\d+){3}|0\.0\.0\.0|\[::1\]|::1)(:\d+)?([/?#]|$)", re.I)
_REMOTE_SPEC = re.compile(r"^(scp://|rsync://|sftp://|[^/\s:]+::?)")  # host:path, user@host:, host::module
_GIT_URL = re.compile(r"://|^[^/\s]+@[^/\s]+:")
_FORK_LOOP = re.compile(r"fork.*\b(while|loop|for)\b|\b(while|loop|for)\b.*fork", re.S)
_FUNCTION = re.compile(
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
    for word in script.words:
        if "/dev/tcp/" in word or "/dev/udp/" in word:
            yield EXFILTRATION, "opens a raw network connection"
        if _SECRETS.search(word):  # inline interpreter code is a word too
            yield CREDENTIALS, "touches a credential or secrets file"
    for cmd in script.cmds:
        yield from _cmd_risks(cmd)


def _fork_bomb_found(script: _Script) -> bool:
    return any(_fork_bomb(t) for t in script.texts) or any(_FORK_LOOP.search(c) for c in script.code)


def _cmd_risks(cmd: Cmd):
    prog, args = cmd.prog, cmd.args
    if set(cmd.wrappers) & _PRIVILEGED or prog in _PRIVILEGED:
        yield PRIVILEGE, "runs as another user"
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
    elif prog in ("dig", "nslookup", "host", "drill") and any(_SUB in a or "`" in a for a in args):
        return risk, "puts command output into a DNS lookup"
    elif prog == "git":
        sub, rest = _git_sub(args)
        if sub == "push" and any(_GIT_URL.search(a) for a in rest):
            return risk, "pushes to a repository named by URL"
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
    elif prog in ("find", "gfind") and "-delete" in args and not _find_is_build(args):
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


def _disk(cmd: Cmd, prog: str, args: list[str]):
    if prog not in _DISK_TOOLS and not prog.startswith(("mkfs", "fsck.")):
        return None
    if prog == "mount" and not args:
        return None  # lists the mounts
    if prog in ("fdisk", "sfdisk", "parted") and args and all(a in ("-l", "--list") for a in args):
        return None
    return DISK, f"{prog} works on disks or filesystems"


def _privilege(cmd: Cmd, prog: str, args: list[str]):
    risk = PRIVILEGE
    if prog in _ACCOUNT_TOOLS:
        return risk, f"{prog} changes accounts or capabilities"
    _, pos = _parse(args)
    if prog == "chmod" and pos and any(
            re.match(r"^[ugoa]*[+=][rwxXt]*s", part) for part in pos[0].split(",")) or (
            prog == "chmod" and pos and re.match(r"^0?[2-7][0-7]{3}$", pos[0])):
        return risk, "sets a setuid or setgid bit"
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

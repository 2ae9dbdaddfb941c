"""Secrets at rest: the OS keyring behind `${secret:NAME}`, the one `${...}` expansion, and the guards around it.

Values live in the keyring (never a plain file), are filled in only where they are used, are masked in every log
line, and a literal credential written into a file is pointed out without being repeated.
"""
from __future__ import annotations

import contextlib
import functools
import math
import os
import re
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import msgspec

from orchestrator.core.errors import InputError

SERVICE = "orchestrator"  # the keyring's service name for every secret of the project
ENV_PREFIX = "ORCHESTRATOR_SECRET_"  # with no keyring, ${secret:NAME} reads ORCHESTRATOR_SECRET_NAME
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_REF = re.compile(r"\$\{(secret:)?([A-Za-z_][A-Za-z0-9_]*)\}")
_INDEX = ".names"  # the keyring entry listing the names (keyring itself cannot list); no NAME can clash with it
_MIN_MASKED = 4  # shorter values would mask ordinary words in log lines

_known: set[str] = set()  # every value filled in by this process, for the log guard
_warned: set[str] = set()
_lock = threading.Lock()


class NoKeyring(Exception):
    """No keyring backend this project accepts is available; the message says why in one line."""


# --- the keyring ------------------------------------------------------------------------------

def _backend() -> Any:
    """The keyring backend to use; raises NoKeyring."""
    found = _chosen()
    if isinstance(found, NoKeyring):
        raise found
    return found


@functools.cache
def _chosen() -> Any:
    """The backend, or the NoKeyring saying why there is none, once per process. Imported here, at first use:
    importing keyring scans entry points and its Secret Service backend talks D-Bus."""
    try:
        import keyring
        import keyring.core
        from keyring.backends import chainer, fail
    except ImportError:
        return NoKeyring("the `keyring` package is not installed (pip install keyring)")
    # A backend the user named (PYTHON_KEYRING_BACKEND or keyringrc.cfg) counts as their explicit choice.
    explicit = keyring.core.load_env() or keyring.core.load_config()
    chosen = explicit or keyring.get_keyring()
    leaves = list(chosen.backends) if isinstance(chosen, chainer.ChainerBackend) else [chosen]
    refused = [leaf for leaf in leaves if _refusal(leaf, explicit is not None)]
    usable = [leaf for leaf in leaves if leaf not in refused and not isinstance(leaf, fail.Keyring)
              and type(leaf).__module__ != "keyring.backends.null"]
    if usable:
        return usable[0]
    if any(_plain(leaf) for leaf in refused):
        return NoKeyring("the only keyring backend is keyrings.alt's plaintext file, which is refused (it is a "
                         "plain file)")
    return NoKeyring("keyring found no backend (no Secret Service on D-Bus, Keychain or Credential Locker)")


def _plain(leaf: Any) -> bool:
    return type(leaf).__name__ == "PlaintextKeyring"


def _refusal(leaf: Any, explicit: bool) -> bool:
    """keyrings.alt's backends are files: the plaintext one never, the encrypted one only when named."""
    if not type(leaf).__module__.startswith("keyrings.alt"):
        return False
    return _plain(leaf) or not (explicit and type(leaf).__name__ == "EncryptedKeyring")


def backend_name() -> str:
    """The backend in use, for `secrets list`; raises NoKeyring."""
    b = _backend()
    return f"{type(b).__module__}.{type(b).__name__}"


def _call(fn: str, *args: str) -> Any:
    from keyring.errors import KeyringError

    b = _backend()
    try:
        return getattr(b, fn)(SERVICE, *args)
    except KeyringError as exc:
        if fn == "delete_password" and type(exc).__name__ == "PasswordDeleteError":
            return None
        raise InputError(f"the OS keyring ({type(b).__name__}) refused: {exc or type(exc).__name__}; unlock "
                         "it (log in to the desktop session) and try again") from None


def check_name(name: str) -> str:
    if not NAME.fullmatch(name):
        raise InputError(f"bad secret name {name!r}: use letters, digits and `_`, starting with a letter or `_` "
                         "(at most 64), as in ${secret:GITHUB_TOKEN}")
    return name


def names() -> list[str]:
    """The names stored (never their values); raises NoKeyring."""
    raw = _call("get_password", _INDEX)
    try:
        listed = msgspec.json.decode(raw, type=list[str]) if raw else []
    except msgspec.DecodeError:
        listed = []
    return sorted({n for n in listed if NAME.fullmatch(n)})


@contextlib.contextmanager
def _index_locked() -> Iterator[None]:
    """The names index changed by one writer at a time, in this process and across processes: the index is
    read, changed and written back, and two `secrets set` at once would otherwise lose a name."""
    with _lock:
        try:
            import fcntl
        except ImportError:  # Windows: one process at a time is all that is guarded
            yield
            return
        from orchestrator.core.resources import state_dir

        folder = state_dir()
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        # The lock file holds nothing; O_NOFOLLOW so a link planted in its place is refused, not followed.
        fd = os.open(folder / "secrets.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


def store(name: str, value: str) -> None:
    """Keep `value` under `name` in the keyring; raises NoKeyring."""
    check_name(name)
    _call("set_password", name, value)
    with _index_locked():
        _call("set_password", _INDEX, msgspec.json.encode(sorted({*names(), name})).decode())


def remove(name: str) -> bool:
    """Delete `name`; False when it was not there. Raises NoKeyring."""
    check_name(name)
    there = _call("get_password", name) is not None
    if there:
        _call("delete_password", name)
    with _index_locked():
        listed = names()
        if name in listed:
            _call("set_password", _INDEX, msgspec.json.encode([n for n in listed if n != name]).decode())
    return there


def lookup(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """The value of ${secret:NAME}: from the keyring, or, when there is none, from ORCHESTRATOR_SECRET_NAME.
    Blocking (D-Bus): call it from a worker thread when an event loop runs."""
    env = os.environ if env is None else env
    try:
        value = _call("get_password", check_name(name))
    except NoKeyring as exc:
        once(f"warning: no OS keyring: {exc}; ${{secret:NAME}} reads the environment variable {ENV_PREFIX}NAME "
             "instead")
        value = env.get(ENV_PREFIX + name)
    if value is not None:
        remember(value)
    return value


def lookups(refs: Iterable[str], env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The secrets among `refs` that exist, by name (what `needed` returned); blocking like `lookup`."""
    found = {name: lookup(name, env) for name in refs}
    return {name: value for name, value in found.items() if value is not None}


async def fetched(refs: Iterable[str], env: Mapping[str, str] | None = None) -> dict[str, str]:
    """`lookups` from async code: in a worker thread, one at a time (a locked keyring may ask to be unlocked)."""
    import trio

    wanted = list(refs)
    if not wanted:
        return {}
    return await trio.to_thread.run_sync(lookups, wanted, env, limiter=_limiter())


@functools.cache
def _limiter() -> Any:
    import trio

    return trio.CapacityLimiter(1)


# --- the expansion ----------------------------------------------------------------------------

def needed(*texts: str) -> set[str]:
    """The secret names the texts refer to as ${secret:NAME}."""
    return {m.group(2) for text in texts for m in _REF.finditer(text) if m.group(1)}


def expand(text: str, env: Mapping[str, str], where: str, secrets: Mapping[str, str] | None = None) -> str:
    """`text` with each `${VAR}` filled in from `env` and each `${secret:NAME}` from `secrets` (fetched beforehand,
    off the event loop), or, when `secrets` is None, looked up now. A missing one is an error naming it, never a
    value; what is filled in is masked in logs from then on."""
    def one(m: re.Match[str]) -> str:
        secret, name = bool(m.group(1)), m.group(2)
        if secret:
            value = lookup(name, env) if secrets is None else secrets.get(name)
            if value is None:
                raise InputError(f"{where} uses ${{secret:{name}}}, which is not stored: {missing_hint(name)}")
            remember(value)
        else:
            value = env.get(name)
            if value is None:
                raise InputError(f"{where} uses ${{{name}}}, which is not set in the environment")
            if credential_name(name):
                remember(value)
        return value

    return _REF.sub(one, text)


def missing_hint(name: str) -> str:
    """What to do about a secret that is not there (with no keyring: the environment variable that stands in)."""
    try:
        _backend()
    except NoKeyring as exc:
        return f"there is no OS keyring ({exc}), so set {ENV_PREFIX}{name} in the environment"
    return f"store it with `orchestrator secrets set {name}`"


# --- the guards -------------------------------------------------------------------------------

def remember(value: str) -> None:
    """Mask `value` in every log line from now on."""
    if len(value) >= _MIN_MASKED:
        _known.add(value)


def redact(text: str) -> str:
    """`text` with every value filled in so far replaced by `[secret]` (longest first, so a value holding
    another is masked whole)."""
    if not _known or not text:
        return text
    for value in sorted(_known, key=len, reverse=True):
        if value in text:
            text = text.replace(value, "[secret]")
    return text


def redacted(value: Any) -> Any:
    """A log event's value with the known secrets masked in every string in it."""
    if not _known:
        return value
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redacted(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redacted(v) for v in value)
    return value


def once(line: str) -> None:
    """Say `line` on stderr the first time this process has it to say (loaders run more than once): a warning
    for the person running it, wherever the logs go."""
    import sys

    with _lock:
        if line in _warned:
            return
        _warned.add(line)
    print(line, file=sys.stderr, flush=True)


# --- literal credentials in files -------------------------------------------------------------

_SHAPES = re.compile(r"""(?x)
    sk-ant-[A-Za-z0-9_-]{20,} | sk-(?:proj-)?[A-Za-z0-9_-]{20,} | AIza[0-9A-Za-z_-]{30,}
  | gh[pousr]_[A-Za-z0-9]{30,} | github_pat_[A-Za-z0-9_]{30,} | xox[bpas]-[A-Za-z0-9-]{10,} | AKIA[0-9A-Z]{16}
""")
_BEARER = re.compile(r"(?i)\b(?:bearer|token|basic)\s+([A-Za-z0-9._~+/=-]{16,})")
_TOKENISH = re.compile(r"[A-Za-z0-9._~+/=-]{32,}")
_CREDENTIAL_NAME = re.compile(r"(?i)key|token|secret|passw|passphrase|auth|credential|bearer|cookie|session|pat\b")


def credential_name(key: str) -> bool:
    """Whether a setting or variable named `key` holds a credential by its name (API_KEY, Authorization...)."""
    return bool(_CREDENTIAL_NAME.search(key))


def _entropy(text: str) -> float:
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def _high_entropy(token: str) -> bool:
    # Random tokens mix letter cases and digits; a path, a word list or a UUID of one case rarely scores this.
    classes = sum(any(f(c) for c in token) for f in (str.islower, str.isupper, str.isdigit))
    return classes >= 3 and _entropy(token) >= 4.0


def literal_credential(value: str, key: str | None = None) -> bool:
    """Whether `value` as written in a file is a credential in the clear: a provider key's shape, a long random
    bearer token, or (when `key` names a credential) any literal of 8 or more characters. `${...}` is not."""
    if not value or _REF.search(value):
        return False
    if _SHAPES.search(value):
        return True
    if (m := _BEARER.search(value)) and _high_entropy(m.group(1)):
        return True
    if any(_high_entropy(t) for t in _TOKENISH.findall(value)):
        return True
    return key is not None and credential_name(key) and len(value.strip()) >= 8


def shown(value: str) -> str:
    """How a warning points at a literal without giving it away: its first 3 characters and its length."""
    return f"`{value[:3]}…`, {len(value)} characters"


def suggested_name(*parts: str) -> str:
    """A secret name for a setting (`FILES_TOKEN` for env.TOKEN of server `files`)."""
    joined = "_".join(re.sub(r"[^A-Za-z0-9]+", "_", p).strip("_") for p in parts if p).upper()
    name = joined if NAME.fullmatch(joined or "-") else f"S_{joined}"[:64]
    return name if NAME.fullmatch(name) else "MY_SECRET"


def where_in(path: str, value: str) -> str:
    """`path:LINE` of the first line holding `value` (for files whose parser keeps no lines), else `path`."""
    try:
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if value in line:
                    return f"{path}:{number}"
    except (OSError, UnicodeDecodeError):
        pass
    return path


def warn_literal(where: str, setting: str, value: str, name: str) -> None:
    """One warning line: where the literal is, which setting, and the command that moves it into the keyring."""
    once(f"warning: {where}: {setting} holds a literal credential ({shown(value)}); move it into the OS keyring "
         f"with `orchestrator secrets set {name}` and write \"${{secret:{name}}}\" there instead")

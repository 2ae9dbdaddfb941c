"""`orchestrator secrets set|list|remove`: the values `${secret:NAME}` stands for, kept in the OS keyring.

A value is read from a prompt that does not echo, or from stdin when it is piped, never from the command line
(other users see a process's argv). `list` shows names only.
"""
from __future__ import annotations

import sys
from typing import Any

import trio

from orchestrator.cli.paths import add_actions
from orchestrator.core import secrets
from orchestrator.core.errors import InputError

_KEYRING = trio.CapacityLimiter(1)  # one keyring call at a time: a locked keyring may ask to be unlocked


async def _off_loop(fn: Any, *args: Any) -> Any:
    return await trio.to_thread.run_sync(fn, *args, limiter=_KEYRING)


def _no_keyring(exc: secrets.NoKeyring, name: str) -> InputError:
    return InputError(f"no OS keyring here: {exc}; nothing was stored. Set {secrets.ENV_PREFIX}{name} in the "
                      "environment instead (${secret:NAME} reads it when there is no keyring), or start one "
                      "(gnome-keyring, KWallet)")


def _read_value(name: str) -> str:
    """The value from a no-echo prompt on a terminal, else everything piped in (less one final newline)."""
    if sys.stdin.isatty():
        import getpass

        value = getpass.getpass(f"value of {name} (not shown): ")
    else:
        value = sys.stdin.read()
        value = value[:-2] if value.endswith("\r\n") else value.removesuffix("\n")
    if not value:
        raise InputError(f"no value given for {name}: type it at the prompt, or pipe it in "
                         f"(`orchestrator secrets set {name} < FILE`)")
    return value


async def cmd_set(args: Any) -> int:
    name = secrets.check_name(args.name)
    value = await trio.to_thread.run_sync(_read_value, name, abandon_on_cancel=True)
    try:
        await _off_loop(secrets.store, name, value)
        where = await _off_loop(secrets.backend_name)
    except secrets.NoKeyring as exc:
        raise _no_keyring(exc, name) from None
    print(f"stored {name} in the OS keyring ({where}); write ${{secret:{name}}} where it is used")
    return 0


async def cmd_list(args: Any) -> int:
    try:
        listed = await _off_loop(secrets.names)
    except secrets.NoKeyring as exc:
        print(f"no OS keyring here: {exc}; ${{secret:NAME}} reads {secrets.ENV_PREFIX}NAME from the "
              "environment instead", file=sys.stderr)
        import os

        listed = sorted(k.removeprefix(secrets.ENV_PREFIX) for k in os.environ
                        if k.startswith(secrets.ENV_PREFIX) and secrets.NAME.fullmatch(k[len(secrets.ENV_PREFIX):]))
    for name in listed:
        print(name)
    if not listed:
        print("no secrets stored; add one with `orchestrator secrets set NAME`", file=sys.stderr)
    return 0


async def cmd_remove(args: Any) -> int:
    name = secrets.check_name(args.name)
    try:
        removed = await _off_loop(secrets.remove, name)
    except secrets.NoKeyring as exc:
        raise _no_keyring(exc, name) from None
    if not removed:
        raise InputError(f"no secret named {name} in the OS keyring; `orchestrator secrets list` shows them")
    print(f"removed {name} from the OS keyring")
    return 0


def add_parser(sub: Any) -> None:
    group = sub.add_parser("secrets", help="secrets in the OS keyring: set, list, remove",
                           description="Values for ${secret:NAME} in team files and config.toml, kept in the OS "
                           "keyring (Secret Service, macOS Keychain, Windows Credential Locker).")
    actions = add_actions(group, "secrets_command")
    put = actions.add_parser("set", help="store a value (from a prompt that does not echo, or from stdin)")
    put.add_argument("name", help="letters, digits and _, as written in ${secret:NAME}")
    put.set_defaults(fn=cmd_set)
    ls = actions.add_parser("list", help="the names stored (never their values)")
    ls.set_defaults(fn=cmd_list)
    rm = actions.add_parser("remove", help="delete a stored value")
    rm.add_argument("name")
    rm.set_defaults(fn=cmd_remove)

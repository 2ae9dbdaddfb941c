"""Namespace, root-directory and credential tools for the risk classifier (nsenter, unshare, chroot, setpriv,
capsh, ip netns exec, nspawn, sg): which of them run a command that tools/risk.py must read, and why they ask."""
from __future__ import annotations

from orchestrator.tools.risk_args import parse

# Wrappers that run a command in other namespaces, another root or with other credentials, with their
# options that take a value, so the command they run is found and read like sudo's.
WRAPPERS = {"nsenter": "tSG", "unshare": "SGRw", "setpriv": "", "chroot": "", "run0": "ugD"}
WRAPPER_LONG = {
    "nsenter": {"--target", "--setuid", "--setgid"},
    "unshare": {"--setuid", "--setgid", "--map-user", "--map-group", "--map-users", "--map-groups", "--root",
                "--wd", "--propagation"},
    "setpriv": {"--reuid", "--regid", "--ruid", "--rgid", "--euid", "--egid", "--groups", "--inh-caps",
                "--ambient-caps", "--bounding-set", "--securebits", "--pdeathsig", "--selinux-label",
                "--apparmor-profile", "--landlock-access", "--landlock-rule"},
    "run0": {"--user", "--group", "--chdir", "--description", "--setenv", "--property", "--slice", "--nice"},
}
_HELP = {"-h", "--help", "-V", "--version"}
_CAPSH_INSPECT = ("--print", "--decode", "--has-p", "--has-i", "--has-a", "--has-b", "--supports", "--current",
                  "--explain", "--help", "--version")


def inspects_only(prog: str, args: list[str]) -> bool:
    """The tool only prints something (setpriv --dump, capsh --print, --help): it runs nothing."""
    if prog in WRAPPERS and args and set(args) <= _HELP:
        return True
    if prog == "setpriv":
        return bool(set(args) & {"-d", "--dump"})
    if prog == "capsh":
        return bool(args) and "--" not in args and all(a.startswith(_CAPSH_INSPECT) for a in args)
    return False


def netns_command(argv: list[str]) -> list[str] | None:
    """The command `ip [-all] netns exec NAME cmd...` runs, or None when argv is not that."""
    words = [a for a in argv[1:] if a not in ("-all", "-a")]
    if words[:2] != ["netns", "exec"]:
        return None
    return words[2:] if "-all" in argv or "-a" in argv else words[3:]


def capsh_command(args: list[str]) -> list[str] | None:
    """capsh runs /bin/bash with the words after `--`."""
    return ["bash", *args[args.index("--") + 1:]] if "--" in args else None


def sg_script(args: list[str]) -> str | None:
    """The command text of `sg GROUP [-c] 'command'`."""
    rest = [a for a in args[1:] if a != "-c"]
    return " ".join(rest) if rest else None


_TOOLS = {"capsh", "pivot_root", "systemd-nspawn", "machinectl", "podman", "buildah", "newgrp", "sg", "systemd-run",
          "ip"}


def namespace_tool(prog: str, args: list[str]) -> str | None:
    """Why `prog args` (not a wrapper) steps outside this process's namespaces or credentials, or None."""
    if prog not in _TOOLS:
        return None
    _, pos = parse(args, "DMuUM", frozenset({"--directory", "--machine", "--user", "--uid"}))
    if prog == "capsh" and not inspects_only(prog, args):
        return "capsh changes capabilities or users"
    if prog == "pivot_root":
        return "pivot_root changes the root filesystem"
    if prog == "systemd-nspawn":
        return "systemd-nspawn starts a container as root"
    if prog == "machinectl" and pos[:1] in (["shell"], ["login"]):
        return "opens a shell in another machine or as another user"
    if prog in ("podman", "buildah") and pos[:1] == ["unshare"]:
        return "runs as root of a user namespace"
    if prog in ("newgrp", "sg"):
        return f"{prog} runs with another group's rights"
    if prog == "systemd-run" and not {"--user", "-h", "--help", "--version"} & set(args):
        return "runs a command as a system service"
    if prog == "ip":
        words = [a for a in args if not a.startswith("-")]
        if words[:1] == ["netns"] and words[1:2] and words[1] in ("exec", "add", "delete", "del", "attach", "set"):
            return "runs in or changes network namespaces"
    return None

"""Copies, syncs and uploads to remote storage for the risk classifier: rclone, Azure storage, backup tools
and file-drop services; curl, scp, rsync, git and the clouds' cp/sync stay with tools/risk.py."""
from __future__ import annotations

import re

from orchestrator.core.patterns import Pattern
from orchestrator.tools.risk_args import parse

# An rclone remote (`name:path`, or `:backend:path` made on the fly); a Windows drive letter is local.
_RCLONE_REMOTE = Pattern(r"^(?::[\w-]+(?:,[^:]*)?:|[\w][\w .-]+:)(?!//)")
_RCLONE_VALUES = frozenset({"--config", "--transfers", "--checkers", "--addr", "--include", "--exclude",
                            "--filter", "--filter-from", "--include-from", "--exclude-from", "--files-from",
                            "--log-file", "--log-level", "--bwlimit", "--max-age", "--min-age", "--max-size",
                            "--min-size", "--backup-dir", "--suffix", "--user", "--pass", "--htpasswd",
                            "--vfs-cache-mode", "--cache-dir", "--order-by", "--max-transfer", "--stats"})
_RCLONE_SENDS = {"copy", "sync", "move", "copyto", "moveto", "bisync"}
_LOCAL_ADDR = Pattern(r"^(?:localhost|127\.[\d.]+|\[::1\]|::1|unix)(?::\d+)?$|^unix:")
# Backup and transfer repositories elsewhere: sftp:, s3:, rest:, b2:, azure:, gs:, rclone:, swift:, URLs.
_REPO_REMOTE = Pattern(r"(?i)^(?:sftp|s3|rest|b2|azure|gs|rclone|swift|ssh|scp|ftp|ftps|webdav|https?|"
                       r"dropbox|gdocs|onedrive|pydrive|mega|imap|rsync|boto3\+s3|par2\+\w+)[:+]|^[^/\s:]+@[^/\s]+:")
_DROPS = {("croc", "send"), ("wormhole", "send"), ("magic-wormhole", "send"), ("ffsend", "upload"),
          ("ffsend", "u"), ("ncftpput", "")}


PROGRAMS = {"rclone", "azcopy", "az", "restic", "borg", "duplicity", "smbclient", "lftp", "gcloud", "b2"} | {
    p for p, _ in _DROPS}


def sends_away(prog: str, args: list[str]) -> str | None:
    """Why `prog args` copies local files to storage or a host elsewhere, or None."""
    if prog not in PROGRAMS:
        return None
    if prog == "rclone":
        return _rclone(args)
    if prog == "azcopy":
        _, pos = parse(args)
        if pos[:1] in (["copy"], ["cp"], ["sync"]) and len(pos) >= 3 and re.match(r"(?i)^https?://", pos[-1]) \
                and not re.match(r"(?i)^https?://", pos[1]):
            return "azcopy copies files to cloud storage"
    if prog == "az":
        _, pos = parse(args)
        if pos[:1] == ["storage"] and set(pos[1:4]) & {"upload", "upload-batch", "sync", "copy"}:
            return "uploads files to Azure storage"
    if prog == "restic":
        return _restic(args)
    if prog == "borg":
        _, pos = parse(args, "", frozenset({"--remote-path", "--exclude", "--compression", "--pattern"}))
        if pos[:1] == ["create"] and len(pos) >= 2 and (_REPO_REMOTE.match(pos[1]) or pos[1].startswith("::")):
            return "backs files up to a repository elsewhere"
    if prog == "duplicity":
        _, pos = parse(args)
        if any(_REPO_REMOTE.match(p) for p in pos[-1:]) and not pos[-1].startswith("file:"):
            return "backs files up to a host elsewhere"
    if prog == "smbclient":
        opts, _ = parse(args, "cTUWAOpdlmnRstI")
        if any(o == "-c" and v and re.search(r"\b(?:put|mput|tar\s+c)", v) or o == "-T" and v and "c" in v
               for o, v in opts):
            return "uploads files to a network share"
    if prog == "lftp":
        opts, _ = parse(args, "ceufp")
        if any(o == "-c" and v and re.search(r"\b(?:put|mput|reput)\b|\bmirror\b[^;]*\s(?:-R|--reverse)", v)
               for o, v in opts):
            return "uploads through a file-transfer client"
    if prog == "gcloud":
        _, pos = parse(args, "", frozenset({"--zone", "--project", "--ssh-key-file"}))
        if pos[:2] == ["compute", "scp"] and len(pos) >= 4 and re.match(r"^[^/\s:]+:", pos[-1]):
            return "copies files to a cloud machine"
    if prog == "b2":
        _, pos = parse(args)
        if pos[:1] in (["upload-file"], ["upload_file"]) or pos[:2] == ["file", "upload"] or (
                pos[:1] == ["sync"] and pos[-1:] and pos[-1].startswith("b2://")):
            return "uploads files to cloud storage"
    _, pos = parse(args)
    if (prog, pos[0] if pos else "") in _DROPS or (prog, "") in _DROPS:
        return "sends files through a relay or a file-drop service"
    return None


def _rclone(args: list[str]) -> str | None:
    opts, pos = parse(args, "", _RCLONE_VALUES)
    sub, paths = (pos[0], pos[1:]) if pos else ("", [])
    remote = [bool(_RCLONE_REMOTE.match(p)) for p in paths]
    if sub in _RCLONE_SENDS and len(paths) >= 2 and (remote[-1] and not all(remote[:-1]) or
                                                     sub == "bisync" and any(remote) and not all(remote)):
        return "rclone copies files to a remote"
    if sub == "rcat" and any(remote):
        return "rclone writes its input to a remote"
    if sub == "mount" and any(remote):
        return "rclone mounts a remote, so writing a file sends it there"
    if sub == "serve" and not any(o == "--addr" and v and _LOCAL_ADDR.match(v) for o, v in opts):
        return "rclone serves files to the network"
    return None


def _restic(args: list[str]) -> str | None:
    opts, pos = parse(args, "rp", frozenset({"--repo", "--password-file", "--exclude", "--tag", "--host"}))
    if pos[:1] != ["backup"]:
        return None
    repos = [v for o, v in opts if o in ("-r", "--repo") and v]
    if not repos or any(_REPO_REMOTE.match(r) for r in repos):  # from the environment: could be anywhere
        return "backs files up to a repository elsewhere"
    return None


def deletes_at_destination(prog: str, args: list[str]) -> bool:
    """rclone sync makes the destination identical to the source, deleting what is extra, like rsync --delete."""
    if prog != "rclone":
        return False
    _, pos = parse(args, "", _RCLONE_VALUES)
    return pos[:1] == ["sync"] and len(pos) >= 3 and not _RCLONE_REMOTE.match(pos[-1])

"""The ledger: append-only segment files, checkpoints, replay and compaction."""
from __future__ import annotations

import os
import zlib
from dataclasses import dataclass
from pathlib import Path


class LedgerGap(Exception):
    """A sequence number is missing between the checkpoint and the head (E2047)."""


@dataclass
class Entry:
    seq: int
    partition: int
    payload: bytes
    deleted: bool = False

    def crc(self) -> int:
        return zlib.crc32(self.payload) ^ self.seq


@dataclass
class Segment:
    path: Path
    first_seq: int
    entries: list[Entry]

    @property
    def live_ratio(self) -> float:
        if not self.entries:
            return 0.0
        return sum(not e.deleted for e in self.entries) / len(self.entries)


def reconcile_ledger(entries: list[Entry], checkpoint: int) -> list[Entry]:
    """Check the entries after `checkpoint` for holes and return them in sequence order.

    Replay calls this on start. Entries at or below the checkpoint are already applied and are
    dropped; duplicates (written twice around a crash) keep their first copy.
    """
    seen: dict[int, Entry] = {}
    for e in entries:
        if e.seq > checkpoint and e.seq not in seen:
            seen[e.seq] = e
    ordered = [seen[s] for s in sorted(seen)]
    expected = checkpoint + 1
    for e in ordered:
        if e.seq != expected:
            raise LedgerGap(f"E2047: missing entries {expected}..{e.seq - 1}")
        expected += 1
    return ordered


def compact_segments(segments: list[Segment], trigger_ratio: float = 0.5) -> list[Segment]:
    """Merge small or mostly-deleted segments into fresh ones holding only live entries.

    A segment qualifies when its share of deleted entries exceeds `trigger_ratio`
    (`compaction.trigger_ratio`). Qualifying neighbours are merged into one new segment, so many
    small files become a few large ones; the others are returned unchanged.
    """
    out: list[Segment] = []
    pending: list[Entry] = []
    for seg in segments:
        if 1 - seg.live_ratio > trigger_ratio:
            pending += [e for e in seg.entries if not e.deleted]
            continue
        if pending:
            out.append(Segment(seg.path.with_suffix(".compacted"), pending[0].seq, pending))
            pending = []
        out.append(seg)
    if pending:
        out.append(Segment(segments[-1].path.with_suffix(".compacted"), pending[0].seq, pending))
    return out


def fsync_dir(path: Path) -> None:
    """Make a rename durable: fsync the directory that holds the file."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def verify_segment(seg: Segment, crcs: list[int]) -> bool:
    """False if any entry's checksum differs from the stored one (E2001)."""
    return len(crcs) == len(seg.entries) and all(e.crc() == c for e, c in zip(seg.entries, crcs))

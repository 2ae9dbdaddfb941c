"""Request signing: HMAC signatures over request bodies and signing-key rotation."""
from __future__ import annotations

import hashlib
import hmac
import os
import time

MAX_SKEW = 300  # seconds a signature's timestamp may differ from our clock


def sign(key: bytes, body: bytes, now: int | None = None) -> str:
    ts = int(now if now is not None else time.time())
    digest = hmac.new(key, f"{ts}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={ts},v1={digest}"


def verify_signature(header: str, body: bytes, keys: list[bytes], now: int | None = None) -> bool:
    """Check an `X-Lumen-Signature` header against every currently valid key.

    During a rotation two keys are valid. The comparison is constant-time so that the response
    time leaks nothing about how many leading characters matched.
    """
    try:
        fields = dict(part.split("=", 1) for part in header.split(","))
        ts = int(fields["t"])
        given = fields["v1"]
    except (KeyError, ValueError):
        return False
    now = int(now if now is not None else time.time())
    if abs(now - ts) > MAX_SKEW:
        return False  # too old or from the future: a replay
    for key in keys:
        expected = hmac.new(key, f"{ts}.".encode() + body, hashlib.sha256).hexdigest()
        if hmac.compare_digest(expected, given):
            return True
    return False


def rotate_signing_key(current: bytes) -> tuple[bytes, bytes]:
    """A new random 32-byte key; the current one stays valid for the 24-hour overlap."""
    return os.urandom(32), current

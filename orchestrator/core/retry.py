"""Backoff for retryable provider errors: exponential, jittered, capped at 30 s.

A server's retry-after wins over the computed delay; errors that are not retryable never wait, and a class
that names its own smaller number of retries gets no more.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from orchestrator.core.errors import ProviderError


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 6  # model calls in all, the first included
    base: float = 0.5
    cap: float = 30.0
    jitter: float = 0.25  # +- fraction of the delay

    def delay(self, attempt: int, error: ProviderError, rng: random.Random = random._inst) -> float | None:
        """Seconds to wait before retry number `attempt` (1-based), or None to give up."""
        if not error.retryable or attempt >= self.attempts:
            return None
        if error.retries is not None and attempt > error.retries:
            return None
        if error.retry_after is not None:
            return min(max(0.0, error.retry_after), self.cap)
        raw = self.base * 2 ** (attempt - 1)
        return min(self.cap, raw * (1 + rng.uniform(-self.jitter, self.jitter)))

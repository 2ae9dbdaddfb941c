"""Per-tenant request limits: a token bucket per (tenant, node)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class TokenBucket:
    rate: float  # tokens added per second
    burst: float  # most tokens the bucket holds
    tokens: float = -1.0
    updated: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        if self.tokens < 0:
            self.tokens = self.burst

    def _refill(self, now: float) -> None:
        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now

    def take(self, n: float = 1.0, now: float | None = None) -> bool:
        """Spend `n` tokens if the bucket has them; False means answer 429."""
        self._refill(time.monotonic() if now is None else now)
        if self.tokens >= n:
            self.tokens -= n
            return True
        return False

    def retry_after(self, n: float = 1.0) -> float:
        """Seconds until `n` tokens will be available: the Retry-After header."""
        missing = max(0.0, n - self.tokens)
        return missing / self.rate


class Limiter:
    def __init__(self, rate: float = 100.0, burst: float = 200.0):
        self.rate, self.burst = rate, burst
        self.buckets: dict[str, TokenBucket] = {}

    def allow(self, tenant: str) -> bool:
        bucket = self.buckets.setdefault(tenant, TokenBucket(self.rate, self.burst))
        return bucket.take()

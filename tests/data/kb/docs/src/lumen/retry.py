"""Client-side retries with exponential backoff and full jitter."""
from __future__ import annotations

import random
import time
from typing import Callable, TypeVar

T = TypeVar("T")

RETRYABLE = {"E5003", "E5004", 429, 503}


def backoff_delay(attempt: int, base: float = 0.2, cap: float = 20.0, rng: random.Random | None = None) -> float:
    """Seconds to sleep before attempt number `attempt` (1-based).

    Full jitter: a uniform draw between zero and the exponential bound base * 2**(attempt-1),
    capped at `cap`. Spreading the pauses out keeps many clients that failed together from
    hammering the broker again in lockstep.
    """
    bound = min(cap, base * 2 ** (attempt - 1))
    return (rng or random).uniform(0, bound)


def call_with_retries(fn: Callable[[], T], attempts: int = 6, retry_after: Callable[[Exception], float | None] = lambda e: None) -> T:
    """Call `fn` until it succeeds or `attempts` calls have failed.

    A server's Retry-After header, when present, replaces the computed delay.
    """
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - the caller decides what is retryable via `fn`
            if attempt == attempts:
                raise
            wait = retry_after(exc)
            time.sleep(wait if wait is not None else backoff_delay(attempt))
    raise AssertionError("unreachable")

"""A component known to be down: after it fails, callers skip it for a while instead of waiting on it again.

Invariant: `down()` is None until `trip()`, then the reason given for `seconds`, then None again. Thread-safe.
"""

from __future__ import annotations

import threading
import time


class Cooldown:
    """When one component last failed, and why, so that it is not asked again for `seconds`."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._lock = threading.Lock()
        self._until = 0.0
        self._why = ""

    def trip(self, why: str) -> None:
        """Mark the component down for `seconds` from now, for the reason `why`."""
        with self._lock:
            self._until, self._why = time.monotonic() + self.seconds, why

    def down(self) -> str | None:
        """Why the component failed less than `seconds` ago, or None when it may be asked."""
        with self._lock:
            return self._why if time.monotonic() < self._until else None

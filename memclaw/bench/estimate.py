"""How long a benchmark run will take, said honestly.

Before the first item the only guide is a known cost per unit of work (a haystack session, a memory), measured
on the reference machine (2 cores, bundled MiniLM through ONNX Runtime). A busy or slower machine, or an embedding
cache, can be several times off that, so after the first items the estimate is the rate measured on them.
Durations under a minute are said in seconds ("~40 s", never "~0 min").
"""

from __future__ import annotations

from dataclasses import dataclass

# Known costs on the reference machine (2 cores, bundled model, no embedding cache): only first estimates use them.
SECONDS_PER_SESSION = 1.0
"""LongMemEval: one haystack session (indexing its long text dominates): measured 0.8-1.1 s (141 sessions in
116 s; 5 questions, 240 sessions, in 260 s)."""
SECONDS_PER_MEMORY = 1 / 200
"""`bench perf` ingest: 201-291 memories/s measured on a quiet machine (45/s on a busy one)."""
SECONDS_PER_SIZE = 15.0
"""`bench perf`, per size besides the ingest: 300 warm recalls, 5 added facts, 3 cold CLI recalls (15-20 s)."""


def format_duration(seconds: float) -> str:
    """`~40 s`, `~1.5 min`, `~12 min`, `~1 h 20 min`: seconds under a minute, tenths of a minute under ten."""
    s = max(0.0, seconds)
    if s < 59.5:
        return f"~{max(1, round(s))} s"
    minutes = s / 60
    if minutes < 9.95:
        return f"~{minutes:.1f} min"
    if minutes < 59.5:
        return f"~{round(minutes)} min"
    h, m = divmod(round(minutes), 60)
    return f"~{h} h {m} min" if m else f"~{h} h"


@dataclass
class Estimate:
    """The time left of a run of `total` units of work (`unit`: what one is, for the message): `per_unit_s`
    each by the known cost (plus `fixed_s` once) until `record` has measured some; then at the measured rate."""

    total: float
    per_unit_s: float
    unit: str
    fixed_s: float = 0.0
    basis: str = "on 2 cores; measured once the first items are done"
    """Where `per_unit_s` comes from, for the message."""
    done: float = 0.0
    spent_s: float = 0.0

    def record(self, units: float, seconds: float) -> None:
        """`units` of work took `seconds` (measured)."""
        self.done += units
        self.spent_s += seconds

    def skip(self, units: float) -> None:
        """`units` of the total need no work after all (e.g. a question the protocol leaves out)."""
        self.total = max(self.done, self.total - units)

    @property
    def measured(self) -> bool:
        return self.done > 0 and self.spent_s > 0

    def remaining_s(self) -> float:
        left = max(0.0, self.total - self.done)
        if self.measured:
            return left * self.spent_s / self.done
        return self.fixed_s + left * self.per_unit_s

    def describe(self) -> str:
        """E.g. `~4.2 min (measured: 0.9 s per session)` or `~40 s (at ~1 s per session on 2 cores; measured
        once the first items are done)`."""
        if self.measured:
            return (
                f"{format_duration(self.remaining_s())} (measured: {_rate(self.spent_s / self.done)} per {self.unit})"
            )
        fixed = f" + {format_duration(self.fixed_s)[1:]}" if self.fixed_s >= 0.5 else ""
        return (
            f"{format_duration(self.remaining_s())} (at {_rate(self.per_unit_s)} per {self.unit}{fixed}, {self.basis})"
        )


def _rate(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 0.1 else f"{seconds:.2g} s"

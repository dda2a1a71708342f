"""The hybrid against each single signal, question by question (pure): on how many questions of a type it scores
higher and on how many lower, and how likely a split that uneven is by chance.

A type's mean can put the hybrid behind a signal by one question of fifty; the counts say whether the signal finds
what the hybrid misses on many questions or the two trade a few questions each way. The exact two-sided sign test
(ties left out) turns the counts into a chance: small means the difference is the rule, not noise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from math import comb
from typing import Any, TypeVar

S = TypeVar("S")

ALL = "all"
"""The group of every question."""


def sign_test(won: int, lost: int) -> float:
    """Exact two-sided sign test of `won` against `lost` (ties left out): the chance of a split at least this uneven
    when either side is equally likely on each question (1.0 when nothing differs)."""
    n = won + lost
    if n == 0:
        return 1.0
    tail = sum(comb(n, i) for i in range(min(won, lost) + 1))
    return min(1.0, 2 * tail / 2**n)


def paired_counts(
    hybrid: Sequence[S],
    singles: Mapping[str, Sequence[S]],
    *,
    group: Callable[[S], str],
    values: Callable[[S], Mapping[str, float]],
    keys: Sequence[str],
) -> dict[str, dict[str, dict[str, list[int]]]]:
    """Per single signal, per group (`ALL` and each `group(score)`), per metric key: `[won, lost]`, the questions
    where the hybrid's value is above the signal's and below it. The score lists are in the same question order;
    `values(score)` gives a question's metric values by key (a key a question lacks is left out)."""
    out: dict[str, dict[str, dict[str, list[int]]]] = {}
    # Once, not once per signal
    hybrid_values = [(group(h), values(h)) for h in hybrid]
    for name, other in singles.items():
        if len(other) != len(hybrid):
            raise ValueError(f"{name}: {len(other)} scores against the hybrid's {len(hybrid)}")
        per: dict[str, dict[str, list[int]]] = {}
        for (hg, hv), s in zip(hybrid_values, other, strict=True):
            sv = values(s)
            for g in (ALL, hg):
                cells = per.setdefault(g, {})
                for k in keys:
                    if k not in hv or k not in sv or hv[k] == sv[k]:
                        continue
                    cell = cells.setdefault(k, [0, 0])
                    cell[0 if hv[k] > sv[k] else 1] += 1
        out[name] = per
    return out


def paired_note(paired: Mapping[str, Any] | None, single: str, group: str, key: str) -> str:
    """`; per question 3 won, 4 lost, p 1.00` for one flagged cell, or "" when the run has no paired counts."""
    cell = ((paired or {}).get(single) or {}).get(group, {}).get(key)
    if not cell:
        return ""
    won, lost = cell
    return f"; per question {won} won, {lost} lost, p {sign_test(won, lost):.2f}"

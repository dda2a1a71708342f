"""What fusion may not bury (pure): a unit that one signal alone ranks r-th stays within the hybrid's first
`factor * r` (recall.keep_factor: 3 by default, 2 at the least with two signals), itself or a unit that covers it.

Fusion reorders; this final placement only makes sure it never hides what one signal found. Each unit a signal
ranks gets a deadline, `factor * r` for its best rank r over the signals. The deadline is met when the unit, or a
unit that covers it (`covered_by`: its session's history entry, which the memory section shows instead of it), is
placed by then. The fused order is kept as far as the deadlines allow: position after position, the best-fused unit
is placed unless that would leave some deadline unmeetable, in which case the best-fused unit that meets one of the
deadlines due first is. It is an earliest-deadline schedule, always feasible for `factor >= n_signals`: among the
units with a deadline <= t there are at most `floor(t / factor)` per signal, so at most `t` in all, and each can
meet its own.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence


def deadlines(signals: Sequence[Sequence[str | None]], *, factor: int, limit: int) -> dict[str, int]:
    """unit id -> the last position (1-based) by which it must be placed: `factor * r` for its best rank r over the
    signals, only where that is within `limit`. A None in a signal list is a rank with no deadline."""
    due: dict[str, int] = {}
    for ranked in signals:
        for r, uid in enumerate(ranked[: limit // factor], 1):
            d = factor * r
            if uid is not None and d < due.get(uid, limit + 1):
                due[uid] = d
    return due


def keep_signal_ranks(
    order: Sequence[str],
    signals: Sequence[Sequence[str | None]],
    *,
    factor: int = 2,
    limit: int | None = None,
    covered_by: Mapping[str, Sequence[str]] | None = None,
) -> list[str]:
    """`order` (the fused ranking, best first, ids unique) placed so that every unit a signal list ranks r-th is
    met within the first `factor * r` positions of the first `limit` (default: all): placed there itself, or one of
    its `covered_by` units is. Needs `factor >= len(signals)`. Ids a signal ranks that `order` lacks are placed as
    needed; a None in a signal list holds its rank without a deadline. Returns the first `limit` ids."""
    if factor < len(signals):
        raise ValueError(f"factor {factor} cannot keep {len(signals)} signals' ranks (it needs >= {len(signals)})")
    n = len(order) if limit is None else limit
    due = deadlines(signals, factor=factor, limit=n)
    rest = list(dict.fromkeys([*order, *due]))
    if not due:
        return rest[:n]
    meets: dict[str, list[str]] = {u: [u] for u in due}  # unit -> the pending deadlines its placement meets
    for u in due:
        for c in (covered_by or {}).get(u, ()):
            if c != u:
                meets.setdefault(c, []).append(u)
    if _already_kept(rest[:n], due, meets):
        return rest[:n]  # the usual case: fusion buried nothing
    out: list[str] = []
    pending = dict(due)
    ds = sorted(due.values())  # the pending deadlines, kept sorted
    while rest and len(out) < n:
        pos = len(out) + 1
        tight = _first_tight(ds, pos) if ds else None
        pick = 0
        if tight is not None:
            pick = next(i for i, u in enumerate(rest) if _meets_by(meets, pending, u, tight))
        u = rest.pop(pick)
        out.append(u)
        for j in meets.get(u, ()):
            d = pending.pop(j, None)
            if d is not None:
                del ds[bisect.bisect_left(ds, d)]
    return out


def _already_kept(head: Sequence[str], due: Mapping[str, int], meets: Mapping[str, Sequence[str]]) -> bool:
    """Every deadline is met by the first units as they are."""
    met: set[str] = set()
    for pos, u in enumerate(head, 1):
        for j in meets.get(u, ()):
            if j not in met:
                if due[j] < pos:
                    return False
                met.add(j)
    return len(met) == len(due)


def _meets_by(meets: Mapping[str, Sequence[str]], pending: Mapping[str, int], u: str, t: int) -> bool:
    """Placing `u` meets a pending deadline due by `t`."""
    return any(pending.get(j, t + 1) <= t for j in meets.get(u, ()))


def _first_tight(ds: Sequence[int], pos: int) -> int | None:
    """The first deadline with no slack left (as many deadlines due by it as positions from `pos` up to it)."""
    for j, t in enumerate(ds, 1):
        if t - pos + 1 == j and (j == len(ds) or ds[j] != t):
            return t
    return None

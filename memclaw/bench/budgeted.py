"""The budgeted view of one ranking: the ranked units through the prompt's memory-section fill at each budget."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from memclaw.bench import metrics as M
from memclaw.bench.systems import Ranked

if TYPE_CHECKING:
    from memclaw.context.memory_section import Candidate


def budgeted_view(ranked: Ranked, items: dict[str, Candidate], count: Callable[[str], int] | None = None) -> M.Budgeted:
    """`ranked` through memclaw.context.memory_section.fill at each of M.BUDGETS, exactly as the prompt is filled
    (memclaw.context.memory_section.fill_hits): an archived turn ranked with its excerpt's window is offered as that
    excerpt, cut to what the budget leaves (with `count`), and credited for the turns it serves."""
    from dataclasses import replace

    from memclaw.context.memory_section import candidates, fill

    cands = []
    for uid, cov, *rest in ranked:
        window = rest[0] if rest else ()
        if window and count is not None:
            unit = next(t for t in window if t.id == uid)
            cands += candidates([unit], count, {uid: cov}, {uid: window})
        else:
            cands.append(replace(items[uid], covered_by=cov))
    tokens: dict[str, float] = {f"@{k}": float(sum(c.tokens for c in cands[:k])) for k in M.TOKEN_KS}
    kept: dict[int, list[str]] = {}
    for b in M.BUDGETS:
        f = fill(cands, b, count)
        # An excerpt: the turns it serves
        kept[b] = [uid for i in f.kept for uid in f.served(i)]
        tokens[f"@{b}t"] = float(f.used)
    return M.Budgeted(kept, tokens)

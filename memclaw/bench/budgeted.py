"""The budgeted view of one ranking: the ranked units through the prompt's memory-section fill at each budget."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memclaw.bench import metrics as M
from memclaw.bench.systems import Ranked

if TYPE_CHECKING:
    from memclaw.context.memory_section import Candidate


def budgeted_view(ranked: Ranked, items: dict[str, Candidate]) -> M.Budgeted:
    """`ranked` through memclaw.context.memory_section.fill at each of M.BUDGETS, exactly as the prompt is filled."""
    from dataclasses import replace

    from memclaw.context.memory_section import fill

    cands = [replace(items[i], covered_by=cov) for i, cov in ranked]
    tokens: dict[str, float] = {f"@{k}": float(sum(c.tokens for c in cands[:k])) for k in M.TOKEN_KS}
    kept: dict[int, list[str]] = {}
    for b in M.BUDGETS:
        f = fill(cands, b)
        kept[b] = [uid for i in f.kept for uid in f.served(i)]  # (an excerpt: the turns it serves)
        tokens[f"@{b}t"] = float(f.used)
    return M.Budgeted(kept, tokens)

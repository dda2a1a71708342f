"""The per-type view of a run: per question type (LongMemEval) or category (LoCoMo), the default hybrid against the
best single signal of the run (`bm25-raw`, `vector-raw`, `vector-head`), each type where the hybrid is behind
flagged. A hybrid that ranks below one of its own signals on some type is losing to its own parts."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from memclaw.bench.paired import ALL, paired_counts, paired_note
from memclaw.bench.report import md_table

S = TypeVar("S")

SINGLE_SIGNALS: tuple[str, ...] = ("bm25-raw", "vector-raw", "vector-head")
HYBRID = "hybrid"


def behind(
    hybrid: Mapping[str, Any], singles: Mapping[str, Mapping[str, Any]], keys: Sequence[str]
) -> list[tuple[str, float, str, float]]:
    """(metric, hybrid's value, best single signal, its value) for every metric where a single signal is ahead."""
    out = []
    for k in keys:
        if k not in hybrid:
            continue
        best_name, best = max(((n, s[k]) for n, s in singles.items() if k in s), key=lambda x: x[1], default=("", 0))
        if best_name and best > hybrid[k]:
            out.append((k, hybrid[k], best_name, best))
    return out


def run_paired(
    scores: Mapping[str, Sequence[S]], *, group: Callable[[S], str], values: Callable[[S], Mapping[str, float]]
) -> dict[str, Any]:
    """A run's `paired` record (memclaw.bench.paired.paired_counts): the hybrid against each single signal of the
    run, question by question, on every metric `values` gives; empty without the hybrid or a single signal."""
    singles = {n: scores[n] for n in SINGLE_SIGNALS if n in scores}
    if HYBRID not in scores or not singles or not scores[HYBRID]:
        return {}
    keys = sorted(values(scores[HYBRID][0]))
    return paired_counts(scores[HYBRID], singles, group=group, values=values, keys=keys)


def signal_view_md(
    res: Mapping[str, Any], *, by: str, keys: Sequence[str], names: Mapping[str, str] | None = None
) -> list[str]:
    """The Markdown section: one row per type (and `all`), each metric as `hybrid / best single (which)`, and a
    `behind` column naming every metric where the hybrid is behind, with the questions it won and lost against that
    signal when the run counted them (`paired`: run_paired). Empty when the run lacks the hybrid or every single
    signal."""
    systems = res["systems"]
    singles = {n: systems[n] for n in SINGLE_SIGNALS if n in systems}
    if HYBRID not in systems or not singles:
        return []
    short = {"recall_any": "any", "recall_all": "all", "recall": "R"}
    header = ["type", "n", *[_short(k, short) for k in keys], "behind"]
    groups: list[tuple[str, str, Mapping[str, Any], dict[str, Mapping[str, Any]]]] = [
        (ALL, ALL, systems[HYBRID], singles)
    ]
    for g in systems[HYBRID][by]:
        label = f"{g} ({names[g]})" if names and g in names else g
        groups.append((label, g, systems[HYBRID][by][g], {n: s[by][g] for n, s in singles.items() if g in s[by]}))
    paired = res.get("paired")
    rows = []
    for label, gkey, hyb, sing in groups:
        cells = []
        for k in keys:
            name, best = max(((n, s[k]) for n, s in sing.items() if k in s), key=lambda x: x[1], default=("-", 0.0))
            cells.append(f"{hyb.get(k, 0.0):.3f} / {best:.3f} ({name})")
        lag = behind(hyb, sing, keys)
        flag = (
            ", ".join(
                f"**{_short(k, short)}** {h:.3f} < {v:.3f} ({n}{paired_note(paired, n, gkey, k)})" for k, h, n, v in lag
            )
            or "-"
        )
        rows.append([label, hyb.get("n", ""), *cells, flag])
    return [
        "## Hybrid against its best single signal, per type",
        "",
        f"Each cell: `{HYBRID}` / the best of {', '.join(f'`{n}`' for n in singles)} (which one). `behind` names "
        "every metric where the hybrid is below a single signal; where the run counted them, with the questions "
        "on which the hybrid scores higher (won) and lower (lost) than that signal and the exact sign test's p "
        "(a p near 1: the two trade a few questions; small: the signal finds what the hybrid misses).",
        "",
        *md_table(header, rows),
    ]


def _short(key: str, short: Mapping[str, str]) -> str:
    m, _, k = key.partition("@")
    return f"{short.get(m, m)}@{k}"

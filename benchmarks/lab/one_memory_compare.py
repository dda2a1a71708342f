"""The rank table of one run of `one_memory_ranks.py`, and a paired comparison of two runs, split-half.

    python benchmarks/lab/one_memory_compare.py BASE.json [CURRENT.json ...]

Rank table: where each question's first answer turn sits in the ranked list, by question type. Comparison: per
budget and measure (any, all), the mean on halves A, B and both, and the questions won and lost with the exact
two-sided sign test (memclaw.bench.paired.sign_test). A change is adopted on the aggregate of both halves only.
"""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from one_memory_ranks import halves  # noqa: E402

from memclaw.bench.paired import sign_test  # noqa: E402

BUCKETS = ((1, 10), (11, 40), (41, 100), (101, 300))
BUDGETS = ("128", "256", "512", "1024")


def bucket(r: int | None) -> str:
    for lo, hi in BUCKETS:
        if r is not None and lo <= r <= hi:
            return f"{lo}-{hi}"
    return "absent"


def rank_table(rows: list[dict]) -> str:
    cols = [f"{lo}-{hi}" for lo, hi in BUCKETS] + ["absent"]
    by_type: dict[str, Counter] = defaultdict(Counter)
    for r in rows:
        first = min(r["answer_turn_ranks"], default=None)
        by_type[r["type"]][bucket(first)] += 1
        by_type["all"][bucket(first)] += 1
        # the worst-placed answer session's first turn: what recall_all needs
        worst = max(r["first_rank_per_session"].values(), default=None)
        if len(r["first_rank_per_session"]) < r["n_answer_sessions"]:
            worst = None
        by_type["all (last session)"][bucket(worst)] += 1
    lines = ["| type | n | " + " | ".join(cols) + " |", "|---|---" + "|---" * len(cols) + "|"]
    for t in sorted(by_type, key=lambda x: (x.startswith("all"), x)):
        c = by_type[t]
        n = sum(c.values())
        lines.append(f"| {t} | {n} | " + " | ".join(f"{c[x]}" for x in cols) + " |")
    return "\n".join(lines)


def compare(base: list[dict], cur: list[dict]) -> str:
    b = {r["qid"]: r for r in base}
    lines = ["| measure | tokens | half | before | after | won | lost | p |", "|---|---|---|---|---|---|---|---|"]
    for m in ("any", "all"):
        for t in BUDGETS:
            for half in ("A", "B", "both"):
                pairs = [(b[r["qid"]], r) for r in cur if r["qid"] in b]
                pairs = [p for p in pairs if half == "both" or p[0]["half"] == half]
                x = [p[0][m][t] for p in pairs]
                y = [p[1][m][t] for p in pairs]
                won = sum(1 for u, v in zip(x, y, strict=True) if v > u)
                lost = sum(1 for u, v in zip(x, y, strict=True) if v < u)
                n = len(pairs) or 1
                lines.append(
                    f"| {m} | {t} | {half} | {sum(x) / n:.3f} | {sum(y) / n:.3f} | {won} | {lost} | "
                    f"{sign_test(won, lost):.3g} |"
                )
    return "\n".join(lines)


def by_type(rows: list[dict], budget: str = "1024") -> str:
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        groups[r["type"]].append(r)
    return "; ".join(
        f"{t} {sum(r['any'][budget] for r in g) / len(g):.3f} / {sum(r['all'][budget] for r in g) / len(g):.3f} "
        f"({len(g)})"
        for t, g in sorted(groups.items())
    )


def main() -> None:
    runs = [json.loads(Path(p).read_text()) for p in sys.argv[1:]]
    for run in runs:
        halves(run["rows"])
    base = runs[0]
    print(f"## {sys.argv[1]}: {base['n_sessions']} sessions, {len(base['rows'])} questions\n")
    print(rank_table(base["rows"]) + "\n")
    print("any / all at 1024 tokens by type: " + by_type(base["rows"]) + "\n")
    for path, run in zip(sys.argv[2:], runs[1:], strict=True):
        print(f"## {path} against {sys.argv[1]}\n")
        print(rank_table(run["rows"]) + "\n")
        print("any / all at 1024 tokens by type: " + by_type(run["rows"]) + "\n")
        print(compare(base["rows"], run["rows"]) + "\n")


if __name__ == "__main__":
    main()

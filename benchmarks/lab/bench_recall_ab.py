"""Warm hybrid recall latency of two memclaw checkouts, measured in one run (A/B), on `memclaw bench perf`'s
synthetic memories.

    .venv/bin/python benchmarks/lab/bench_recall_ab.py --baseline /path/to/old-checkout --sizes 10000,100000

Each checkout runs in its own child process (`ab_child.py recall`, its own `memclaw` package on PYTHONPATH) that
writes the same synthetic workspace, syncs it and times `recall_detailed` over the same queries after a warm-up
(query embedding by the real model included), as `memclaw bench perf` does. Embedding the documents is the same
work for both and is not what is compared: the first child stores every document vector it computes in a cache
file, and later children read their document vectors from it (queries are always embedded live). The order is
current, baseline, current, so drift on the machine shows as a difference between the two current runs.
"""

from __future__ import annotations

from pathlib import Path


def main() -> None:
    from ab_child import ab_args, ab_sizes, run_ab, write_report

    a = ab_args(__doc__, Path(__file__).parents[1] / "results" / "recall-ab.md").parse_args()
    rows = []
    for n, cache in ab_sizes(a):
        for name, r in run_ab("recall", a.current, a.baseline, n, cache, a.queries):
            rows.append(f"| {n} | {name} | {r['p50_ms']} | {r['p95_ms']} |")
            print(rows[-1], flush=True)
    write_report(
        a,
        "Warm recall, current code against a baseline, one run",
        f"{a.queries} queries per size after a warm-up",
        ["memories", "code", "warm recall p50 ms", "p95 ms"],
        rows,
    )


if __name__ == "__main__":
    main()

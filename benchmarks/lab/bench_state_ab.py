"""Adding one fact, warm recall and a cold `memclaw recall`, for two memclaw checkouts measured in one run (A/B), on
`memclaw bench perf`'s synthetic memories. Written for issue 18 (the index state moved from a pickle rewritten on
every write to SQLite with a log): the cost of one write at 10k and 100k memories, and what it did to reads.

    .venv/bin/python benchmarks/lab/bench_state_ab.py --baseline /path/to/old-checkout --sizes 10000,100000

Each checkout runs in its own child process (`ab_child.py state`, its own `memclaw` package on PYTHONPATH), which
writes the same synthetic workspace and syncs it, then measures, in this order:

* warm hybrid recall: p50/p95 over the same queries after a warm-up (query embedding by the real model included);
* `add_fact`: `--adds` facts added one at a time through `MemoryService.add_fact` (Markdown, embedding of the one
  fact by the real model, Chroma, BM25, the state), each timed;
* a cold `memclaw recall` in a fresh process (wall time, median of `--cold-runs`), on the index those adds left;
* the index's size on disk.

Embedding the documents is the same work for both and is not what is compared: the first child keeps every
document vector it computes in a cache file (numpy .npz read with allow_pickle=False), later children read theirs
from it; single texts (queries, added facts) are always embedded live. The order is current, baseline, current, so
drift on the machine shows as a difference between the two current runs.
"""

from __future__ import annotations

from pathlib import Path


def main() -> None:
    from ab_child import ab_args, ab_sizes, run_ab, write_report

    ap = ab_args(__doc__, Path(__file__).parents[1] / "results" / "state-ab.md")
    ap.add_argument("--adds", type=int, default=30)
    ap.add_argument("--cold-runs", type=int, default=5)
    a = ap.parse_args()
    rows = []
    for n, cache in ab_sizes(a):
        for name, r in run_ab("state", a.current, a.baseline, n, cache, a.queries, a.adds, a.cold_runs):
            rows.append(
                f"| {n} | {name} | {r['add_median_ms']} | {r['add_p90_ms']} | {r['add_max_ms']} | {r['p50_ms']} | "
                f"{r['p95_ms']} | {r['cold_s']} | {r['index_mib']} | {r['fold_ms'] or '-'} |"
            )
            print(rows[-1], flush=True)
    write_report(
        a,
        "Adding a fact, warm and cold recall: current code against a baseline, one run",
        f"{a.adds} facts added one at a time, {a.queries} recall queries after a warm-up, cold `memclaw recall` "
        f"median of {a.cold_runs}",
        [
            "memories",
            "code",
            "add_fact median ms",
            "p90 ms",
            "max ms",
            "warm recall p50 ms",
            "p95 ms",
            "cold recall s",
            "index MiB",
            "fold of the log ms",
        ],  # fmt: skip
        rows,
    )


if __name__ == "__main__":
    main()

"""`bench perf`'s results: perf.json, perf.md (the table per size, and the Chroma server table), perf.png (recall
latency against the number of memories), and the same table on the terminal."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

PERF_HEADER = (
    "memories", "warm recall p50 ms", "p95 ms", "query embed p50 ms", "ingest /s", "add_fact ms", "cold CLI recall s",
    "index MiB",
)  # fmt: skip


def perf_rows(res: dict[str, Any]) -> list[list[Any]]:
    """One row per size, in PERF_HEADER's order."""
    rows = []
    for r in res["sizes"]:
        cold = r["cold_cli_recall"]
        rows.append(
            [r["memories"], r["recall_p50_ms"], r["recall_p95_ms"], r["query_embed_p50_ms"], r["ingest_per_s"],
             r["add_fact_median_ms"], cold.get("median_s", cold.get("error")), r["index_mib"]]
        )  # fmt: skip
    return rows


def print_perf(res: dict[str, Any]) -> None:
    """The table per size on stdout (what perf.md holds first)."""
    from rich.console import Console
    from rich.table import Table

    from memclaw.bench.report import md_table

    t = Table(title=f"memclaw performance, {res['date']}")
    for i, name in enumerate(PERF_HEADER):
        t.add_column(name, justify="left" if i == 0 else "right", no_wrap=True)
    for row in perf_rows(res):
        # The .md's formatting of each cell
        cells = md_table(list(PERF_HEADER), [row])[-1].strip("| ").split(" | ")
        t.add_row(*cells)
    Console(file=sys.stdout, width=200, markup=False, emoji=False).print(t)


def perf_markdown(res: dict[str, Any]) -> str:
    from memclaw.bench.report import md_table

    m = res["machine"]
    rows = perf_rows(res)
    lines = [
        "# memclaw performance benchmark",
        "",
        f"- date: {res['date']}",
        f"- machine: {m['nproc']} cores, {m['cpu']}, {m['ram_gib']} GiB RAM, {m['os']}, Python {m['python']}",
        f"- embeddings: {res['embeddings_model']} ({res['embedder']})",
        f"- recall config: `{json.dumps(res['recall_config'])}`",
        "- memories: synthetic (seeded template grammar), 85 % MEMORY.md facts, 15 % HISTORY.md entries, one scope",
        "",
        *md_table(list(PERF_HEADER), rows),
        "",
        "Targets (issue 2): warm hybrid recall p95 <= 30 ms at 10k and <= 50 ms at 100k; ingest >= 200/s; "
        "cold CLI recall <= 3 s.",
    ]
    servers = [r for r in res["sizes"] if "server" in r]
    if servers:
        srows = []
        for r in servers:
            sv = r["server"]
            cold = sv["cold_cli_recall"]
            srows.append(
                [r["memories"], r["recall_p50_ms"], r["recall_p95_ms"], sv["recall_p50_ms"], sv["recall_p95_ms"],
                 cold.get("median_s", cold.get("error")), sv["migrate_seconds"]]
            )  # fmt: skip
        lines += [
            "",
            f"## Chroma server mode ({servers[0]['server']['url']}, `chroma run` on loopback)",
            "",
            "The same index copied to the server with `memclaw memory migrate` (no re-embedding), then recalled over "
            "HTTP with `memory.chroma_url` set; BM25 stays local.",
            "",
            *md_table(
                [
                    "memories",
                    "embedded p50 ms",
                    "embedded p95 ms",
                    "server p50 ms",
                    "server p95 ms",
                    "cold CLI recall s (server)",
                    "migrate s",
                ],
                srows,
            ),  # fmt: skip
        ]
    return "\n".join(lines) + "\n"


def write_perf_results(res: dict[str, Any], out_dir: Path) -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    from memclaw.bench.plots import perf_plot

    paths = [out_dir / "perf.json", out_dir / "perf.md", out_dir / "perf.png"]
    paths[0].write_text(json.dumps(res, indent=2) + "\n", "utf-8")
    paths[1].write_text(perf_markdown(res), "utf-8")
    perf_plot(res, paths[2])
    # perf.png is missing when matplotlib, the `plots` extra, is not installed
    return [p for p in paths if p.exists()]

"""What the approximate index misses: Chroma's HNSW graph against exact search, on vectors of real conversation, by
the graph's search breadth (`ef_search`), with the time a query takes through memclaw's store.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_ann.py --cache LME.npz --sizes 10000,50000,150000 \\
        --breadths 100,150,200,400 --workdir /tmp/ann

The vectors: a random `size` of those in `--cache`, an embedding cache the LongMemEval benchmark wrote
(`memclaw bench longmemeval --cache`: every passage, turn context and question of the haystacks it indexed; the
all-MiniLM-L6-v2 vectors of real conversation), written through memclaw's store (memclaw.store) into one collection
per size. The queries: the 249 dev questions of LongMemEval, embedded live, and 500 of the stored vectors (can the
graph find a memory from its own vector?). For each, the `k` nearest (recall asks for `recall.candidates` x 2 = 100)
as the graph returns them against the exact ones (numpy): the share of the true top 10 and top `k` found. Chroma reads
the breadth when it loads a collection's graph, so each (size, breadth) is queried by a fresh process (`--child`), the
breadths in alternating order over `--rounds`; each query is timed alone, through memclaw's read path.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

NS = "ann"
SCOPE = "owner"
OWN_QUERIES = 500


def vectors(cache: Path, size: int, seed: int = 0) -> Any:
    import numpy as np

    z = np.load(cache, allow_pickle=False)
    v = z["vectors"]
    idx = np.random.default_rng(seed).choice(len(v), size=size, replace=False)
    x = v[np.sort(idx)].astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def queries(data: Path, x: Any) -> dict[str, Any]:
    import numpy as np

    from memclaw.bench.run_config import bench_config
    from memclaw.embedding.load import encode_query, load_embedder

    emb = load_embedder(bench_config().embeddings)
    with gzip.open(data) as f:
        qs = [q["question"] for q in json.load(f)]
    q = np.asarray([encode_query(emb, t) for t in qs], dtype=np.float32)
    own = x[np.random.default_rng(1).choice(len(x), size=min(OWN_QUERIES, len(x)), replace=False)]
    return {"questions": q / np.linalg.norm(q, axis=1, keepdims=True), "own": own}


def build(path: Path, x: Any) -> float:
    """The collection at `path` (written once, kept for later runs); seconds taken."""
    from memclaw.store.clients import open_chroma_store, release_embedded

    store = open_chroma_store(path=path, namespace=NS)
    t = time.perf_counter()
    try:
        if store.count(SCOPE) == len(x):
            return 0.0
        for i in range(0, len(x), 5000):
            part = x[i : i + 5000]
            store.upsert(SCOPE, [str(j) for j in range(i, i + len(part))], part, [{}] * len(part))
        return time.perf_counter() - t
    finally:
        release_embedded(path)


def set_breadth(path: Path, ef: int) -> None:
    """Give every collection of the embedded store at `path` the search breadth `ef`, as a process of its own would
    (this process's client released before and after: Chroma reads the breadth when it loads a graph)."""
    import chromadb
    from chromadb.config import Settings

    from memclaw.store.clients import release_embedded

    release_embedded(path)
    client = chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))
    for col in client.list_collections():
        col.modify(configuration={"hnsw": {"ef_search": ef}})
    release_embedded(path)


def child(path: Path, qfile: Path, k: int) -> None:
    """Query every vector of `qfile` through memclaw's read path; print ids and times as JSON."""
    import numpy as np

    from memclaw.store.clients import open_chroma_store

    qs = np.load(qfile, allow_pickle=False)
    store = open_chroma_store(path=path, namespace=NS)
    store.warm(SCOPE)
    out: dict[str, Any] = {}
    for name in qs.files:
        ids, ms = [], []
        for q in qs[name]:
            t = time.perf_counter()
            hits = store.query(SCOPE, q, k)
            ms.append((time.perf_counter() - t) * 1000)
            ids.append([int(h.id) for h in hits])
        out[name] = {"ids": ids, "ms": ms}
    print(json.dumps(out))


def score(got: list[list[int]], exact: Any, k: int) -> dict[str, float]:
    r10 = [len(set(g[:10]) & set(e[:10].tolist())) / 10 for g, e in zip(got, exact, strict=True)]
    rk = [len(set(g) & set(e[:k].tolist())) / k for g, e in zip(got, exact, strict=True)]
    first = [bool(g) and g[0] == int(e[0]) for g, e in zip(got, exact, strict=True)]
    return {
        "recall_at_10": round(statistics.fmean(r10), 4),
        f"recall_at_{k}": round(statistics.fmean(rk), 4),
        "worst_at_10": min(r10),
        "first_exact": round(statistics.fmean(first), 4),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", type=Path)
    ap.add_argument("--data", type=Path, default=Path("../shared/data/longmemeval/lme-s-dev.json.gz"))
    ap.add_argument("--sizes", default="10000,50000,150000")
    ap.add_argument("--breadths", default="100,150,200,400")
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "ann-recall")
    ap.add_argument("--child", nargs=2, metavar=("STORE", "QUERIES"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(Path(a.child[0]), Path(a.child[1]), a.k)
    if a.cache is None or a.workdir is None:
        ap.error("--cache and --workdir are required")
    import numpy as np

    from memclaw.bench.machine import machine_info, revision
    from memclaw.bench.metrics import percentile

    a.workdir.mkdir(parents=True, exist_ok=True)
    breadths = [int(b) for b in a.breadths.split(",")]
    rows: list[dict[str, Any]] = []
    load = [os.getloadavg()]
    for size in (int(s) for s in a.sizes.split(",")):
        x = vectors(a.cache, size)
        path = a.workdir / f"store-{size}"
        built = build(path, x)
        qs = queries(a.data, x)
        qfile = a.workdir / f"queries-{size}.npz"
        np.savez(qfile, **qs)
        exact = {n: np.argsort(-(q @ x.T), axis=1, kind="stable")[:, : a.k] for n, q in qs.items()}
        runs: dict[int, list[dict[str, Any]]] = {ef: [] for ef in breadths}
        for r in range(a.rounds):
            for ef in breadths if r % 2 == 0 else breadths[::-1]:
                set_breadth(path, ef)
                res = subprocess.run(
                    [sys.executable, __file__, "--k", str(a.k), "--child", str(path), str(qfile)],
                    capture_output=True, text=True, check=True,
                )  # fmt: skip
                runs[ef].append(json.loads(res.stdout.strip().splitlines()[-1]))
        for ef in breadths:
            for name in qs:
                got = runs[ef][0][name]["ids"]
                ms = [t for run in runs[ef] for t in run[name]["ms"]]
                rows.append({"size": size, "ef_search": ef, "queries": name, "n": len(got),
                             **score(got, exact[name], a.k),
                             "ms_p50": round(percentile(ms, 50), 2), "ms_p95": round(percentile(ms, 95), 2),
                             "build_s": round(built, 1)})  # fmt: skip
                print(json.dumps(rows[-1]), flush=True)
    load.append(os.getloadavg())
    doc = {"rows": rows, "k": a.k, "rounds": a.rounds, "machine": machine_info(), "revision": revision(),
           "date": time.strftime("%Y-%m-%dT%H:%M%z"), "load_before_after": load}  # fmt: skip
    a.out.with_suffix(".json").write_text(json.dumps(doc, indent=1))
    lines = [
        f"# What the approximate index misses ({doc['date']}, revision {doc['revision']})",
        "",
        f"Machine: {doc['machine']}. Load (1/5/15 min) before {load[0]}, after {load[1]}.",
        "",
        f"| vectors | ef_search | queries | recall@10 | recall@{a.k} | worst@10 | own first | p50 ms | p95 ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['size']:,} | {r['ef_search']} | {r['queries']} ({r['n']}) | {r['recall_at_10']:.4f} | "
            f"{r[f'recall_at_{a.k}']:.4f} | {r['worst_at_10']:.1f} | {r['first_exact']:.3f} | {r['ms_p50']} | "
            f"{r['ms_p95']} |"
        )
    a.out.with_suffix(".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

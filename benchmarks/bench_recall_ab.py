"""Warm hybrid recall latency of two memclaw checkouts, measured in one run (A/B), on `memclaw bench perf`'s
synthetic memories.

    .venv/bin/python benchmarks/bench_recall_ab.py --baseline /path/to/old-checkout --sizes 10000,100000

Each checkout runs in its own child process (its own `memclaw` package on PYTHONPATH) that writes the same
synthetic workspace, syncs it and times `recall_detailed` over the same queries after a warm-up (query embedding
by the real model included), as `memclaw bench perf` does. Embedding the documents is the same work for both
and is not what is compared: the first child stores every document vector it computes in a cache file, and
later children read their document vectors from it (a numpy .npz read with allow_pickle=False; queries are
always embedded live). The order is
current, baseline, current, so drift on the machine shows as a difference between the two current runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path

CHILD = r"""
import hashlib, io, json, sys, tempfile, time
from pathlib import Path
import numpy as np
from memclaw.runtime import set_offline_env
set_offline_env()
from memclaw.bench import perf as P
from memclaw.bench.metrics import percentile
from memclaw.bench.runner import bench_config
from memclaw.embedding import load_embedder
from memclaw.memory import MemoryService
from memclaw.workspace import Workspace

n, cache_file, n_queries = int(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
cache = {}
if cache_file.exists():
    with np.load(io.BytesIO(cache_file.read_bytes()), allow_pickle=False) as data:
        cache = dict(zip(data["keys"].tolist(), data["vectors"]))
cfg = bench_config()
real = load_embedder(cfg.embeddings)

def key(t):
    return hashlib.sha1(t.encode("utf-8", "surrogatepass")).hexdigest()

class DocCache:
    # The real embedder, but document vectors computed once per A/B run (queries go to the model).
    def __init__(self, inner):
        self._inner = inner
    def __getattr__(self, name):
        return getattr(self._inner, name)
    def encode(self, texts, *, batch_size=64, progress=None):
        texts = list(texts)
        if len(texts) == 1 and key(texts[0]) not in cache:
            return self._inner.encode(texts, batch_size=batch_size)
        todo = [t for t in dict.fromkeys(texts) if key(t) not in cache]
        if todo:
            for t, v in zip(todo, self._inner.encode(todo, batch_size=batch_size, progress=progress)):
                cache[key(t)] = np.asarray(v, dtype=np.float32)
        return np.stack([cache[key(t)] for t in texts])

facts, hist = P.synthetic_memories(n)
queries = P.synthetic_queries(n_queries)
root = Path(tempfile.mkdtemp(prefix=f"memclaw-ab-{n}-")) / "ws"
P.write_workspace(root, facts, hist)
svc = MemoryService(Workspace(root), cfg, embedder=DocCache(real))
svc.sync()
if not cache_file.exists():
    buf = io.BytesIO()
    keys = list(cache)
    np.savez(buf, keys=np.array(keys, dtype="U40"), vectors=np.stack([cache[k] for k in keys]))
    cache_file.write_bytes(buf.getvalue())
lat, _ = P.warm_latencies(svc, queries)
print(json.dumps({"n": n, "p50_ms": round(percentile(lat, 50), 2), "p95_ms": round(percentile(lat, 95), 2)}))
"""


def child(repo: Path, n: int, cache: Path, n_queries: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(repo), "MEMCLAW_HOME": tempfile.mkdtemp(prefix="memclaw-ab-home-")}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(n), str(cache), str(n_queries)],
        env=env,
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"child for {repo} at {n} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", type=Path, required=True, help="checkout of the code to compare against")
    ap.add_argument("--current", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "recall-ab.md")
    ap.add_argument(
        "--cache-dir", type=Path, default=None, help="keep the document vectors here between runs (default: a temp dir)"
    )
    a = ap.parse_args()
    from memclaw.bench.runner import machine_info

    def rev(repo: Path) -> str:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True
        ).stdout.strip()

    rows = []
    for n in [int(x) for x in a.sizes.split(",")]:
        cache = (a.cache_dir or Path(tempfile.mkdtemp(prefix="memclaw-ab-cache-"))) / f"docs-{n}.npz"
        cache.parent.mkdir(parents=True, exist_ok=True)
        runs = [("current", child(a.current, n, cache, a.queries))]
        runs.append(("baseline", child(a.baseline, n, cache, a.queries)))
        runs.append(("current (again)", child(a.current, n, cache, a.queries)))
        for name, r in runs:
            rows.append(f"| {n} | {name} | {r['p50_ms']} | {r['p95_ms']} |")
            print(rows[-1], flush=True)
    m = machine_info()
    text = "\n".join(
        [
            "# Warm recall, current code against a baseline, one run",
            "",
            f"- date: {datetime.now().astimezone().isoformat(timespec='seconds')}",
            f"- machine: {m['nproc']} cores, {m['cpu']}, {m['ram_gib']} GiB RAM, Python {m['python']}",
            f"- current: {rev(a.current)}; baseline: {rev(a.baseline)}; {a.queries} queries per size after a warm-up",
            "- method: `benchmarks/bench_recall_ab.py` (docstring); synthetic memories of `memclaw bench perf`",
            "",
            "| memories | code | warm recall p50 ms | p95 ms |",
            "|---|---|---|---|",
            *rows,
            "",
        ]
    )
    a.out.write_text(text, "utf-8")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()

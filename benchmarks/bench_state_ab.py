"""Adding one fact, warm recall and a cold `memclaw recall`, for two memclaw checkouts measured in one run (A/B), on
`memclaw bench perf`'s synthetic memories. Written for issue 18 (the index state moved from a pickle rewritten on
every write to SQLite with a log): the cost of one write at 10k and 100k memories, and what it did to reads.

    .venv/bin/python benchmarks/bench_state_ab.py --baseline /path/to/old-checkout --sizes 10000,100000

Each checkout runs in its own child process (its own `memclaw` package on PYTHONPATH), which writes the same
synthetic workspace and syncs it, then measures, in this order:

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

import argparse
import json
import os
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path

CHILD = r"""
import hashlib, io, json, random, statistics, sys, tempfile, time
from pathlib import Path
import numpy as np
from memclaw.runtime import set_offline_env
set_offline_env()
import memclaw
from memclaw.bench import perf as P
from memclaw.bench.metrics import percentile
from memclaw.bench.runner import bench_config
from memclaw.embedding import load_embedder
from memclaw.memory import MemoryService
from memclaw.workspace import Workspace

n, cache_file, n_queries, n_adds, cold_runs = int(sys.argv[1]), Path(sys.argv[2]), *map(int, sys.argv[3:6])
cache = {}
if cache_file.exists():
    with np.load(io.BytesIO(cache_file.read_bytes()), allow_pickle=False) as data:
        cache = dict(zip(data["keys"].tolist(), data["vectors"]))
cfg = bench_config()
real = load_embedder(cfg.embeddings)

def key(t):
    return hashlib.sha1(t.encode("utf-8", "surrogatepass")).hexdigest()

class DocCache:
    # The real embedder, but document vectors computed once per A/B run (single texts go to the model).
    def __init__(self, inner):
        self._inner = inner
    def __getattr__(self, name):
        return getattr(self._inner, name)
    def encode(self, texts, *, batch_size=64, progress=None):
        texts = list(texts)
        if len(texts) == 1:
            return self._inner.encode(texts, batch_size=batch_size)
        todo = [t for t in dict.fromkeys(texts) if key(t) not in cache]
        if todo:
            for t, v in zip(todo, self._inner.encode(todo, batch_size=batch_size, progress=progress)):
                cache[key(t)] = np.asarray(v, dtype=np.float32)
        if progress:
            progress(len(texts) - len(todo))
        return np.stack([cache[key(t)] for t in texts])

facts, hist = P.synthetic_memories(n)
queries = P.synthetic_queries(n_queries)
tmp = Path(tempfile.mkdtemp(prefix=f"memclaw-state-ab-{n}-"))
root = tmp / "ws"
P.write_workspace(root, facts, hist)
svc = MemoryService(Workspace(root), cfg, embedder=DocCache(real))
t0 = time.perf_counter()
svc.sync()
sync_s = time.perf_counter() - t0
if not cache_file.exists():
    buf = io.BytesIO()
    keys = list(cache)
    np.savez(buf, keys=np.array(keys, dtype="U40"), vectors=np.stack([cache[k] for k in keys]))
    cache_file.write_bytes(buf.getvalue())
lat, _ = P.warm_latencies(svc, queries)
add_ms = []
for i in range(n_adds):
    text = f"State probe {i}: " + P._fill(random.Random(1000 + i), P.FACT_TEMPLATES[i % len(P.FACT_TEMPLATES)])
    t = time.perf_counter()
    svc.add_fact(text)
    add_ms.append((time.perf_counter() - t) * 1000)
svc.close()
home = tmp / "home"
home.mkdir()
cold = P.cold_recall(root, home, queries[0], runs=cold_runs)
index = Path(cfg.memory.index_dir or Workspace(root).index_dir)
add_ms_sorted = sorted(add_ms)
print(json.dumps({
    "n": n,
    "package": str(Path(memclaw.__file__).parent.parent),
    "sync_s": round(sync_s, 1),
    "p50_ms": round(percentile(lat, 50), 2),
    "p95_ms": round(percentile(lat, 95), 2),
    "add_median_ms": round(statistics.median(add_ms), 1),
    "add_mean_ms": round(statistics.mean(add_ms), 1),
    "add_p90_ms": round(add_ms_sorted[int(0.9 * (len(add_ms_sorted) - 1))], 1),
    "add_max_ms": round(max(add_ms), 1),
    "cold_s": cold.get("median_s", cold.get("error")),
    "cold_runs_s": cold.get("runs_s"),
    "index_mib": round(P.dir_size(index) / 2**20, 1),
}))
"""


def child(repo: Path, n: int, cache: Path, a: argparse.Namespace) -> dict:
    env = {**os.environ, "PYTHONPATH": str(repo), "MEMCLAW_HOME": tempfile.mkdtemp(prefix="memclaw-ab-home-")}
    args = [str(n), str(cache), str(a.queries), str(a.adds), str(a.cold_runs)]
    out = subprocess.run(
        [sys.executable, "-c", CHILD, *args], env=env, cwd=repo, capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"child for {repo} at {n} failed:\n{out.stderr[-3000:]}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    if Path(r["package"]).resolve() != repo.resolve():
        raise SystemExit(f"the child for {repo} imported memclaw from {r['package']}")
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", type=Path, required=True, help="checkout of the code to compare against")
    ap.add_argument("--current", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--adds", type=int, default=30)
    ap.add_argument("--cold-runs", type=int, default=5)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "state-ab.md")
    ap.add_argument("--cache-dir", type=Path, default=None, help="keep the document vectors here between runs")
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
        runs = [("current", child(a.current, n, cache, a))]
        runs.append(("baseline", child(a.baseline, n, cache, a)))
        runs.append(("current (again)", child(a.current, n, cache, a)))
        for name, r in runs:
            rows.append(
                f"| {n} | {name} | {r['add_median_ms']} | {r['add_p90_ms']} | {r['add_max_ms']} | {r['p50_ms']} | "
                f"{r['p95_ms']} | {r['cold_s']} | {r['index_mib']} |"
            )
            print(rows[-1], flush=True)
    m = machine_info()
    text = "\n".join(
        [
            "# Adding a fact, warm and cold recall: current code against a baseline, one run",
            "",
            f"- date: {datetime.now().astimezone().isoformat(timespec='seconds')}",
            f"- machine: {m['nproc']} cores, {m['cpu']}, {m['ram_gib']} GiB RAM, Python {m['python']}",
            f"- current: {rev(a.current)}; baseline: {rev(a.baseline)}; {a.adds} facts added one at a time, "
            f"{a.queries} recall queries after a warm-up, cold `memclaw recall` median of {a.cold_runs}",
            "- method: `benchmarks/bench_state_ab.py` (docstring); synthetic memories of `memclaw bench perf`",
            "",
            "| memories | code | add_fact median ms | p90 ms | max ms | warm recall p50 ms | p95 ms | cold recall s "
            "| index MiB |",
            "|---|---|---|---|---|---|---|---|---|",
            *rows,
            "",
        ]
    )
    a.out.write_text(text, "utf-8")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()

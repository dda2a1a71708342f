"""Embedding benchmark: query latency, throughput and cold start of the ONNX and torch backends.

    python benchmarks/bench_embedding.py [--quick]

Writes benchmarks/results/embedding.md (machine, date, numbers). Uses the bundled all-MiniLM-L6-v2; the ONNX
export is made first if it is not cached yet.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from memclaw.runtime import set_offline_env  # noqa: E402

set_offline_env()

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memclaw.config import EmbeddingsConfig  # noqa: E402
from memclaw.embedding.load import load_embedder  # noqa: E402

_WORDS = (
    "the a my our we I you she he they it meeting project dinner mother sister friend doctor appointment "
    "tuesday friday morning evening yesterday tomorrow week month year budget plan trip berlin paris office "
    "coffee tea book movie garden car train flight hotel birthday gift call email report deadline team "
    "manager client code bug release server database memory recall note idea music guitar run gym pizza "
    "salad recipe kitchen weather rain sun cold warm happy tired busy moved started finished bought visited "
    "called asked said told wrote read watched played cooked cleaned fixed broke lost found loves hates "
    "prefers wants needs remembers forgot about with for from into over under after before during because"
)
WORDS = _WORDS.split()


def _texts(n: int, words: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "." for _ in range(n)]


def _pct(xs: list[float], p: float) -> float:
    return float(np.percentile(np.asarray(xs) * 1000.0, p))


def _query_latency(emb, n: int) -> dict[str, float]:
    queries = [q.rstrip(".") + "?" for q in _texts(n, 7, seed=1)]
    emb.encode(queries[:5])
    lat = []
    for q in queries:
        t = time.perf_counter()
        emb.encode([q])
        lat.append(time.perf_counter() - t)
    return {"p50_ms": _pct(lat, 50), "p95_ms": _pct(lat, 95), "n": n}


def _throughput(emb, n: int, words: int, batch_size: int = 64) -> float:
    texts = _texts(n, words, seed=words)
    emb.encode(texts[:batch_size], batch_size=batch_size)
    t = time.perf_counter()
    emb.encode(texts, batch_size=batch_size)
    return n / (time.perf_counter() - t)


_COLD = """
import time, sys
t0 = time.perf_counter()
from memclaw.config import EmbeddingsConfig
from memclaw.embedding.load import load_embedder
t1 = time.perf_counter()
e = load_embedder(EmbeddingsConfig(backend=sys.argv[1]))
t2 = time.perf_counter()
e.encode(["what did I eat yesterday?"])
t3 = time.perf_counter()
import json
print(json.dumps({"import": t1 - t0, "load": t2 - t1, "first_encode": t3 - t2, "torch": "torch" in sys.modules}))
"""


def _cold(backend: str, runs: int) -> dict[str, float]:
    rows = []
    for _ in range(runs):
        t = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", _COLD, backend], capture_output=True, text=True, cwd=ROOT, check=True
        )
        wall = time.perf_counter() - t
        row = json.loads(out.stdout.strip().splitlines()[-1])
        row["process_wall"] = wall
        rows.append(row)
    return {k: float(np.median([r[k] for r in rows])) for k in ("import", "load", "first_encode", "process_wall")} | {
        "torch_imported": bool(rows[0]["torch"]),
        "runs": runs,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer iterations")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "embedding.md")
    args = ap.parse_args()
    nq, n20, n200, runs = (50, 128, 64, 2) if args.quick else (300, 512, 192, 5)

    onnx = load_embedder(EmbeddingsConfig(backend="onnx"))
    results: dict[str, dict] = {}
    results["onnx"] = {
        "query": _query_latency(onnx, nq),
        "tps_20w": _throughput(onnx, n20, 20),
        "tps_200w": _throughput(onnx, n200, 200),
    }
    results["onnx"]["cold"] = _cold("onnx", runs)
    torch_emb = load_embedder(EmbeddingsConfig(backend="torch"))
    results["torch"] = {
        "query": _query_latency(torch_emb, nq),
        "tps_20w": _throughput(torch_emb, n20, 20),
        "tps_200w": _throughput(torch_emb, n200, 200),
    }
    results["torch"]["cold"] = _cold("torch", max(1, runs // 2))
    a, b = onnx.encode(_texts(64, 30, 7)), torch_emb.encode(_texts(64, 30, 7))
    diff = float(np.abs(a - b).max())

    load = os.getloadavg()
    lines = [
        "# Embedding benchmark (all-MiniLM-L6-v2)",
        "",
        f"- date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, {platform.processor() or platform.platform()}",
        f"- python {platform.python_version()}; load average at end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
        f"- onnx export: {onnx.manifest['exporter']}, opset {onnx.manifest['opset']}, "
        f"max abs diff vs torch at export {onnx.manifest['max_abs_diff']:.1e}; here on 64 texts {diff:.1e}",
        f"- command: `python benchmarks/bench_embedding.py{' --quick' if args.quick else ''}`",
        "",
        "| backend | query p50 ms | query p95 ms | texts/s (20 words) | texts/s (200 words) "
        "| cold: import s | cold: load s | cold: first encode s | cold: process wall s | torch imported |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        c = r["cold"]
        lines.append(
            f"| {name} | {r['query']['p50_ms']:.1f} | {r['query']['p95_ms']:.1f} | {r['tps_20w']:.0f} "
            f"| {r['tps_200w']:.0f} | {c['import']:.2f} | {c['load']:.2f} | {c['first_encode']:.3f} "
            f"| {c['process_wall']:.2f} | {c['torch_imported']} |"
        )
    lines += [
        "",
        f"Query latency: {nq} single 7-word queries, one at a time. Throughput: batch 64, {n20} texts of 20 words, "
        f"{n200} texts of 200 words (~260 tokens, truncated to 256). Cold: a fresh Python process importing "
        f"memclaw.embedding.load, loading the model and encoding one query (median of {runs} runs for ONNX; "
        "cold torch runs = half). `import` covers memclaw.config + memclaw.embedding.load.",
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

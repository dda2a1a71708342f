"""Cold and warm recall on a year-sized store (issue 41, deliverable 4): build the store, then measure.

    PYTHONPATH=. nice -n 5 .venv/bin/python benchmarks/bench_cold_recall.py build --workdir W [--sessions N]
    PYTHONPATH=. nice -n 5 .venv/bin/python benchmarks/bench_cold_recall.py measure --workdir W \\
        --baseline /path/to/old-checkout [--runs 3]

`build` archives the distinct sessions of every LongMemEval dev haystack (9,385 sessions, 97k turns) into one
workspace through memclaw's writer, as `bench_lme_scale.py` does, and syncs it. Embedding a year takes hours on 2
cores, and cost needs the store's size, not its semantics: every document vector is a random unit vector (seeded by
the text), stored under the real model's fingerprint. The query is embedded by the real model at recall. Chroma's
graph, the unit table and BM25 have the same size and shape whatever the vectors' values, so load time and memory
do not depend on them (graph search time may differ a little: random vectors are harder for HNSW, not easier).

`measure` runs, alternated in one run (A, B, A, B, ...), a cold `memclaw recall` (a fresh process, page cache warm)
of each checkout on the same store: wall, CPU and peak RSS, median of `--runs`; then warm recall p50/p95 (query
embedding included) of each checkout in a fresh process over `--queries` questions; and checks that both
checkouts return the same hits for every question. Writes `--out` (JSON) for benchmarks/results/cold-recall-year.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent.parent / "shared" / "data" / "longmemeval" / "lme-s-dev.json.gz"


class RandomDocEmbedder:
    """The real model's identity and its query embedding, with random unit vectors for every batch of documents."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def encode(self, texts: Sequence[str], *, batch_size: int = 64, progress: Any = None) -> np.ndarray:
        seed = hashlib.sha1("\0".join(texts).encode("utf-8", "surrogatepass")).digest()
        rng = np.random.default_rng(int.from_bytes(seed[:8], "little"))
        v = rng.standard_normal((len(texts), self._inner.dim)).astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        if progress is not None:
            progress(len(texts))
        return v


def build(workdir: Path, data: Path, sessions: int | None) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_lme_scale import build as build_scale
    from bench_lme_scale import questions

    from memclaw.bench.run_config import bench_config
    from memclaw.embedding.load import load_embedder

    qs = questions(data)
    if sessions:
        # Whole questions, in file order, until their distinct sessions reach the cap
        seen: set[str] = set()
        keep = []
        for q in qs:
            if len(seen) >= sessions:
                break
            keep.append(q)
            seen.update(s.session_id for s in q.sessions)
        qs = keep
    t = time.perf_counter()
    info = build_scale(workdir / "workspace", qs, RandomDocEmbedder(load_embedder(bench_config().embeddings)))
    info["build_s"] = round(time.perf_counter() - t, 1)
    info["questions"] = len(qs)
    # every question of the file, whether its haystack is in the store or not: cost and identity need queries only
    (workdir / "questions.json").write_text(json.dumps([q.question for q in questions(data)]), "utf-8")
    return info


# Runs argv[2:] with stdout to the file argv[1]; prints its wall time, CPU time and peak RSS. A child's peak RSS
# starts at its parent's, so the measured process is forked by this small launcher, never by the benchmark.
LAUNCHER = """
import json, os, subprocess, sys, time
t = time.perf_counter()
with open(sys.argv[1], "wb") as out:
    p = subprocess.Popen(sys.argv[2:], stdout=out, stderr=subprocess.PIPE)
    err = p.stderr.read()
    _pid, status, ru = os.wait4(p.pid, 0)
print(json.dumps({"code": os.waitstatus_to_exitcode(status), "wall_s": time.perf_counter() - t,
                  "cpu_s": ru.ru_utime + ru.ru_stime, "maxrss_kb": ru.ru_maxrss,
                  "err": err.decode("utf-8", "replace")[-600:]}))
"""


def side_env(checkout: Path, home: Path) -> dict[str, str]:
    return {**os.environ, "MEMCLAW_HOME": str(home), "PYTHONPATH": str(checkout)}


def cold_once(checkout: Path, ws: Path, home: Path, query: str) -> dict[str, Any]:
    """One `memclaw recall --json` in a fresh process of `checkout`: wall, CPU, peak RSS and the hit ids."""
    out = home / "recall.json"
    cmd = [sys.executable, "-m", "memclaw.cli.main", "recall", query, "--workspace", str(ws), "--json"]
    p = subprocess.run([sys.executable, "-c", LAUNCHER, str(out), *cmd], env=side_env(checkout, home),
                       capture_output=True, text=True, check=True, cwd=str(home))  # fmt: skip
    got = json.loads(p.stdout.strip().splitlines()[-1])
    if got["code"] != 0:
        raise SystemExit(f"{checkout}: exit {got['code']}: {got['err']}")
    hits = json.loads(out.read_text("utf-8"))
    return {"wall_s": got["wall_s"], "cpu_s": got["cpu_s"], "rss_mb": got["maxrss_kb"] / 1024,
            "ids": [h["unit"]["id"] if "unit" in h else h.get("id") for h in hits]}  # fmt: skip


def _load(ws: Path) -> tuple[Any, Any]:
    """The configuration and the workspace, as `memclaw recall --workspace ws` reads them."""
    from memclaw.config import load_config
    from memclaw.workspace import resolve_workspace

    cfg = load_config()
    return cfg, resolve_workspace(cfg, ws)


def warm_child(ws: Path, queries_file: Path) -> None:
    """In this process: recall every question over the store (after a warm-up of 10), as `memclaw recall` does
    (the default configuration, the query embedded by the real model); print latencies and hit ids (JSON)."""
    from memclaw.service.facade import MemoryService

    cfg, workspace = _load(ws)
    svc = MemoryService(workspace, cfg)
    qs = json.loads(queries_file.read_text("utf-8"))
    for q in qs[:10]:
        svc.recall_detailed(q)
    ms, cpu, embed, ids = [], [], [], []
    for q in qs:
        t, c = time.perf_counter(), time.process_time()
        res = svc.recall_detailed(q)
        ms.append((time.perf_counter() - t) * 1000)
        # the process's CPU time (every thread's): what a loaded machine's waiting does not inflate
        cpu.append((time.process_time() - c) * 1000)
        embed.append(res.timings_ms.get("embed", 0.0))
        ids.append([h.unit.id for h in res.hits])
    svc.close()
    print(json.dumps({"ms": ms, "cpu_ms": cpu, "embed_ms": embed, "ids": ids}))


def _mem() -> dict[str, float]:
    """This process's resident set now and its peak since the last reset (MB, from /proc)."""
    got = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM"):
            got[k] = int(v.split()[0]) / 1024
    return {"rss_mb": round(got["VmRSS"], 1), "peak_mb": round(got["VmHWM"], 1)}


def breakdown(ws: Path, query: str) -> None:
    """In this (fresh) process, the stages of a cold hybrid recall one after the other, each with its wall and CPU
    time, the resident set after it and the peak during it (the peak is reset before each stage); then the sizes
    of what the scope holds. Prints JSON."""
    stages: list[dict[str, Any]] = []

    def stage(name: str, fn: Any) -> Any:
        Path("/proc/self/clear_refs").write_text("5")
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        stages.append({"stage": name, "wall_s": round(time.perf_counter() - t, 3),
                       "cpu_s": round(time.process_time() - c, 3), **_mem()})  # fmt: skip
        return out

    stages.append({"stage": "python", **_mem()})

    def imports() -> Any:
        from memclaw.service.facade import MemoryService

        return _load, MemoryService

    load, service = stage("imports (config, service)", imports)
    cfg, workspace = stage("config", lambda: load(ws))
    svc = service(workspace, cfg)
    stage("embedding model", lambda: svc.embedder)
    sc = stage("scope state (unit table, BM25)", lambda: svc.scopes.get("owner"))
    stage("first BM25 recall (turn contexts, dates)", lambda: svc.recall_detailed(query, mode="bm25"))
    stage("vector store open", lambda: svc.store)
    from memclaw.embedding.load import encode_query

    qv = encode_query(svc.embedder, query)
    stage("first vector query (the graph loaded)", lambda: svc.store.query("owner", qv, 10))
    stage("hybrid recall", lambda: svc.recall_detailed(query))
    table, lex = sc.state.units, sc.lexical
    sizes = {"units": len(table), "bm25_docs": len(lex), "bm25_postings": int(len(lex._f_slots)),
             "bm25_arrays_mb": round(sum(a.nbytes for a in (lex._f_slots, lex._f_tfs, lex._lens)) / 2**20, 1),
             "texts_lazy": type(table.columns["texts"]).__name__}  # fmt: skip
    svc.close()
    print(json.dumps({"stages": stages, "sizes": sizes}))


def measure(workdir: Path, checkouts: dict[str, Path], runs: int, n_queries: int, seed: int) -> dict[str, Any]:
    """Cold runs alternated A, B, A, B...; then one warm process per side (alternated too); and the hits compared."""
    import random
    import tempfile

    from memclaw.bench.metrics import percentile

    ws = workdir / "workspace"
    qs = json.loads((workdir / "questions.json").read_text("utf-8"))
    random.Random(seed).shuffle(qs)
    qs = qs[:n_queries]
    homes = {k: Path(tempfile.mkdtemp(prefix=f"memclaw-cold-{k}-")) for k in checkouts}
    cold: dict[str, list[dict[str, Any]]] = {k: [] for k in checkouts}
    # one untimed run each: the page cache holds the store, as it does for the timed runs
    for k, c in checkouts.items():
        cold_once(c, ws, homes[k], qs[0])
    for i in range(runs):
        for k, c in checkouts.items():
            r = cold_once(c, ws, homes[k], qs[i % len(qs)])
            cold[k].append(r)
            print(k, "cold", {x: round(y, 3) for x, y in r.items() if x != "ids"}, flush=True)
    # warm: the questions in two halves, each run by A then B in a fresh process, so drift hits both sides alike
    warm: dict[str, Any] = {k: {"ms": [], "cpu_ms": [], "embed_ms": [], "ids": []} for k in checkouts}
    half = (len(qs) + 1) // 2
    for part, chunk in enumerate((qs[:half], qs[half:])):
        pfile = workdir / f"measure-questions-{part}.json"
        pfile.write_text(json.dumps(chunk), "utf-8")
        for k, c in checkouts.items():
            cmd = [sys.executable, __file__, "warm-child", "--workspace", str(ws), "--queries", str(pfile)]
            p = subprocess.run(cmd, env=side_env(c, homes[k]), capture_output=True, text=True, check=True,
                               cwd=str(homes[k]))  # fmt: skip
            got = json.loads(p.stdout.strip().splitlines()[-1])
            for key, values in got.items():
                warm[k][key] += values
    out: dict[str, Any] = {"n_queries": len(qs), "runs": runs, "sides": {}}
    for k in checkouts:
        cs = cold[k]
        out["sides"][k] = {
            "checkout": str(checkouts[k]),
            "cold_wall_s": round(statistics.median(r["wall_s"] for r in cs), 3),
            "cold_cpu_s": round(statistics.median(r["cpu_s"] for r in cs), 3),
            "cold_rss_mb": round(statistics.median(r["rss_mb"] for r in cs), 1),
            "cold_rss_max_mb": round(max(r["rss_mb"] for r in cs), 1),
            "cold_runs": [{x: round(y, 3) for x, y in r.items() if x != "ids"} for r in cs],
            "warm_p50_ms": round(percentile(warm[k]["ms"], 50), 1),
            "warm_p95_ms": round(percentile(warm[k]["ms"], 95), 1),
            "warm_cpu_p50_ms": round(percentile(warm[k]["cpu_ms"], 50), 1),
            "warm_cpu_p95_ms": round(percentile(warm[k]["cpu_ms"], 95), 1),
            "warm_embed_p50_ms": round(percentile(warm[k]["embed_ms"], 50), 1),
        }
    names = list(checkouts)
    if len(names) == 2:
        a, b = (warm[n]["ids"] for n in names)
        out["same_hits"] = sum(x == y for x, y in zip(a, b, strict=True))
        out["cold_same_hits"] = all(x["ids"] == y["ids"] for x, y in zip(cold[names[0]], cold[names[1]], strict=True))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--workdir", type=Path, required=True)
    b.add_argument("--data", type=Path, default=DATA)
    b.add_argument("--sessions", type=int)
    m = sub.add_parser("measure")
    m.add_argument("--workdir", type=Path, required=True)
    m.add_argument("--baseline", type=Path, help="another checkout, measured as side A (this one is B)")
    m.add_argument("--runs", type=int, default=3)
    m.add_argument("--queries", type=int, default=300)
    m.add_argument("--seed", type=int, default=41)
    m.add_argument("--out", type=Path)
    k = sub.add_parser("breakdown")
    k.add_argument("--workspace", type=Path, required=True)
    k.add_argument("--query", default="What did I buy for my sister's birthday?")
    w = sub.add_parser("warm-child")
    w.add_argument("--workspace", type=Path, required=True)
    w.add_argument("--queries", type=Path, required=True)
    a = ap.parse_args()
    if a.cmd == "breakdown":
        return breakdown(a.workspace, a.query)
    if a.cmd == "warm-child":
        return warm_child(a.workspace, a.queries)
    if a.cmd == "measure":
        from memclaw.bench.machine import machine_info, revision

        sides = {"A": a.baseline, "B": ROOT} if a.baseline else {"B": ROOT}
        doc = measure(a.workdir, sides, a.runs, a.queries, a.seed)
        doc |= {"machine": machine_info(), "revision": revision(), "date": time.strftime("%Y-%m-%dT%H:%M%z"),
                "load": os.getloadavg()}  # fmt: skip
        print(json.dumps({k: v for k, v in doc.items()}, indent=1), flush=True)
        if a.out:
            a.out.write_text(json.dumps(doc, indent=1), "utf-8")
        return None
    if a.cmd == "build":
        print(json.dumps(build(a.workdir, a.data, a.sessions)), flush=True)


if __name__ == "__main__":
    main()

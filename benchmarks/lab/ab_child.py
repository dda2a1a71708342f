"""The child process of the A/B benchmarks (`bench_recall_ab.py`, `bench_state_ab.py`): one checkout's memclaw,
imported from PYTHONPATH, measured on `memclaw bench perf`'s synthetic memories.

    python benchmarks/lab/ab_child.py recall|state N CACHE_FILE QUERIES [ADDS COLD_RUNS]

Prints one JSON line. `recall`: warm hybrid recall p50/p95 after syncing N memories. `state` adds, in this order:
`ADDS` facts added one at a time through `MemoryService.add_fact` (each timed), the cost of folding the state's log
into its snapshot (where the code has one: the scope state), a cold `memclaw recall` in a fresh process on the
index left (median of COLD_RUNS) and the index's size on disk.

Document vectors are computed once per A/B run: the first child keeps every one it computes in CACHE_FILE (a numpy
.npz of sha1 keys and vectors, read with allow_pickle=False), later children read theirs from it. A single text (a
query, an added fact) always goes to the real model, so the latencies include its embedding.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import numpy as np


def ab_args(doc: str, default_out: Path) -> argparse.ArgumentParser:
    """The options both A/B scripts take."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--baseline", type=Path, required=True, help="checkout of the code to compare against")
    ap.add_argument("--current", type=Path, default=Path(__file__).resolve().parents[2])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--out", type=Path, default=default_out)
    ap.add_argument("--cache-dir", type=Path, default=None, help="keep the document vectors here between runs")
    return ap


def ab_sizes(a: argparse.Namespace) -> list[tuple[int, Path]]:
    """(size, its document-vector cache file) per --sizes."""
    out = []
    for n in [int(x) for x in a.sizes.split(",")]:
        cache = (a.cache_dir or Path(tempfile.mkdtemp(prefix="memclaw-ab-cache-"))) / f"docs-{n}.npz"
        cache.parent.mkdir(parents=True, exist_ok=True)
        out.append((n, cache))
    return out


def write_report(a: argparse.Namespace, title: str, setup: str, header: list[str], rows: list[str]) -> None:
    """The results file: title, date, machine, revisions, method, one table."""
    machine_info = (_module("memclaw.bench.machine") or _module("memclaw.bench.runner")).machine_info
    m = machine_info()
    text = "\n".join([
        f"# {title}", "",
        f"- date: {datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"- machine: {m['nproc']} cores, {m['cpu']}, {m['ram_gib']} GiB RAM, Python {m['python']}",
        f"- current: {git_rev(a.current)}; baseline: {git_rev(a.baseline)}; {setup}",
        f"- method: `benchmarks/lab/{Path(sys.argv[0]).name}` (docstring);"
        " synthetic memories of `memclaw bench perf`", "",
        "| " + " | ".join(header) + " |", "|" + "---|" * len(header), *rows, "",
    ])  # fmt: skip
    a.out.write_text(text, "utf-8")
    print(f"wrote {a.out}")


def run_ab(mode: str, current: Path, baseline: Path, n: int, cache: Path, *args: object) -> list[tuple[str, dict]]:
    """This child for current, baseline, current again (drift on the machine shows between the two current runs),
    in one run: [(name, its JSON)]."""
    return [(name, _run(mode, repo, n, cache, *args)) for name, repo in
            (("current", current), ("baseline", baseline), ("current (again)", current))]  # fmt: skip


def _run(mode: str, repo: Path, n: int, cache: Path, *args: object) -> dict:
    env = {**os.environ, "PYTHONPATH": str(repo), "MEMCLAW_HOME": tempfile.mkdtemp(prefix="memclaw-ab-home-")}
    cmd = [sys.executable, str(Path(__file__).resolve()), mode, str(n), str(cache), *map(str, args)]
    out = subprocess.run(cmd, env=env, cwd=repo, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"child for {repo} at {n} failed:\n{out.stderr[-3000:]}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    if Path(r["package"]).resolve() != Path(repo).resolve():
        raise SystemExit(f"the child for {repo} imported memclaw from {r['package']}")
    return r


def git_rev(repo: Path) -> str:
    return subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True
    ).stdout.strip()


def _key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()


def load_cache(path: Path) -> dict[str, np.ndarray]:
    if not path.exists():
        return {}
    with np.load(io.BytesIO(path.read_bytes()), allow_pickle=False) as data:
        return dict(zip(data["keys"].tolist(), data["vectors"], strict=True))


def save_cache(path: Path, cache: dict[str, np.ndarray]) -> None:
    keys = list(cache)
    buf = io.BytesIO()
    np.savez(buf, keys=np.array(keys, dtype="U40"), vectors=np.stack([cache[k] for k in keys]))
    path.write_bytes(buf.getvalue())


class DocCache:
    """The real embedder, with document vectors from the cache (single texts go to the model)."""

    def __init__(self, inner, cache: dict[str, np.ndarray]) -> None:
        self._inner = inner
        self._cache = cache

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def encode(self, texts, *, batch_size=64, progress=None):
        texts = list(texts)
        if len(texts) == 1 and _key(texts[0]) not in self._cache:
            return self._inner.encode(texts, batch_size=batch_size)
        todo = [t for t in dict.fromkeys(texts) if _key(t) not in self._cache]
        if todo:
            for t, v in zip(todo, self._inner.encode(todo, batch_size=batch_size, progress=progress), strict=True):
                self._cache[_key(t)] = np.asarray(v, dtype=np.float32)
        return np.stack([self._cache[_key(t)] for t in texts])


def _module(*names: str):
    """The first of these modules the checkout has, or None."""
    import importlib

    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


def _parts() -> tuple:
    """What the child needs, from either layout: the pipeline packages (issue 20) or the flat one before them, so
    that an A/B can measure a checkout from before the move against one after it."""
    new = _module("memclaw.bench.synthetic")
    if new is not None:
        from memclaw.bench import perf_measure as m
        from memclaw.bench import synthetic as s
        from memclaw.bench.run_config import bench_config
        from memclaw.embedding.load import load_embedder
        from memclaw.service.facade import MemoryService
        from memclaw.store.clients import release_embedded_below

        fill = s.fill_template
    else:  # the flat layout, by name (its modules do not exist here)
        m = s = _module("memclaw.bench.perf")
        bench_config = _module("memclaw.bench.runner").bench_config
        load_embedder = _module("memclaw.embedding").load_embedder
        MemoryService = _module("memclaw.memory").MemoryService  # noqa: N806
        release_embedded_below = _module("memclaw.store").release_embedded_below
        fill = s._fill
    return (bench_config, s.synthetic_memories, s.synthetic_queries, s.write_workspace, m.warm_latencies,
            m.cold_recall, m.dir_size, fill, s.FACT_TEMPLATES, load_embedder, MemoryService,
            release_embedded_below)  # fmt: skip


def main() -> None:
    from memclaw.runtime import set_offline_env

    set_offline_env()
    import memclaw
    from memclaw.bench.metrics import percentile
    from memclaw.workspace import Workspace

    (bench_config, synthetic_memories, synthetic_queries, write_workspace, warm_latencies, cold_recall, dir_size,
     fill_template, FACT_TEMPLATES, load_embedder, MemoryService, release_embedded_below) = _parts()  # fmt: skip

    mode, n, cache_file, n_queries = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
    cache = load_cache(cache_file)
    cfg = bench_config()
    facts, hist = synthetic_memories(n)
    queries = synthetic_queries(n_queries)
    tmp = Path(tempfile.mkdtemp(prefix=f"memclaw-ab-{n}-"))
    root = tmp / "ws"
    write_workspace(root, facts, hist)
    svc = MemoryService(Workspace(root), cfg, embedder=DocCache(load_embedder(cfg.embeddings), cache))
    svc.sync()
    if not cache_file.exists():
        save_cache(cache_file, cache)
    lat, _ = warm_latencies(svc, queries)
    out = {"n": n, "package": str(Path(memclaw.__file__).parent.parent),
           "p50_ms": round(percentile(lat, 50), 2), "p95_ms": round(percentile(lat, 95), 2)}  # fmt: skip
    if mode == "state":
        n_adds, cold_runs = int(sys.argv[5]), int(sys.argv[6])
        add_ms = []
        for i in range(n_adds):
            text = f"State probe {i}: " + fill_template(
                random.Random(1000 + i), FACT_TEMPLATES[i % len(FACT_TEMPLATES)]
            )
            t = time.perf_counter()
            svc.add_fact(text)
            add_ms.append((time.perf_counter() - t) * 1000)
        fold_ms = None
        state_module = _module("memclaw.index._scope_state", "memclaw.index.scope_state", "memclaw.scope_state")
        if state_module is not None:  # folding the state's log into its snapshot (once per 500 adds), where it exists
            scope_state = state_module
            sc = svc.scopes.get("owner") if hasattr(svc, "scopes") else svc._get_scope("owner")
            t = time.perf_counter()
            scope_state.save(svc.layout.state_file("owner"), sc.state, sc.lexical.to_bytes, None)
            fold_ms = round((time.perf_counter() - t) * 1000, 1)
        svc.close()
        home = tmp / "home"
        home.mkdir()
        cold = cold_recall(root, home, queries[0], runs=cold_runs)
        index = Path(cfg.memory.index_dir or Workspace(root).index_dir)
        ranked = sorted(add_ms)
        out.update(
            add_median_ms=round(statistics.median(add_ms), 1),
            add_p90_ms=round(ranked[int(0.9 * (len(ranked) - 1))], 1),
            add_max_ms=round(max(add_ms), 1),
            cold_s=cold.get("median_s", cold.get("error")),
            cold_runs_s=cold.get("runs_s"),
            index_mib=round(dir_size(index) / 2**20, 1),
            fold_ms=fold_ms,
        )
    print(json.dumps(out))
    release_embedded_below(tmp)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

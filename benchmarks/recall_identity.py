"""Is recall unchanged to the last digit? Two checkouts' recall pipelines, side by side, on one exact vector store.

    python benchmarks/recall_identity.py --baseline /path/to/old-checkout [--current .] [--out FILE.md]

Each checkout runs in its own process (PYTHONPATH=checkout) and builds the same workspace from LoCoMo dev
(`../shared/data/locomo/locomo-dev.json`): every conversation's observations as MEMORY.md facts, each dated with its
session's day (so session links and date lifts apply), and the session summaries as dated HISTORY.md entries. Its
MemoryService gets an exact, brute-force vector store (cosine over every vector, ties broken by id): Chroma's HNSW
is approximate and its graph is not reproducible between builds or even between loads of one index (measured: two
runs of the same code on one kept index re-rank 26 of 12,160 LoCoMo answers), so only an exact store can show that
the *pipeline* (BM25, fusion, links, dates, passages, the relevance floor) is the same. Every question is asked in
`hybrid`, `bm25` and `vector` mode at k=10 with a fixed `now`; each hit's id, score, both signals' ranks and scores,
boosts and covering ids are compared as exact reprs. Exit 1 on any difference.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The shared data folder beside the checkout, or beside any folder above it (a worktree under another folder).
SHARED = next((p / "shared" / "data" for p in ROOT.parents if (p / "shared" / "data").is_dir()), ROOT.parent)
DATA = SHARED / "locomo" / "locomo-dev.json"
MODES = ("hybrid", "bm25", "vector")


def _workspace(root: Path, conv: dict) -> int:
    """MEMORY.md and HISTORY.md of one LoCoMo conversation; returns the number of questions."""
    c = conv["conversation"]
    days = {}
    for key, value in c.items():
        if key.endswith("_date_time"):
            with contextlib.suppress(ValueError):
                days[key.split("_")[1]] = datetime.strptime(value, "%I:%M %p on %d %B, %Y")
    facts, hist = [], []
    for key, per in conv["observation"].items():
        n = key.split("_")[1]
        stamp = f" ({days[n]:%Y-%m-%d})" if n in days else ""
        for items in per.values():
            facts += [f"- {' '.join(str(f).split())}{stamp}" for f, _ in items]
    for key, summary in conv["session_summary"].items():
        n = key.split("_")[1]
        if n in days:
            hist.append(f"[{days[n]:%Y-%m-%d %H:%M}] {' '.join(summary.split())}")
    (root / "memory").mkdir(parents=True, exist_ok=True)
    (root / "memory" / "MEMORY.md").write_text("# Facts\n" + "\n".join(facts) + "\n", "utf-8")
    (root / "memory" / "HISTORY.md").write_text("\n\n".join(hist) + "\n", "utf-8")
    return len(conv["qa"])


LME = SHARED / "longmemeval" / "lme-s-dev.json.gz"


def _lme_date(text: str) -> datetime:
    return datetime.strptime(text.split(" (")[0] + " " + text.split(") ")[1], "%Y/%m/%d %H:%M")


def _lme_workspace(root: Path, q: dict) -> None:
    """One LongMemEval question's haystack: each session one dated HISTORY.md entry of its user turns (long
    entries are embedded as several passages)."""
    hist = []
    for when, session in zip(q["haystack_dates"], q["haystack_sessions"], strict=True):
        said = " ".join(" ".join(str(t["content"]).split()) for t in session if t.get("role") == "user")
        if said:
            hist.append(f"[{_lme_date(when):%Y-%m-%d %H:%M}] {said}")
    (root / "memory").mkdir(parents=True, exist_ok=True)
    (root / "memory" / "HISTORY.md").write_text("\n\n".join(hist) + "\n", "utf-8")


def child(out: Path) -> None:
    """Runs inside one checkout (PYTHONPATH): recall every LoCoMo dev question on an exact store; JSON to `out`."""
    import numpy as np

    try:  # the pipeline layout (issue 20) or the flat one before it
        from memclaw.service.facade import MemoryService
    except ImportError:
        from memclaw.memory import MemoryService
    try:
        from memclaw.store.base import VectorHit
    except ImportError:
        try:
            from memclaw.store.chroma import VectorHit
        except ImportError:
            from memclaw.store import VectorHit
    from memclaw.config import Config
    from memclaw.workspace import Workspace

    class ExactStore:
        """Cosine over every stored vector, ties by id: deterministic."""

        def __init__(self) -> None:
            self.d: dict[str, dict[str, np.ndarray]] = {}

        def upsert(self, scope, ids, embeddings, metadatas, documents=None):
            s = self.d.setdefault(scope, {})
            for i, e in zip(ids, embeddings, strict=True):
                s[i] = np.asarray(e, dtype=np.float32)

        def query(self, scope, embedding, k):
            s = self.d.get(scope, {})
            ids = sorted(s)
            if not ids:
                return []
            m = np.stack([s[i] for i in ids])
            q = np.asarray(embedding, dtype=np.float32)
            sims = (m @ q) / (np.linalg.norm(m, axis=1) * np.linalg.norm(q))
            order = sorted(range(len(ids)), key=lambda j: (-float(sims[j]), ids[j]))[:k]
            return [VectorHit(ids[j], float(sims[j])) for j in order]

        def texts(self, scope):
            return {i: "" for i in self.d.get(scope, {})}

        def delete(self, scope, ids):
            for i in ids:
                self.d.get(scope, {}).pop(i, None)

        def warm(self, scope):
            pass

        def ids(self, scope):
            return set(self.d.get(scope, {}))

        def count(self, scope):
            return len(self.d.get(scope, {}))

        def drop(self, scope):
            self.d.pop(scope, None)

        def describe(self):
            return "exact"

    def exact_service(root: Path):
        first = MemoryService(Workspace(root), Config(workspace=root))
        first.sync()  # a new index is made (and its store wiped) once, with its manifest: then the exact store
        first.close()
        shutil.rmtree(root / ".memclaw-index" / "scopes")
        store = ExactStore()
        svc = MemoryService(Workspace(root), Config(workspace=root), store=store)
        svc.sync()
        assert svc.store is store and store.count("owner") > 10, "the exact store was not used"
        return svc

    def asked(r) -> list:
        return [
            [h.unit.id, repr(h.score), h.bm25.rank, repr(h.bm25.score), h.vector.rank, repr(h.vector.score),
             sorted((k, repr(v)) for k, v in h.boosts.items()), h.covered_by]
            for h in r.hits
        ]  # fmt: skip

    rows = []
    n_lme = int(os.environ.get("IDENTITY_LME", "0"))
    if n_lme:
        import gzip

        for q in json.loads(gzip.decompress(LME.read_bytes()))[:n_lme]:
            root = Path(tempfile.mkdtemp(prefix="memclaw-identity-")) / "ws"
            _lme_workspace(root, q)
            svc = exact_service(root)
            for mode in MODES:
                r = svc.recall_detailed(str(q["question"]), k=10, mode=mode, now=_lme_date(q["question_date"]))
                rows.append([q["question_id"], str(q["question"]), mode, r.mode, asked(r)])
            svc.close()
    now = datetime(2024, 1, 1)
    for conv in json.loads(DATA.read_text("utf-8")):
        root = Path(tempfile.mkdtemp(prefix="memclaw-identity-")) / "ws"
        _workspace(root, conv)
        svc = exact_service(root)
        for qa in conv["qa"]:
            for mode in MODES:
                r = svc.recall_detailed(str(qa["question"]), k=10, mode=mode, now=now)
                rows.append([conv["sample_id"], str(qa["question"]), mode, r.mode, asked(r)])
        svc.close()
    out.write_text(json.dumps(rows), "utf-8")


def _run(checkout: Path, out: Path, n_lme: int = 0) -> float:
    env = dict(os.environ, PYTHONPATH=str(checkout), PYTHONHASHSEED="0", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               LITELLM_LOCAL_MODEL_COST_MAP="True", MEMCLAW_HOME=str(out.parent / f"home-{out.stem}"),
               IDENTITY_LME=str(n_lme))  # fmt: skip
    start = time.perf_counter()
    subprocess.run([sys.executable, __file__, "--child", str(out)], env=env, check=True, cwd=checkout)
    return time.perf_counter() - start


def reopen(old: Path, new: Path, tmp: Path) -> list[dict]:
    """The on-disk formats: the baseline writes the demo workspace and its index (embedded Chroma), the current code
    syncs it; each scope's report (a rebuild or any re-embedding means the old index did not open as it is)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", LITELLM_LOCAL_MODEL_COST_MAP="True",
               MEMCLAW_HOME=str(tmp / "home-reopen"))  # fmt: skip
    ws = tmp / "reopen-ws"

    def mc(checkout: Path, *args: str) -> str:
        cmd = [sys.executable, "-m", "memclaw.cli.main", *args]
        p = subprocess.run(cmd, env=dict(env, PYTHONPATH=str(checkout)), capture_output=True, text=True, check=True)
        return p.stdout

    mc(old, "onboard", "--demo", "-w", str(ws))
    mc(old, "memory", "sync", "-w", str(ws), "--json")
    return json.loads(mc(new, "memory", "sync", "-w", str(ws), "--json"))


def _commit(checkout: Path) -> str:
    p = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return p.stdout.strip() or "?"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", type=Path)
    ap.add_argument("--current", type=Path, default=ROOT)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "recall-identity.md")
    ap.add_argument("--lme", type=int, default=0, help="also the first N LongMemEval dev questions (their haystacks)")
    ap.add_argument("--keep", type=Path, help="keep both sides' recalls (old.json, new.json) in this folder")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child)
        return 0
    if a.baseline is None:
        ap.error("--baseline is required")
    with tempfile.TemporaryDirectory() as tmp:
        keep = a.keep or Path(tmp)
        keep.mkdir(parents=True, exist_ok=True)
        old, new = keep / "old.json", keep / "new.json"
        t_old, t_new = _run(a.baseline.resolve(), old, a.lme), _run(a.current.resolve(), new, a.lme)
        ra, rb = json.loads(old.read_text()), json.loads(new.read_text())
        reports = reopen(a.baseline.resolve(), a.current.resolve(), Path(tmp))
    kept = all(not r["rebuilt"] and not r["added"] and not r["updated"] and not r["removed"] for r in reports)
    diff = [x[:3] for x, y in zip(ra, rb, strict=False) if x != y]
    if len(ra) != len(rb):
        diff.append(["(number of recalls)", len(ra), len(rb)])
    n_hits = sum(len(r[4]) for r in rb)
    data_line = f"{DATA.name}, every conversation"
    if a.lme:
        data_line += f", and the first {a.lme} questions of {LME.name} (sessions as dated HISTORY.md entries)"
    lines = [
        "# Recall identity: the pipeline before and after a change, on an exact vector store",
        "",
        f"- date: {datetime.now().astimezone():%Y-%m-%d %H:%M %Z}; machine: {os.cpu_count()} CPUs, Python "
        f"{sys.version.split()[0]}",
        f"- baseline: {_commit(a.baseline)} ({t_old:.0f} s); current: {_commit(a.current)} ({t_new:.0f} s)",
        f"- data: {data_line}; {len(rb)} (question, mode) recalls, {n_hits} hits compared (id, score, BM25 rank and "
        "score, vector rank and score, boosts, covering ids: exact reprs)",
        "- method: `benchmarks/recall_identity.py` (docstring)",
        "",
        f"**{'IDENTICAL' if not diff else f'DIFFERENT: {len(diff)} recalls differ'}**",
        "",
        f"On-disk formats: the demo workspace indexed by the baseline, synced by the current code: "
        f"**{'opened as it is' if kept else 'NOT KEPT'}** ("
        + ", ".join(f"{r['scope']}: {r['unchanged']} unchanged, rebuilt={r['rebuilt']}" for r in reports)
        + ")",
    ]
    lines[-3:-3] = [f"- {d}" for d in diff[:50]]
    a.out.write_text("\n".join(lines) + "\n", "utf-8")
    print("\n".join(lines))
    return 1 if diff or not kept else 0


if __name__ == "__main__":
    sys.exit(main())

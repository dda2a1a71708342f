"""The fusion lab's learned rule: a linear score over per-candidate features of both signals, fitted on one half of
the development questions with a listwise loss and scored on the other, both ways (issue 21's "a small learned model
over such features").

    .venv/bin/python benchmarks/lab/fusion_learn.py --dumps DUMPS [--features base,rank]

Features of a candidate (each 0 when its signal did not find it; the signals and floors as memclaw's ranking stage
has them, memclaw.recall.fusion / confidence): `b` BM25 over its best hit, `v` the cosine over its range above the
floor, `b_conf` / `v_conf` each times the log of its signal's confidence for the query (the adopted rule's powers
are these coefficients' ratio to `b` / `v`), `b_rank` / `v_rank` 1 / ln(2 + rank) in its own signal, `both` b * v.
The adopted rule is the point (b 0.6, v 1.0, b_conf 0.15, v_conf 0.25, the rest 0) to first order. The fitted score
replaces the fusion inside memclaw's own ranking stage (`rank`), scaled so that a candidate first on both signals
with full scores and typical confidence scores bm25_weight + vector_weight, as the date lift expects; the date lift,
links and the placement run as in the product.

Loss, per training question: minus the log of the softmax mass on its relevant candidates (a unit covering an
answer session / evidence turn), questions weighted equally; L2 towards the adopted point; plain gradient descent.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fusion_rules as R  # noqa: E402
from fusion_lab import Query, load, score  # noqa: E402

import memclaw.recall.ranking as ranking  # noqa: E402
from memclaw.recall.fusion import Fused, FusionParams, apply_floors, bm25_confidence, fuse, vector_confidence  # noqa: E402  # noqa: E402

NAMES = ("b", "v", "b_conf", "v_conf", "b_rank", "v_rank", "both")
ADOPTED = np.array([0.6, 1.0, 0.15, 0.25, 0.0, 0.0, 0.0])


def features(bm25: Sequence[tuple[str, float]], vector: Sequence[tuple[str, float]], p: FusionParams,
             bound: float) -> tuple[list[Fused], np.ndarray]:  # fmt: skip
    """The candidates (with provenance: memclaw.recall.fusion.fuse's, whose scores are replaced) and their feature
    rows."""
    out = fuse(bm25, vector, p, bm25_bound=bound)
    bs, vs = [s for _i, s in bm25], [s for _i, s in vector]
    lb = math.log(bm25_confidence(bs, bound)) if bs else 0.0
    lv = math.log(vector_confidence(vs)) if vs else 0.0
    top = bs[0] if bs else 0.0
    span = (max(vs[0], p.vector_span_from) - p.min_similarity) if vs else 0.0
    x = np.zeros((len(out), len(NAMES)))
    for j, h in enumerate(out):
        b = h.bm25_score / top if top > 0 and h.bm25_score is not None else 0.0
        v = (
            max(0.0, (h.vector_similarity - p.min_similarity) / span)
            if h.vector_similarity is not None and span > 0
            else 0.0
        )
        rb = 1 / math.log(2 + h.bm25_rank) if h.bm25_rank else 0.0
        rv = 1 / math.log(2 + h.vector_rank) if h.vector_rank else 0.0
        x[j] = (b, v, b * lb, v * lv, rb, rv, b * v)
    return out, x


FULL = np.array([1.0, 1.0, 0.0, 0.0, 1 / math.log(3), 1 / math.log(3), 1.0])
"""The features of a candidate first on both signals with full scores and typical confidence."""


def scaled(w: np.ndarray, p: FusionParams) -> np.ndarray:
    """`w` scaled so that the FULL candidate scores the fusion's full scale (the date lift's unit)."""
    return w * (p.bm25_weight + p.vector_weight) / max(float(FULL @ w), 1e-9)


@contextmanager
def learned(w: np.ndarray):
    """memclaw's ranking stage with the fusion replaced by the linear score `w` (scaled)."""
    real = ranking.fuse

    def fuse(bm25, vector, p, *, bm25_scale=None, bm25_bound=0.0):
        hits, x = features(bm25, vector, p, bm25_bound)
        ws = scaled(w, p)
        for h, s in zip(hits, x @ ws, strict=True):
            h.score = float(s)
        return sorted(hits, key=lambda h: (-h.score, h.id))

    ranking.fuse = fuse
    try:
        yield
    finally:
        ranking.fuse = real


def rule(w: np.ndarray):
    def run(q: Query):
        with learned(w):
            return R.product(q)

    return run


def training_rows(qs: Sequence[Query]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per question: the feature rows of its candidates and which are relevant (questions with none left out)."""
    p = R.PRODUCT.fusion
    out = []
    for q in qs:
        sig = q.nodate if q.nodate else q.sig
        bm = [] if (q.ranges and not q.nodate) else R.bm25_hits(sig)
        bm, vec = apply_floors(bm, R.unit_sims(q, q.sig), p)
        hits, x = features(bm, vec, p, sig.bm25_max if bm else 0.0)
        y = np.array([bool(q.corpus.cover.get(h.id, frozenset()) & q.relevant) for h in hits])
        if y.any() and not y.all():
            out.append((x, y))
    return out


def fit(rows, start: np.ndarray, l2: float, steps: int = 400, lr: float = 0.5, temp: float = 8.0) -> np.ndarray:
    """Listwise fit: minimise the mean over questions of -log(softmax mass on the relevant), scores `temp * x @ w`."""
    w = start.copy()
    for _ in range(steps):
        g = np.zeros_like(w)
        for x, y in rows:
            s = temp * (x @ w)
            s -= s.max()
            e = np.exp(s)
            p_all = e / e.sum()
            p_rel = e * y / (e * y).sum()
            g += temp * (x.T @ (p_all - p_rel))
        g = g / len(rows) + l2 * (w - start)
        w -= lr * g
    return w


def _short(k: str) -> str:
    return k.replace("recall_", "").replace("recall", "R")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dumps", type=Path, default=Path("DUMPS"))
    ap.add_argument("--l2", type=float, default=0.1)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--temp", type=float, default=8.0)
    ap.add_argument("--sets", default="lme,all,facts", help="scored; the first two of lme, all are fitted on")
    ap.add_argument("--features", default=",".join(NAMES), help="the features fitted (the rest stay at the start)")
    a = ap.parse_args()
    files = {"lme": "lme", "all": "locomo-all", "facts": "locomo-facts"}
    sets = {n: load(a.dumps / f"{files[n]}.json.gz", "lme" if n == "lme" else "locomo") for n in a.sets.split(",")}
    mask = np.array([n in a.features.split(",") for n in NAMES], dtype=float)
    keys = {"lme": ("recall_any@5", "recall_all@5", "recall_any@10", "recall_all@10"),
            "all": ("recall@10", "recall@128t", "recall@256t", "recall@512t", "recall@1024t"),
            "facts": ("recall@10",)}  # fmt: skip
    keys = {n: keys[n] for n in sets}
    base = {n: score(qs, R.RULES["product"], "lme" if n == "lme" else "locomo")[0] for n, qs in sets.items()}
    for half, other in (("A", "B"), ("B", "A")):
        rows = [r for n in ("lme", "all") if n in sets for r in training_rows([q for q in sets[n] if q.half == half])]
        w = ADOPTED + mask * (fit(rows, ADOPTED, a.l2, a.steps, temp=a.temp) - ADOPTED)
        fitted = " ".join(f"{n} {x:.3f}" for n, x in zip(NAMES, w, strict=True))
        print(f"fitted on {half} ({len(rows)} questions): {fitted}")
        res = {n: score(qs, rule(w), "lme" if n == "lme" else "locomo")[0] for n, qs in sets.items()}
        for h in (half, other):
            tag = "fit" if h == half else "held out"
            cells = [f"{n} {_short(k)} {res[n][h][k]:.3f} ({res[n][h][k] - base[n][h][k]:+.3f})" for n in keys
                     for k in keys[n]]  # fmt: skip
            print(f"  {h} ({tag}): " + "; ".join(cells))


if __name__ == "__main__":
    main()

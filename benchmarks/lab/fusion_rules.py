"""Fusion rules for the fusion lab (benchmarks/lab/fusion_lab.py): each maps one dumped query to a ranked list of
(unit id, ids of the units covering it), as memclaw's recall would answer it with k = 40."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from fusion_lab import Query, Ranked, Signals

from memclaw.config import RecallConfig
from memclaw.recall.fusion import FusionParams, apply_floors, date_boost, fuse, link_boost
from memclaw.recall.ranking import DATE_ONLY_MAX_DAYS, RankInput, RankSettings, rank
from memclaw.recall.search import rank_settings

K = 40
N_CAND = max(50, K * 3)
# the weighted fusion recall used before adaptive fusion, spelt out (the product's values come from RecallConfig)
TODAY = FusionParams(
    method="weighted",
    rrf_k=60,
    bm25_weight=0.7,
    vector_weight=1.0,
    min_similarity=0.15,
    min_bm25=0.0,
    bm25_confidence=0.25,
    vector_confidence=0.25,
)
PRODUCT = rank_settings(RecallConfig())


def _tuned(**changes: object) -> RecallConfig:
    """The default recall config with these tuning values over its preset's (memclaw.config.presets)."""
    return RecallConfig().with_tuning(**changes)


def unit_sims(q: Query, sig: Signals, n: int = N_CAND * 2, signal: str = "max") -> list[tuple[str, float]]:
    """The vector store's top n vectors (exact, ties by id) -> one similarity per unit, best first."""
    vids = q.corpus.vector_ids
    order = sorted(range(len(vids)), key=lambda j: (-sig.sims[j], vids[j]))[:n]
    best: dict[str, float] = {}
    for j in order:
        vid = vids[j]
        uid = vid.split("~", 1)[0]
        head = vid.endswith("~h")
        if uid in best or (signal == "passages" and head):
            continue
        if signal == "head" and not head and (vid != uid or q.corpus.units[uid].long):
            continue
        best[uid] = sig.sims[j]
    return list(best.items())


def bm25_hits(sig: Signals, n: int = N_CAND) -> list[tuple[str, float]]:
    return [(i, s) for i, s, _m in sig.bm25[:n]]


def finish(q: Query, fused, links: bool = True, k: int = K) -> Ranked:
    """One hit per text, the top k, each with the units covering it (as search.py does)."""
    seen: set[str] = set()
    out: Ranked = []
    cov = q.corpus.links if links else {}
    for f in fused:
        key = q.corpus.units[f.id].key
        if key in seen:
            continue
        seen.add(key)
        out.append((f.id, tuple(cov.get(f.id, ()))))
        if len(out) >= k:
            break
    return out


def today(q: Query, p: FusionParams = TODAY, date_weight: float = 0.5, link_weight: float = 0.5) -> Ranked:
    bm, vec = apply_floors(bm25_hits(q.sig), unit_sims(q, q.sig), p)
    fused = fuse(bm, vec, p)
    if q.ranges and date_weight > 0:
        narrow = [r for r in q.ranges if r.days <= DATE_ONLY_MAX_DAYS]
        extra = q.corpus.dated_in(narrow, N_CAND) if narrow else []
        stamps = {i: q.corpus.units[i].ts for i in [*(f.id for f in fused), *extra]}
        fused = date_boost(fused, stamps, q.ranges, weight=date_weight, extra=extra)
    if link_weight > 0 and q.corpus.links:
        fused = link_boost(fused, q.corpus.links, weight=link_weight)
    return finish(q, fused, links=link_weight > 0)


def bm25_raw(q: Query) -> Ranked:
    bm, _ = apply_floors(bm25_hits(q.sig), [], TODAY)
    return finish(q, fuse(bm, [], replace(TODAY, bm25_weight=1.0, vector_weight=0.0, min_similarity=0.25)), links=False)


def vector_raw(q: Query, signal: str = "max") -> Ranked:
    _, vec = apply_floors([], unit_sims(q, q.sig, signal=signal), TODAY)
    return finish(
        q, fuse([], vec, replace(TODAY, bm25_weight=0.0, vector_weight=1.0, min_similarity=0.25)), links=False
    )


def product(q: Query, s: RankSettings | None = None, *, strip: bool = True, signal: str = "max") -> Ranked:
    """memclaw's own ranking stage (memclaw.recall.ranking.rank, the default recall settings unless `s`) on the
    dumped signals; `strip`: BM25 on the query without its date words, as recall does."""
    s = s or PRODUCT
    sig = q.nodate if (strip and q.nodate) else q.sig
    bm = [] if (strip and q.ranges and not q.nodate) else bm25_hits(sig)
    links = q.corpus.links if s.link_weight else {}
    inp = RankInput(
        bm25=bm,
        vector=unit_sims(q, q.sig, signal=signal),
        units=q.corpus.units,
        links=links,
        ranges=q.ranges,
        dated_in=q.corpus.dated_in,
        now=q.now,
        bm25_bound=sig.bm25_max if bm else 0.0,
    )
    return [(f.id, tuple(links.get(f.id, ()))) for f in rank(inp, s, k=K, n_cand=N_CAND)]


PREVIOUS = rank_settings(_tuned(fusion="weighted", bm25_weight=0.7, keep_factor=0, date_after=0.0))


RULES: dict[str, Callable[[Query], Ranked]] = {
    "hybrid": today,
    "product": product,
    "product-nostrip": lambda q: product(q, PREVIOUS, strip=False),
    "previous-strip": lambda q: product(q, PREVIOUS),
    "bm25-raw": bm25_raw,
    "vector-raw": vector_raw,
    "vector-head": lambda q: vector_raw(q, "head"),
}


# ----- candidate rules (the lab's own; the adopted one is memclaw.recall's) ----------------------------------

import numpy as np  # noqa: E402

from memclaw.recall.fusion import Fused  # noqa: E402
from memclaw.recall.ranking import keep_signal_ranks  # noqa: E402


def _norm(vals: list[float], how: str) -> tuple[list[float], float]:
    """A signal's scores for this query -> normalised scores, and the signal's confidence."""
    a = np.asarray(vals, dtype=float)
    if not len(a):
        return [], 0.0
    if how == "best":
        return list(a / a[0]), 1.0
    if how == "raw":
        return list(a), 1.0
    if how == "z":
        sd = a.std() or 1.0
        return list((a - a.mean()) / sd), 1.0
    if how == "mad":
        med = np.median(a)
        mad = np.median(np.abs(a - med)) or (a[0] - med) or 1.0
        return list((a - med) / mad), 1.0
    if how.startswith("lam"):  # (s - lam * median) / (best - lam * median): lam 0 is "best", 1 is "med"
        lam = float(how[3:])
        ref = lam * float(np.median(a))
        span = (a[0] - ref) or 1.0
        return list((a - ref) / span), 1.0
    if how == "floor":  # (c - floor) / (best - floor): the vector's range above its relevance floor
        lo = TODAY.min_similarity
        span = (a[0] - lo) or 1.0
        return list((a - lo) / span), 1.0
    if how == "med":
        med = float(np.median(a))
        span = (a[0] - med) or 1.0
        return list((a - med) / span), 1.0
    if how == "minmax":
        lo = a[-1]
        span = (a[0] - lo) or 1.0
        return list((a - lo) / span), 1.0
    raise ValueError(how)


def general(
    q: Query,
    *,
    nb: str = "best",
    nv: str = "raw",
    wb: float = 0.7,
    wv: float = 1.0,
    adapt: Callable[[Query, list, list], tuple[float, float]] | None = None,
    clip: bool = True,
    keep: int = 0,
    keep_cover: bool = True,
    keep_limit: int = K,
    date_scale: float = 1.6,
    date: str = "today",
    date_weight: float = 0.5,
    link_weight: float = 0.5,
    bm25_nodate: bool = False,
    vec_nodate: bool = False,
) -> Ranked:
    sb = q.nodate if (bm25_nodate and q.nodate) else q.sig
    sv = q.nodate if (vec_nodate and q.nodate) else q.sig
    bm = [] if bm25_nodate and q.ranges and not q.nodate else bm25_hits(sb)  # (only date words: no topic)
    bm, vec = apply_floors(bm, unit_sims(q, sv), TODAY)
    if adapt is not None:
        wb, wv = adapt(q, bm, vec)
    b, _ = _norm([s for _i, s in bm], nb)
    v, _ = _norm([s for _i, s in vec], nv)
    hits: dict[str, Fused] = {}
    for r, ((i, s), z) in enumerate(zip(bm, b, strict=True), 1):
        h = hits.setdefault(i, Fused(i))
        h.bm25_rank, h.bm25_score = r, s
        h.score += wb * (max(z, 0.0) if clip else z)
    for r, ((i, s), z) in enumerate(zip(vec, v, strict=True), 1):
        h = hits.setdefault(i, Fused(i))
        h.vector_rank, h.vector_similarity = r, s
        h.score += wv * (max(z, 0.0) if clip else z)
    fused = sorted(hits.values(), key=lambda h: (-h.score, h.id))
    if q.ranges and date != "none":
        narrow = [r for r in q.ranges if r.days <= DATE_ONLY_MAX_DAYS]
        extra = q.corpus.dated_in(narrow, N_CAND) if narrow else []
        stamps = {i: q.corpus.units[i].ts for i in [*(f.id for f in fused), *extra]}
        if date in ("abs", "base"):  # a share of the fusion's full scale, not of the best score found
            top = max((f.score for f in fused), default=0.0) or 1.0
            scale = (wb + wv) if date == "abs" else date_scale
            fused = date_boost(fused, stamps, q.ranges, weight=date_weight * scale / top, extra=extra)
        else:
            fused = date_boost(fused, stamps, q.ranges, weight=date_weight, extra=extra)
    if link_weight > 0 and q.corpus.links:
        fused = link_boost(fused, q.corpus.links, weight=link_weight)
    if keep:
        units = q.corpus.units
        seen: set[str] = set()
        dedup = []
        for f in fused:
            if units[f.id].key not in seen:
                seen.add(units[f.id].key)
                dedup.append(f)
        rep = {units[f.id].key: f.id for f in dedup}
        lists = [list(dict.fromkeys(rep[units[i].key] for i, _s in sig)) for sig in (bm, vec)]
        by = {f.id: f for f in dedup}
        cov = q.corpus.links if (keep_cover and link_weight > 0) else None
        order = keep_signal_ranks([f.id for f in dedup], lists, factor=keep, limit=keep_limit, covered_by=cov)
        placed = set(order)
        fused = [by[i] for i in order] + [f for f in dedup if f.id not in placed]
    return finish(q, fused, links=link_weight > 0)


RULES.update(
    {
        "g-today": lambda q: general(q),
        "g-keep": lambda q: general(q, keep=2),
        "z": lambda q: general(q, nb="z", nv="z", wb=1.0, wv=1.0, date_weight=0.5),
        "mad": lambda q: general(q, nb="mad", nv="mad", wb=1.0, wv=1.0),
        "minmax": lambda q: general(q, nb="minmax", nv="minmax", wb=0.7, wv=1.0),
    }
)
RULES.update(
    {
        "g-keep3": lambda q: general(q, keep=3),
        "g-keep4": lambda q: general(q, keep=4),
        "g-keep2-own": lambda q: general(q, keep=2, keep_cover=False),
        "minmax-keep3": lambda q: general(q, nb="minmax", nv="minmax", keep=3),
    }
)
RULES.update(
    {
        "strip-bm25": lambda q: general(q, bm25_nodate=True),
        "strip-both": lambda q: general(q, bm25_nodate=True, vec_nodate=True),
        "date1": lambda q: general(q, date_weight=1.0),
        "date1-strip": lambda q: general(q, date_weight=1.0, bm25_nodate=True),
        "date0": lambda q: general(q, date="none"),
    }
)


def conf_weights(wb0: float = 0.7, wv0: float = 1.0, ab: float = 0.0, av: float = 0.0, feat_b: str = "bound",
                 feat_v: str = "gap"):  # fmt: skip
    """Per-query weights from each signal's own scores: wb0 * conf_b ** ab, wv0 * conf_v ** av."""

    def adapt(q: Query, bm: list, vec: list) -> tuple[float, float]:
        cb = cv = 1.0
        if bm:
            s = [x[1] for x in bm]
            bound = (q.nodate if (q.ranges and q.nodate) else q.sig).bm25_max
            if feat_b == "bound":
                cb = s[0] / bound if bound > 0 else 1.0
            elif feat_b == "match":
                cb = q.sig.bm25[0][2] / max(1, q.sig.n_terms)
            elif feat_b == "gap":
                cb = (s[0] - float(np.median(s))) / s[0]
        if vec:
            c = [x[1] for x in vec]
            if feat_v == "gap":
                cv = max(1e-6, c[0] - float(np.median(c)))
            elif feat_v == "gap50":
                cv = max(1e-6, c[0] - float(np.median(c[:50])))
            elif feat_v == "best":
                cv = c[0]
            elif feat_v == "gap5":
                cv = max(1e-6, c[0] - c[min(4, len(c) - 1)])
        return wb0 * cb**ab, wv0 * cv**av

    return adapt


def _reg(name: str, **kw) -> None:
    RULES[name] = lambda q: general(q, **kw)


for _ab in (0.5, 1.0):
    _reg(f"ab{_ab}", adapt=conf_weights(ab=_ab))
    _reg(f"ab{_ab}-match", adapt=conf_weights(ab=_ab, feat_b="match"))
for _av in (0.5, 1.0):
    _reg(f"av{_av}", adapt=conf_weights(wv0=1.0 / 0.3**_av, av=_av))
    _reg(f"av{_av}-gap5", adapt=conf_weights(wv0=1.0 / 0.09**_av, av=_av, feat_v="gap5"))

for _w in (0.3, 0.5, 0.8):
    _reg(f"abs{_w}", date="abs", date_weight=_w)
    _reg(f"abs{_w}-strip", date="abs", date_weight=_w, bm25_nodate=True)


def adaptive_family(wb0=0.7, ab=0.0, fb="bound", wv0=1.0, av=0.0, fv="gap", nv="raw", dw=0.5, ds="best", keep=0,
                    strip=True):  # fmt: skip
    ref = {"gap": 0.3, "gap5": 0.09, "best": 0.6}[fv]
    adapt = conf_weights(wb0=wb0, wv0=wv0 / ref**av, ab=ab, av=av, feat_b=fb, feat_v=fv)
    date = "abs" if ds == "full" else "today"
    return lambda q: general(q, adapt=adapt, nv=nv, date=date, date_weight=dw, keep=keep, bm25_nodate=strip)


RULES["t-minmax"] = adaptive_family(nv="minmax")
RULES["t-minmax-best"] = adaptive_family(nv="minmax", av=1.0, fv="best")


def norm_family(nb="best", nv="raw", wb=0.7, wv=1.0, dw=0.5, ds="best", keep=0, strip=True, clip=True, lw=0.5):
    date = "abs" if ds == "full" else "today"
    return lambda q: general(q, nb=nb, nv=nv, wb=wb, wv=wv, date=date, date_weight=dw, keep=keep,
                             bm25_nodate=strip, clip=clip, link_weight=lw)  # fmt: skip


for _nb, _nv in (
    ("z", "z"),
    ("best", "z"),
    ("minmax", "z"),
    ("z", "minmax"),
    ("minmax", "minmax"),
    ("med", "raw"),
    ("med", "minmax"),
    ("med", "med"),
    ("best", "med"),
    ("minmax", "med"),
):
    for _wb in (0.5, 0.7, 1.0):
        RULES[f"n-{_nb}-{_nv}-{_wb}"] = norm_family(nb=_nb, nv=_nv, wb=_wb)


FAMILIES = {
    "norm": (
        norm_family,
        {
            "nb": ["best", "minmax", "z"],
            "nv": ["raw", "minmax", "z"],
            "wb": [0.4, 0.5, 0.6, 0.7, 0.85, 1.0],
            "lw": [0.4, 0.5, 0.6, 0.75],
            "dw": [0.3, 0.5, 0.8],
            "ds": ["best", "full"],
            "keep": [0, 2, 3],
        },
        {"nb": "minmax", "nv": "minmax"},
    ),
    "adaptive": (
        adaptive_family,
        {
            "ab": [0.0, 0.25, 0.5, 1.0],
            "av": [0.0, 0.5, 1.0],
            "wb0": [0.4, 0.55, 0.7, 0.85, 1.0],
            "fv": ["gap", "gap5", "best"],
            "fb": ["bound", "match"],
            "nv": ["raw", "minmax"],
        },
        {},
    ),
}


def blend_family(lam=0.0, nv="raw", wb=0.7, av=0.0, fv="best", dw=0.5, ds="best", keep=0, lw=0.5, strip=True):
    ref = {"gap": 0.3, "gap5": 0.09, "best": 0.6}[fv]
    adapt = conf_weights(wb0=wb, wv0=1.0 / ref**av, av=av, feat_v=fv) if av else None
    date = "abs" if ds == "full" else "today"
    return lambda q: general(q, nb=f"lam{lam}", nv=nv, wb=wb, wv=1.0, adapt=adapt, date=date, date_weight=dw,
                             keep=keep, bm25_nodate=strip, link_weight=lw)  # fmt: skip


FAMILIES["blend"] = (
    blend_family,
    {
        "lam": [0.0, 0.25, 0.5, 0.75, 1.0],
        "nv": ["raw", "minmax"],
        "wb": [0.4, 0.5, 0.6, 0.7, 0.85, 1.0],
        "av": [0.0, 0.5, 1.0],
        "fv": ["best", "gap"],
        "lw": [0.4, 0.5, 0.6, 0.75],
        "dw": [0.3, 0.5, 0.8],
        "ds": ["best", "full"],
    },
    {},
)
for _dw in (0.3, 0.5):
    for _ds in ("best", "full"):
        for _lw in (0.5, 0.6):
            for _wb in (0.6, 0.7):
                RULES[f"mm-{_wb}-{_dw}-{_ds}-{_lw}"] = blend_family(nv="minmax", wb=_wb, dw=_dw, ds=_ds, lw=_lw)


def conf_family(wb=0.6, ab=0.0, fb="bound", av=0.0, fv="best", dw=0.5, ds="full", lw=0.5, keep=0, nv="minmax",
                keep_limit=K):  # fmt: skip
    ref = {"gap": 0.3, "gap50": 0.3, "gap5": 0.09, "best": 0.6}[fv]
    refb = {"bound": 0.4, "gap": 0.8, "match": 0.67}[fb]
    adapt = conf_weights(wb0=wb / refb**ab, wv0=1.0 / ref**av, ab=ab, av=av, feat_b=fb, feat_v=fv)
    date = {"full": "abs", "base": "base"}.get(ds, "today")
    return lambda q: general(q, nv=nv, adapt=adapt, date=date, date_weight=dw, keep=keep, bm25_nodate=True,
                             link_weight=lw, keep_limit=keep_limit)  # fmt: skip


for _ab in (0.0, 0.25, 0.5):
    for _fb in ("bound", "gap"):
        for _av in (0.0, 0.25, 0.5):
            for _fv in ("best", "gap"):
                if (_ab == 0 and _fb == "gap") or (_av == 0 and _fv == "gap"):
                    continue
                RULES[f"cf-{_ab}{_fb}-{_av}{_fv}"] = conf_family(ab=_ab, fb=_fb, av=_av, fv=_fv)
for _keep in (2, 3, 4):
    RULES[f"cand-keep{_keep}"] = conf_family(ab=0.25, fb="bound", av=0.25, fv="gap", keep=_keep)
RULES["cand"] = conf_family(ab=0.25, fb="bound", av=0.25, fv="gap")
for _lim in (4, 6, 10, 20):
    RULES[f"cand-keep2-{_lim}"] = conf_family(ab=0.25, fb="bound", av=0.25, fv="gap", keep=2, keep_limit=_lim)
    RULES[f"cand-keep2own-{_lim}"] = lambda q, _lim=_lim: general(
        q,
        nv="minmax",
        adapt=conf_weights(wb0=0.6 / 0.4**0.25, wv0=1 / 0.3**0.25, ab=0.25, av=0.25, feat_v="gap"),
        date="abs",
        date_weight=0.5,
        keep=2,
        keep_cover=False,
        bm25_nodate=True,
        keep_limit=_lim,
    )
for _av in (0.5, 1.0):
    for _dw in (0.5, 0.7):
        for _ds in ("base", "full"):
            RULES[f"cb-{_av}-{_dw}-{_ds}"] = conf_family(ab=0.25, av=_av, fv="best", dw=_dw, ds=_ds)
            RULES[f"cb-{_av}-{_dw}-{_ds}-k3"] = conf_family(ab=0.25, av=_av, fv="best", dw=_dw, ds=_ds, keep=3)
RULES["cand-floor"] = conf_family(ab=0.25, av=0.25, fv="gap", nv="floor")
RULES["cand-floor50"] = conf_family(ab=0.25, av=0.25, fv="gap50", nv="floor")
RULES["cand-floor50-k3"] = conf_family(ab=0.25, av=0.25, fv="gap50", nv="floor", keep=3)
RULES["cand-50"] = conf_family(ab=0.25, av=0.25, fv="gap50")
for _wb in (0.5, 0.6, 0.7):
    for _ab, _av in ((0.0, 0.0), (0.25, 0.25), (0.5, 0.5), (0.0, 0.25), (0.25, 0.0)):
        for _dw in (0.3, 0.5):
            RULES[f"fl-{_wb}-{_ab}-{_av}-{_dw}"] = conf_family(wb=_wb, ab=_ab, av=_av, fv="gap50", nv="floor", dw=_dw,
                                                               keep=3)  # fmt: skip


def floor_family(wb=0.6, ab=0.25, av=0.25, dw=0.5, keep=3):
    return conf_family(wb=wb, ab=ab, av=av, fv="gap50", nv="floor", dw=dw, keep=keep)


FAMILIES["floor"] = (
    floor_family,
    {
        "wb": [0.5, 0.6, 0.7, 0.85],
        "ab": [0.0, 0.25, 0.5],
        "av": [0.0, 0.25, 0.5],
        "dw": [0.3, 0.5, 0.8],
        "keep": [0, 3],
    },
    {},
)
RULES["final-full"] = conf_family(wb=0.6, ab=0.25, av=0.25, fv="gap50", nv="floor", dw=0.5, keep=3)
RULES["final-base"] = conf_family(wb=0.6, ab=0.25, av=0.25, fv="gap50", nv="floor", dw=0.5, keep=3, ds="base")
RULES["final-base-k0"] = conf_family(wb=0.6, ab=0.25, av=0.25, fv="gap50", nv="floor", dw=0.5, ds="base")


def _settings(**kw) -> RankSettings:
    return rank_settings(_tuned(**kw))


for _name, _kw in {
    "adopted-keep0": {"keep_factor": 0},
    "adopted-keep2": {"keep_factor": 2},
    "adopted-keep4": {"keep_factor": 4},
    "adopted-conf0": {"bm25_confidence": 0.0, "vector_confidence": 0.0},
    "adopted-conf0.5": {"bm25_confidence": 0.5, "vector_confidence": 0.5},
    "adopted-bm25w0.7": {"bm25_weight": 0.7},
    "adopted-date0.3": {"date_weight": 0.3},
    "adopted-date0.8": {"date_weight": 0.8},
    "adopted-nodate": {"date_weight": 0.0},
}.items():
    RULES[_name] = lambda q, _s=_settings(**_kw): product(q, _s)
RULES["adopted-nostrip"] = lambda q: product(q, strip=False)

for _a in (0.0, 0.25, 0.5, 0.75):
    RULES[f"adopted-after{_a}"] = lambda q, _s=replace(PRODUCT, date_after=_a): product(q, _s)
RULES["adopted-after1.0"] = lambda q, _s=replace(PRODUCT, date_after=1.0): product(q, _s)
for _r in (0.3, 0.4, 0.5, 0.6):
    RULES[f"adopted-span{_r}"] = lambda q, _s=replace(PRODUCT, fusion=replace(PRODUCT.fusion, vector_span_from=_r)): (
        product(q, _s)
    )


def product_family(wb=0.6, ab=0.25, av=0.25, dw=0.5, keep=3, after=0.5):
    """memclaw's own ranking stage with these recall settings (the product's constants; the rest its defaults)."""
    s = _settings(bm25_weight=wb, bm25_confidence=ab, vector_confidence=av, date_weight=dw, keep_factor=keep,
                  date_after=after)  # fmt: skip
    return lambda q: product(q, s)


FAMILIES["product"] = (
    product_family,
    {
        "wb": [0.5, 0.6, 0.7, 0.85],
        "ab": [0.0, 0.25, 0.5],
        "av": [0.0, 0.25, 0.5],
        "dw": [0.3, 0.5, 0.8],
        "keep": [0, 3],
        "after": [0.0, 0.5, 1.0],
    },
    {},
)


def rule(name: str) -> Callable[[Query], Ranked]:
    """A rule by name: one of RULES, or `p:wb=0.5+ab=0` (product_family with those settings)."""
    if name.startswith("p:"):
        kw = {k: (int(v) if k == "keep" else float(v)) for k, v in (x.split("=") for x in name[2:].split("+") if x)}
        return product_family(**kw)
    return RULES[name]

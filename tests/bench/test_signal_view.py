"""The per-type view: hybrid against its best single signal, behind flagged (pure)."""

from __future__ import annotations

from memclaw.bench.locomo_report import locomo_markdown
from memclaw.bench.longmemeval import longmemeval_markdown
from memclaw.bench.signal_view import behind, signal_view_md


def _sys(any5: float, all5: float, by: dict[str, tuple[float, float]]) -> dict:
    return {
        "recall_any@5": any5,
        "recall_all@5": all5,
        "n": 20,
        "by_question_type": {t: {"n": 10, "recall_any@5": a, "recall_all@5": b} for t, (a, b) in by.items()},
    }


RES = {
    "systems": {
        "hybrid": _sys(0.95, 0.90, {"pref": (0.8, 0.8), "temporal": (1.0, 0.9)}),
        "bm25-raw": _sys(0.90, 0.91, {"pref": (0.7, 0.7), "temporal": (1.0, 0.8)}),
        "vector-raw": _sys(0.92, 0.85, {"pref": (1.0, 0.9), "temporal": (0.9, 0.9)}),
        "grep": _sys(1.0, 1.0, {"pref": (1.0, 1.0), "temporal": (1.0, 1.0)}),  # not a signal of the hybrid
    }
}


def test_behind_names_each_metric_a_single_signal_wins_and_which():
    singles = {n: RES["systems"][n] for n in ("bm25-raw", "vector-raw")}
    assert behind(RES["systems"]["hybrid"], singles, ["recall_any@5", "recall_all@5"]) == [
        ("recall_all@5", 0.90, "bm25-raw", 0.91)
    ]
    assert behind(RES["systems"]["hybrid"], singles, ["recall_any@5"]) == []  # ahead of both: nothing flagged


def test_the_view_flags_every_type_where_hybrid_is_behind_and_only_those():
    lines = signal_view_md(RES, by="by_question_type", keys=["recall_any@5", "recall_all@5"])
    rows = {ln.split(" | ")[0].strip("| "): ln for ln in lines if ln.startswith("| ") and "---" not in ln}
    assert "**all@5** 0.900 < 0.910 (bm25-raw)" in rows["all"]
    assert "**any@5** 0.800 < 1.000 (vector-raw)" in rows["pref"] and "**all@5** 0.800 < 0.900" in rows["pref"]
    assert rows["temporal"].endswith("| - |")  # ties count as not behind; grep is no signal of the hybrid
    assert "0.950 / 0.920 (vector-raw)" in rows["all"]


def test_no_view_without_the_hybrid_or_a_single_signal():
    assert signal_view_md({"systems": {"hybrid": RES["systems"]["hybrid"]}}, by="by_question_type", keys=[]) == []
    assert signal_view_md({"systems": {"bm25-raw": RES["systems"]["bm25-raw"]}}, by="by_question_type", keys=[]) == []


def _lme_res(systems: dict) -> dict:
    machine = {"nproc": 2, "cpu": "cpu", "ram_gib": 1, "os": "linux", "python": "3.11"}
    return {
        "date": "d", "machine": machine, "data_file": "f", "data_sha256": "s",
        "config": {"recall": {}, "embeddings_model": "m"}, "n_questions": 20, "n_considered": 20,
        "n_in_file": 20, "skipped": {}, "n_sessions": 1, "index_seconds": 0, "systems": systems,
    }  # fmt: skip


def test_both_reports_carry_the_view():
    systems = {}
    for name, s in RES["systems"].items():
        full = dict(s, p50_ms=1.0, p95_ms=2.0, description="")
        full.update({f"{m}@{k}": s.get(f"{m}@{k}", 0.0) for m in ("recall_any", "recall_all", "ndcg_any")
                     for k in (1, 5, 10)})  # fmt: skip
        full["by_question_type"] = {
            t: dict(v, **{f"{m}@{k}": v.get(f"{m}@{k}", 0.0) for m in ("recall_any", "recall_all", "ndcg_any")
                          for k in (1, 5, 10)})
            for t, v in s["by_question_type"].items()
        }  # fmt: skip
        systems[name] = full
    md = longmemeval_markdown(_lme_res(systems))
    assert "## Hybrid against its best single signal, per type" in md and "**any@5** 0.800 < 1.000" in md
    loc = {
        n: {**{f"recall@{k}": s["recall_any@5"] for k in (1, 3, 5, 10, 20)}, "hit@1": 0, "hit@5": 0, "mrr": 0,
            "ndcg@10": 0, "recall_all@5": 0, "p50_ms": 0, "p95_ms": 0, "by_category": {}}
        for n, s in RES["systems"].items()
    }  # fmt: skip
    res = _lme_res(loc) | {"corpus": "all", "units": {"fact": 1, "history": 0}, "n_conversations": 1, "k_max": 20,
                           "n_qa_total": 1, "n_eligible": 1, "evidence_anomalies": [], "categories": {}}  # fmt: skip
    assert "| all | " in locomo_markdown(res).split("## Hybrid against its best single signal, per type")[1]

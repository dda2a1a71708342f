"""A LoCoMo run's result files: locomo.json, locomo.md, the recall and budget plots, and the optional details and
rankings files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memclaw.bench import metrics as M
from memclaw.bench.plots import budget_plot, recall_plot
from memclaw.bench.rankings import write_rankings
from memclaw.bench.report import budget_md, disk_md, md_table, one_memory_md, provenance_md
from memclaw.bench.signal_view import signal_view_md


def locomo_markdown(res: dict[str, Any]) -> str:
    ks = M.RECALL_KS
    lines = [
        f"# LoCoMo recall benchmark — corpus `{res['corpus']}`",
        "",
        *provenance_md(res),
        f"- corpus `{res['corpus']}`: {res['units']['fact']} facts, {res['units']['history']} history entries, "
        f"{res['units'].get('archive', 0)} archived turns (written through memclaw's consolidation writer) "
        f"over {res['n_conversations']} conversations; {res['n_questions']} questions (categories 1-4 with evidence; "
        f"{res['n_qa_total']} QA in the file, {res['n_eligible']} eligible); top {res['k_max']} per query",
        f"- index time (embed + both indexes, all conversations): {res['index_seconds']} s; "
        f"evidence anomalies: {len(res['evidence_anomalies'])}",
        *disk_md(res),
        *(["", *one_memory_md(res)] if res.get("one_memory") else []),
        "",
        "## Overall",
        "",
    ]
    header = ["system", *[f"R@{k}" for k in ks], "hit@1", "hit@5", "MRR", "nDCG@10", "all@5", "p50 ms", "p95 ms"]
    rows = []
    for name, s in res["systems"].items():
        rows.append(
            [name, *[s[f"recall@{k}"] for k in ks], s["hit@1"], s["hit@5"], s["mrr"], s["ndcg@10"],
             s["recall_all@5"], s["p50_ms"], s["p95_ms"]]
        )  # fmt: skip
    lines += md_table(header, rows)
    lines += ["", *budget_md(res, ["recall"])]
    keys = ["recall@5", "recall@10", *[f"recall@{b}t" for b in res.get("budgets", ())]]
    view = signal_view_md(res, by="by_category", keys=keys, names=res["categories"])
    lines += ["", *view] if view else []
    for cat, cname in res["categories"].items():
        if not any(cat in s["by_category"] for s in res["systems"].values()):
            continue
        n = next(iter(res["systems"].values()))["by_category"].get(cat, {}).get("n", 0)
        lines += ["", f"## Category {cat} ({cname}, {n} questions)", ""]
        bk = [f"recall@{b}t" for b in res.get("budgets", ())]
        header = [
            "system",
            *[f"R@{k}" for k in ks],
            "hit@5",
            "MRR",
            "nDCG@10",
            *[f"R@{b}t" for b in res.get("budgets", ())],
        ]
        rows = []
        for name, s in res["systems"].items():
            c = s["by_category"].get(cat)
            if c:
                rows.append(
                    [name, *[c[f"recall@{k}"] for k in ks], c["hit@5"], c["mrr"], c["ndcg@10"], *[c.get(k) for k in bk]]
                )
        lines += md_table(header, rows)
    lines += ["", "## Systems", ""]
    lines += [f"- `{n}`: {s.get('description', '')}" for n, s in res["systems"].items()]
    if res["evidence_anomalies"]:
        lines += ["", "## Evidence anomalies (upstream data, normalised)", ""]
        lines += [f"- {a}" for a in res["evidence_anomalies"]]
    return "\n".join(lines) + "\n"


def write_locomo_results(res: dict[str, Any], out_dir: Path) -> list[Path]:
    """DIR/locomo.json (without per-question details), locomo.md, locomo-recall.png, and
    locomo-details.json when the run kept details."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "locomo.json", out_dir / "locomo.md", out_dir / "locomo-recall.png"]
    summary = {k: v for k, v in res.items() if k not in ("questions", "rankings")}
    paths[0].write_text(json.dumps(summary, indent=2) + "\n", "utf-8")
    if "rankings" in res:
        paths.append(write_rankings(res, out_dir / "locomo-rankings.json.gz"))
    if "questions" in res:
        paths.append(out_dir / "locomo-details.json")
        paths[-1].write_text(json.dumps(res["questions"], indent=1) + "\n", "utf-8")
    paths[1].write_text(locomo_markdown(res), "utf-8")
    recall_plot(res, paths[2])
    if res.get("budgets"):
        paths.append(out_dir / "locomo-budget.png")
        budget_plot(res, paths[-1])
    return paths

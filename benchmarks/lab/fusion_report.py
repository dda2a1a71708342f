"""The fusion lab's report: every tried rule with its split-half figures, token cost and ranking time, and the
adopted rule per question type / category against today's and the single signals (results/fusion-lab.md).

    .venv/bin/python benchmarks/lab/fusion_report.py --out benchmarks/results/fusion-lab.md
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fusion_rules as R  # noqa: E402
from fusion_lab import load, score  # noqa: E402

VARIANTS = {
    "hybrid": "today's default (weighted: BM25 / its best * 0.7 + cosine; date lift half the best score)",
    "previous-strip": "today's fusion, date words out of BM25",
    "adopted-nostrip": "adopted rule, date words kept in BM25",
    "z": "z-scores of both signals over their candidates, summed",
    "n-med-raw-0.5": "BM25 above its median / best above median (0.5) + cosine",
    "n-minmax-minmax-0.7": "both signals min-max over their candidates (BM25 0.7)",
    "t-minmax": "cosine min-max over its candidates, BM25 / its best * 0.7",
    "t-minmax-best": "as t-minmax, vector weight * best cosine / 0.6",
    "cand": "cosine min-max, confidences (s1/bound, c1 - median)^0.25, BM25 0.6, date lift 0.5 of the full scale",
    "cand-keep3": "cand + placement 3k",
    "cand-floor50": "cand with the cosine above its floor instead of min-max, gap over the first 50",
    "adopted-after0.0": "cand-floor50 + placement 3k (units stamped outside a named span exempt)",
    "product": "**adopted**: adopted-after0.0 + units stamped just after a named span get half the date lift",
    "adopted-keep0": "the adopted rule without the placement",
    "adopted-keep2": "adopted, placement 2k",
    "adopted-keep4": "adopted, placement 4k",
    "adopted-conf0": "adopted, confidence powers 0 (scales only)",
    "adopted-conf0.5": "adopted, confidence powers 0.5",
    "adopted-bm25w0.7": "adopted, BM25 weight 0.7",
    "adopted-date0.3": "adopted, date weight 0.3",
    "adopted-date0.8": "adopted, date weight 0.8",
    "adopted-after0.25": "adopted, after-span share 0.25",
    "adopted-after1.0": "adopted, after-span share 1.0",
    "adopted-nodate": "adopted, no date handling",
    "date1": "today's fusion, date lift = the best score (dates first)",
    "bm25-raw": "BM25 alone",
    "vector-raw": "vector alone (best passage or head)",
    "vector-head": "one head vector per unit",
}
LME_KEYS = ("recall_any@5", "recall_all@5", "recall_any@10", "recall_all@10", "recall_all@1024t", "tokens@5")
LOC_KEYS = ("recall@10", "recall@128t", "recall@256t", "recall@512t", "recall@1024t", "tokens@10")


def _cell(res: dict, k: str) -> str:
    if k.startswith("tokens"):
        return f"{res['all'][k]:.0f}"
    return f"{res['A'][k]:.3f} / {res['B'][k]:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dumps", type=Path, default=Path("DUMPS"))
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    sets = {
        "lme": load(a.dumps / "lme.json.gz", "lme"),
        "all": load(a.dumps / "locomo-all.json.gz", "locomo"),
        "facts": load(a.dumps / "locomo-facts.json.gz", "locomo"),
    }
    res: dict[str, dict[str, dict]] = {}
    ms: dict[str, float] = {}
    for name in VARIANTS:
        res[name] = {}
        t = 0.0
        for s, qs in sets.items():
            res[name][s], m = score(qs, R.RULES[name], "lme" if s == "lme" else "locomo")
            t += m * len(qs)
        ms[name] = t / sum(len(qs) for qs in sets.values())
    head = ["rule", *[f"LME {k.replace('recall_', '')}" for k in LME_KEYS],
            *[f"LoCoMo all {k.replace('recall', 'R')}" for k in LOC_KEYS], "facts R@10", "rank ms", "what"]  # fmt: skip
    lines = [
        "# Fusion lab: the rules tried for issue 21, split-half",
        "",
        f"- date: {datetime.now().astimezone().isoformat(timespec='seconds')}; "
        "`benchmarks/lab/fusion_report.py` over the "
        "signals `benchmarks/lab/fusion_dump.py` wrote (exact vector store) for LongMemEval dev (217 scored questions) "
        "and LoCoMo dev (760 questions, corpora `all` and `facts`)",
        "- each recall cell: half A / half B (LongMemEval: by question id within type; LoCoMo: A = conv-26, -30, "
        "-41, B = conv-42, -43); tokens: mean memory-section tokens of the top 5 (LME) / top 10 (LoCoMo), whole set; "
        "rank ms: the ranking stage's mean time per query in this replay (the signals are given)",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for name, what in VARIANTS.items():
        r = res[name]
        cells = [_cell(r["lme"], k) for k in LME_KEYS] + [_cell(r["all"], k) for k in LOC_KEYS]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {_cell(r['facts'], 'recall@10')} | {ms[name]:.2f} | "
                     f"{what} |")  # fmt: skip
    for s, by, keys in (("lme", "by_question_type", LME_KEYS), ("all", "by_category", LOC_KEYS)):
        lines += ["", f"## {'LongMemEval per question type' if s == 'lme' else 'LoCoMo `all` per category'} "
                  "(half A / half B)", ""]  # fmt: skip
        groups = sorted(res["product"][s]["all"][by])
        for g in groups:
            n = res["product"][s]["all"][by][g]["n"]
            lines += [
                f"**{g}** ({n} questions)",
                "",
                "| rule | " + " | ".join(keys) + " |",
                "|" + "---|" * (len(keys) + 1),
            ]
            for name in ("hybrid", "product", "adopted-keep0", "bm25-raw", "vector-raw", "vector-head"):
                cells = []
                for k in keys:
                    a_, b_ = (res[name][s][h][by].get(g, {}).get(k, 0.0) for h in "AB")
                    cells.append(
                        f"{res[name][s]['all'][by][g][k]:.0f}" if k.startswith("tokens") else f"{a_:.3f} / {b_:.3f}"
                    )
                lines.append(f"| {name} | " + " | ".join(cells) + " |")
            lines.append("")
    a.out.write_text("\n".join(lines) + "\n", "utf-8")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()

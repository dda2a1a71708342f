"""The fusion lab's target check: for each rule, the issue-21 targets on the whole development sets and the
split-half verdict against today's rule.

    .venv/bin/python benchmarks/lab/fusion_check.py --rules product,adaptive

LongMemEval: recall_any/all at k = 5, 10 overall and on every question type with >= 10 questions against every
single signal (`bm25-raw`, `vector-raw`, `vector-head`), any@5 >= 0.98 and all@5 >= 0.92. LoCoMo `all`: every
budget and every category's budgets within 0.005 of today; R@10 (count view) beside. `facts`: R@10 >= 0.644.
Split-half: the rule against today's on each half (LongMemEval: no metric lower; LoCoMo: none lower by more than
0.005); a rule that holds on both halves is ADOPTABLE.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fusion_rules as R  # noqa: E402
from fusion_lab import load, score  # noqa: E402

LME_K = ("recall_any@5", "recall_all@5", "recall_any@10", "recall_all@10")
BUDGETS = ("recall@128t", "recall@256t", "recall@512t", "recall@1024t")
SINGLES = ("bm25-raw", "vector-raw", "vector-head")
TOL = 0.005


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dumps", type=Path, default=Path("DUMPS"))
    ap.add_argument("--rules", required=True)
    ap.add_argument("--today", default="hybrid")
    a = ap.parse_args()
    lme = load(a.dumps / "lme.json.gz", "lme")
    loc = load(a.dumps / "locomo-all.json.gz", "locomo")
    facts = load(a.dumps / "locomo-facts.json.gz", "locomo")
    singles = {n: score(lme, R.RULES[n], "lme")[0]["all"] for n in SINGLES}
    today = {"lme": score(lme, R.rule(a.today), "lme")[0], "all": score(loc, R.rule(a.today), "locomo")[0],
             "facts": score(facts, R.rule(a.today), "locomo")[0]}  # fmt: skip
    for name in a.rules.split(","):
        rule = R.rule(name)
        res = {"lme": score(lme, rule, "lme")[0], "all": score(loc, rule, "locomo")[0],
               "facts": score(facts, rule, "locomo")[0]}  # fmt: skip
        fails = []
        L = res["lme"]["all"]
        line = " ".join(f"{k.replace('recall_', '')} {L[k]:.3f}" for k in LME_K)
        if L["recall_any@5"] < 0.98 or L["recall_all@5"] < 0.92:
            fails.append("LME any@5/all@5 target")
        for t, v in [("all", L), *L["by_question_type"].items()]:
            if v["n"] < 10:
                continue
            for k in LME_K:
                for sn, s in singles.items():
                    sv = s[k] if t == "all" else s["by_question_type"][t][k]
                    if sv > v[k] + 1e-9:
                        fails.append(f"LME {t} {k} {v[k]:.3f} < {sn} {sv:.3f}")
        A = res["all"]["all"]
        T = today["all"]["all"]
        for k in BUDGETS:
            if A[k] < T[k] - TOL:
                fails.append(f"LoCoMo all {k} {A[k]:.3f} < today {T[k]:.3f}")
        for c, v in A["by_category"].items():
            for k in BUDGETS:
                tv = T["by_category"][c][k]
                if v[k] < tv - TOL:
                    fails.append(f"LoCoMo all cat {c} {k} {v[k]:.3f} < today {tv:.3f}")
        F = res["facts"]["all"]["recall@10"]
        if F < 0.644:
            fails.append(f"facts R@10 {F:.3f} < 0.644")
        halves = []
        for h in "AB":
            worse = [f"LME {k}" for k in LME_K if res["lme"][h][k] < today["lme"][h][k] - 1e-9]
            worse += [f"all {k}" for k in ("recall@10", *BUDGETS) if res["all"][h][k] < today["all"][h][k] - TOL]
            worse += ["facts R@10"] if res["facts"][h]["recall@10"] < today["facts"][h]["recall@10"] - TOL else []
            halves.append(f"{h}: " + (", ".join(worse) or "none worse"))
        loc_line = " ".join(f"{k[7:]} {A[k]:.3f}({A[k] - T[k]:+.3f})" for k in ("recall@10", *BUDGETS))
        verdict = "ADOPTABLE" if all(h.endswith("none worse") for h in halves) else "not adoptable"
        print(f"\n## {name} [{verdict}]\nLME {line} | LoCoMo all {loc_line} | facts R@10 {F:.3f}")
        print("targets: " + ("MET" if not fails else "; ".join(fails)))
        print("split-half vs today: " + " | ".join(halves))


if __name__ == "__main__":
    main()

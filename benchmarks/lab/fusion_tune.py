"""Split-half tuning for the fusion lab: a rule family's parameters chosen on one half of the questions (LongMemEval
dev by question id within type, LoCoMo dev by conversation), scored on the other, both ways.

    .venv/bin/python benchmarks/lab/fusion_tune.py --family adaptive [--rounds 2]

The objective on a half: LongMemEval recall_any / recall_all at k = 5 and 10 (their mean), as long as no LoCoMo
`all` budget (128..1024 tokens) and LoCoMo `facts` R@10 falls below today's on that half by more than `--slack`;
a setting that does is scored by how far it falls. Coordinate search: each parameter in turn over its grid,
keeping the best, for `--rounds` rounds.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fusion_rules as R  # noqa: E402
from fusion_lab import load, score  # noqa: E402

LME = ("recall_any@5", "recall_all@5", "recall_any@10", "recall_all@10")
LOCOMO_ALL = ("recall@128t", "recall@256t", "recall@512t", "recall@1024t")
R10_SLACK = 0.005  # the count view of LoCoMo `all` (R@10) may lose this much


class Sets:
    def __init__(self, dumps: Path) -> None:
        self.lme = load(dumps / "lme.json.gz", "lme")
        self.all = load(dumps / "locomo-all.json.gz", "locomo")
        self.facts = load(dumps / "locomo-facts.json.gz", "locomo")

    def run(self, rule) -> dict[str, dict]:
        return {
            "lme": score(self.lme, rule, "lme")[0],
            "all": score(self.all, rule, "locomo")[0],
            "facts": score(self.facts, rule, "locomo")[0],
        }


def objective(res: dict[str, dict], base: dict[str, dict], half: str, slack: float) -> float:
    gain = sum(res["lme"][half][k] for k in LME) / len(LME)
    short = [base["all"][half][k] - slack - res["all"][half][k] for k in LOCOMO_ALL]
    short.append(base["facts"][half]["recall@10"] - slack - res["facts"][half]["recall@10"])
    short.append(base["all"][half]["recall@10"] - R10_SLACK - res["all"][half]["recall@10"])
    miss = sum(max(0.0, s) for s in short)
    return gain - 10 * miss


def tune(sets: Sets, family, grid: dict[str, list], start: dict, base: dict, half: str, slack: float, rounds: int):
    cache: dict[tuple, dict] = {}

    def evaluate(p: dict) -> dict:
        key = tuple(sorted(p.items()))
        if key not in cache:
            cache[key] = sets.run(family(**p))
        return cache[key]

    best = dict(start)
    best_v = objective(evaluate(best), base, half, slack)
    for _ in range(rounds):
        for name, values in grid.items():
            for v in values:
                p = {**best, name: v}
                o = objective(evaluate(p), base, half, slack)
                if o > best_v + 1e-9:
                    best, best_v = p, o
                    print(f"  [{half}] {p} -> {o:.4f}", file=sys.stderr, flush=True)
    return best, evaluate(best)


def summary(res: dict[str, dict], half: str) -> str:
    lme = " ".join(f"{res['lme'][half][k]:.3f}" for k in LME)
    loc = " ".join(f"{res['all'][half][k]:.3f}" for k in ("recall@10", *LOCOMO_ALL))
    return f"LME {lme} | LoCoMo all R@10 {loc} | facts R@10 {res['facts'][half]['recall@10']:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dumps", type=Path, default=Path("DUMPS"))
    ap.add_argument("--family", default="adaptive")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--slack", type=float, default=0.002)
    ap.add_argument("--base", default="hybrid", help="the rule the constraints compare with")
    a = ap.parse_args()
    sets = Sets(a.dumps)
    family, grid, start = R.FAMILIES[a.family]
    base = sets.run(R.RULES[a.base])
    for half, other in (("A", "B"), ("B", "A")):
        p, res = tune(sets, family, grid, start, base, half, a.slack, a.rounds)
        print(f"tuned on {half}: {p}")
        print(f"  on {half} (tuned):   {summary(res, half)}")
        print(f"  on {other} (held out): {summary(res, other)}")
        print(f"  today on {other}:      {summary(base, other)}")


if __name__ == "__main__":
    main()

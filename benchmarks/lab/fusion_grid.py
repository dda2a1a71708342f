"""The fusion lab's full grid, split-half: every point of a rule family's grid scored on both halves, the best point
of each half by the tuner's objective (fusion_tune.objective) held out on the other, and which points hold against
the product's rule on both halves.

    .venv/bin/python benchmarks/lab/fusion_grid.py --family product --out DUMPS/grid.json [--part 0/2]

`--part i/n` scores every n-th point from the i-th (run n processes, then once more without `--part` to merge the
parts and report). A point *holds* on a half when no LongMemEval recall_any / recall_all at k = 5, 10 is lower than
the product's and no LoCoMo `all` figure (R@10, R@128t..R@1024t) nor `facts` R@10 is lower by more than 0.005.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fusion_rules as R  # noqa: E402
from fusion_tune import LME, LOCOMO_ALL, Sets, objective  # noqa: E402

TOL = 0.005
KEEP = {"lme": LME, "all": ("recall@10", *LOCOMO_ALL), "facts": ("recall@10",)}


def slim(res: dict) -> dict:
    """The figures the report reads, per half and overall, and LongMemEval's per type."""
    out = {n: {h: {k: res[n][h][k] for k in KEEP[n]} for h in ("A", "B", "all")} for n in KEEP}
    out["lme_types"] = {t: {k: v[k] for k in LME} | {"n": v["n"]}
                        for t, v in res["lme"]["all"]["by_question_type"].items()}  # fmt: skip
    return out


def holds(p: dict, base: dict, half: str) -> list[str]:
    """What `p` loses against `base` on `half` (empty: it holds)."""
    worse = [f"LME {k}" for k in LME if p["lme"][half][k] < base["lme"][half][k] - 1e-9]
    worse += [f"all {k}" for k in KEEP["all"] if p["all"][half][k] < base["all"][half][k] - TOL]
    worse += ["facts R@10"] if p["facts"][half]["recall@10"] < base["facts"][half]["recall@10"] - TOL else []
    return worse


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dumps", type=Path, default=Path("DUMPS"))
    ap.add_argument("--family", default="product")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--part", default="")
    ap.add_argument("--slack", type=float, default=0.005)
    a = ap.parse_args()
    family, grid, _start = R.FAMILIES[a.family]
    names = list(grid)
    points = [dict(zip(names, vals, strict=True)) for vals in itertools.product(*grid.values())]
    if a.part:
        i, n = (int(x) for x in a.part.split("/"))
        sets = Sets(a.dumps)
        done = {}
        for j, p in enumerate(points[i::n]):
            done[json.dumps(p, sort_keys=True)] = slim(sets.run(family(**p)))
            print(f"{j + 1}/{len(points[i::n])} {p}", file=sys.stderr, flush=True)
        a.out.with_suffix(f".part{i}.json").write_text(json.dumps(done))
        return
    done = {}
    for f in sorted(a.out.parent.glob(a.out.stem + ".part*.json")):
        done.update(json.loads(f.read_text()))
    sets = Sets(a.dumps)
    base = slim(sets.run(R.RULES["hybrid"]))  # the tuner's constraints: the rule before issue 21
    prod = slim(sets.run(R.RULES["product"]))
    rows = []
    for key, res in done.items():
        full = {n: res[n] for n in KEEP}
        rows.append({"point": json.loads(key), "res": res,
                     "obj": {h: objective(full, base, h, a.slack) for h in "AB"},
                     "loses": {h: holds(res, prod, h) for h in "AB"}})  # fmt: skip
    a.out.write_text(json.dumps({"product": prod, "rows": rows}))
    print(f"{len(rows)} points; product: A {objective(prod, base, 'A', a.slack):.4f} B "
          f"{objective(prod, base, 'B', a.slack):.4f}")  # fmt: skip
    for h, o in (("A", "B"), ("B", "A")):
        best = max(rows, key=lambda r: (r["obj"][h], -sum(abs(v) for v in r["point"].values())))
        top = sorted(rows, key=lambda r: -r["obj"][h])[:5]
        print(f"\nbest on {h}: {best['point']} obj {best['obj'][h]:.4f}; on {o} {best['obj'][o]:.4f}; "
              f"loses on {o}: {best['loses'][o] or 'nothing'}; on {h}: {best['loses'][h] or 'nothing'}")  # fmt: skip
        for r in top:
            print(f"  {r['point']} {h} {r['obj'][h]:.4f} {o} {r['obj'][o]:.4f} loses {o}: {r['loses'][o]}")
    both = [r for r in rows if not r["loses"]["A"] and not r["loses"]["B"]]
    print(f"\n{len(both)} points hold against the product on both halves; by the worse half's objective:")
    for r in sorted(both, key=lambda r: -min(r["obj"].values()))[:10]:
        ms = r["res"]["lme_types"].get("multi-session", {})
        print(f"  {r['point']} A {r['obj']['A']:.4f} B {r['obj']['B']:.4f} multi-session all@5 "
              f"{ms.get('recall_all@5', 0):.3f}")  # fmt: skip


if __name__ == "__main__":
    main()

"""Compare two benchmark runs exactly: every quality figure and, when both runs wrote them (`--rankings`), every
question's ranked ids and what each memory-section budget kept.

    python benchmarks/bench_diff.py BEFORE_DIR AFTER_DIR [--out report.md]

Each DIR holds one run's results (`locomo.json` or `longmemeval.json`, and `*-rankings.json.gz`). Timings and
provenance (latencies, dates, machine, index/run seconds, the data file's path) are not compared: they differ
between any two runs. Prints a Markdown report; exit 0 when nothing differs, 1 otherwise.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from typing import Any

VOLATILE = {"p50_ms", "p95_ms", "date", "machine", "run_seconds", "index_seconds", "data_file"}


def _load_dir(d: Path) -> tuple[str, dict[str, Any], dict[str, Any] | None]:
    for name in ("locomo", "longmemeval"):
        f = d / f"{name}.json"
        if f.exists():
            rk = d / f"{name}-rankings.json.gz"
            rankings = json.loads(gzip.decompress(rk.read_bytes())) if rk.exists() else None
            return name, json.loads(f.read_text("utf-8")), rankings
    raise SystemExit(f"error: no locomo.json or longmemeval.json in {d}")


def diff_values(a: Any, b: Any, path: str = "") -> list[str]:
    """Every leaf that differs between two JSON values, as 'path: a -> b' (volatile keys skipped)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in sorted(set(a) | set(b), key=str):
            if k in VOLATILE:
                continue
            p = f"{path}.{k}" if path else str(k)
            if k not in a or k not in b:
                out.append(f"{p}: {'missing' if k not in a else 'present'} -> {'missing' if k not in b else 'present'}")
            else:
                out += diff_values(a[k], b[k], p)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in diff_values(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} -> {b!r}"]


def diff_rankings(a: dict[str, Any], b: dict[str, Any]) -> tuple[int, list[str]]:
    """(how many (question, system) answers were compared, the ones that differ)."""
    n = 0
    out: list[str] = []
    for q in sorted(set(a) | set(b)):
        sa, sb = a.get(q, {}), b.get(q, {})
        for s in sorted(set(sa) | set(sb)):
            n += 1
            if sa.get(s) != sb.get(s):
                out.append(f"{q} / {s}")
    return n, out


def compare(before: Path, after: Path) -> tuple[bool, list[str]]:
    name_a, res_a, rk_a = _load_dir(before)
    name_b, res_b, rk_b = _load_dir(after)
    lines = [f"## {name_a}: `{before}` -> `{after}`", ""]
    if name_a != name_b:
        return False, [*lines, f"- different benchmarks: {name_a} vs {name_b}"]
    figures = diff_values(res_a, res_b)
    lines.append(f"- quality figures and provenance (timings excluded): {len(figures)} difference(s)")
    lines += [f"  - {d}" for d in figures[:50]]
    same = not figures
    if rk_a is None or rk_b is None:
        lines.append("- rankings: not compared (run both with --rankings)")
    else:
        n, changed = diff_rankings(rk_a, rk_b)
        lines.append(f"- rankings: {n} (question, system) answers compared, {len(changed)} differ")
        lines += [f"  - {c}" for c in changed[:50]]
        same = same and not changed
    return same, lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--out", type=Path, help="also write the report here")
    args = ap.parse_args(argv)
    same, lines = compare(args.before, args.after)
    lines += ["", f"**{'identical' if same else 'DIFFERENT'}**", ""]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text, "utf-8")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

"""The date parser's time on a long query, current code against a baseline checkout's, in one run (issue 39.10).

    python benchmarks/bench_date_parser.py --baseline /path/to/old-checkout [--out FILE.md]

The query is "last week " repeated N times (the issue's reproduction at N = 20,000). The baseline's parser is
loaded from its file (`memclaw/recall/dates.py` there, which imports only the standard library); the current one
is memclaw.markdown.dates. Each figure is the best of a few runs of `find_date_ranges` (one run when it takes over
a second), wall clock on this machine.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZES = (1_000, 5_000, 20_000)
NOW = datetime(2026, 11, 29, 12, 0)


def _timed(fn, text: str) -> tuple[float, int]:
    best, n = float("inf"), 0
    for _ in range(3):
        t = time.perf_counter()
        n = len(fn(text, NOW))
        best = min(best, time.perf_counter() - t)
        if best > 1:
            break
    return best, n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "date-parser.md")
    a = ap.parse_args()
    spec = importlib.util.spec_from_file_location("baseline_dates", a.baseline / "memclaw" / "recall" / "dates.py")
    old = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["baseline_dates"] = old
    spec.loader.exec_module(old)  # type: ignore[union-attr]
    from memclaw.markdown.dates import find_date_ranges

    commit = lambda p: subprocess.run(["git", "-C", str(p), "rev-parse", "--short", "HEAD"], capture_output=True,  # noqa: E731
                                      text=True).stdout.strip() or "?"  # fmt: skip
    current = commit(ROOT)  # the code imported now
    rows = []
    for n in SIZES:
        text = "last week " * n
        (t_old, n_old), (t_new, n_new) = _timed(old.find_date_ranges, text), _timed(find_date_ranges, text)
        rows.append(f"| {n:,} | {len(text):,} | {t_old:.3f} | {n_old:,} | {t_new:.4f} | {n_new} |")
        print(rows[-1], flush=True)
    load = os.getloadavg()
    lines = [
        "# Date parser on a long query, before and after (issue 39.10)",
        "",
        f"- date: {datetime.now().astimezone():%Y-%m-%d %H:%M %Z}; machine: {os.cpu_count()} CPUs (shared), Python "
        f"{sys.version.split()[0]}; load average at the end {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}",
        f"- baseline: {a.baseline} ({commit(a.baseline)}); current: {current}",
        '- method: `benchmarks/bench_date_parser.py` (docstring): `find_date_ranges("last week " * N)`',
        "",
        "| N | characters | before s | ranges before | after s | ranges after |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ]
    a.out.write_text("\n".join(lines), "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

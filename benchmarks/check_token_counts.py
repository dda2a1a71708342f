"""memclaw's token counts (tiktoken on litellm's BPE files, no litellm import) against litellm's `token_counter`, on
the benchmarks' own texts: the budgeted recall figures (R@256t, ...) fill the prompt's memory section with these
counts, so they stay identical only if every count does.

    .venv/bin/python benchmarks/check_token_counts.py [--data ../shared/data] [--limit 20000]

Reads LoCoMo (observations, session summaries, turns) and LongMemEval (haystack turns), counts each text for both
families (o200k: gpt-4o, cl100k: every other model) both ways, and writes benchmarks/results/token-counts.md.
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
import random
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def texts_from(data: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"locomo": [], "longmemeval": []}
    for conv in json.loads((data / "locomo" / "locomo-dev.json").read_text("utf-8")):
        for key, turns in conv["conversation"].items():
            if key.startswith("session_") and isinstance(turns, list):
                out["locomo"] += [t["text"] for t in turns if t.get("text")]
        for facts in conv.get("observation", {}).values():
            for per_speaker in facts.values():
                out["locomo"] += [f[0] for f in per_speaker if f and isinstance(f[0], str)]
        out["locomo"] += [s for s in conv.get("session_summary", {}).values() if isinstance(s, str)]
    with gzip.open(data / "longmemeval" / "lme-s-dev.json.gz", "rt", encoding="utf-8") as f:
        for q in json.load(f)[:40]:
            for session in q["haystack_sessions"]:
                out["longmemeval"] += [t["content"] for t in session if t.get("content")]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--limit", type=int, default=20000, help="texts per data set (a seeded sample)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "token-counts.md")
    args = ap.parse_args()
    from memclaw.llm.client import litellm_module
    from memclaw.llm.tokens import counter_for

    counter = litellm_module().token_counter
    rows = []
    for name, texts in texts_from(args.data).items():
        sample = random.Random(0).sample(texts, min(args.limit, len(texts)))
        for family, model in (("o200k", "gpt-4o"), ("cl100k", "gpt-4")):
            mine = counter_for(model)
            t = time.perf_counter()
            ours = [mine(x) for x in sample]
            ours_s = time.perf_counter() - t
            t = time.perf_counter()
            theirs = [int(counter(model=model, text=x)) for x in sample]
            theirs_s = time.perf_counter() - t
            diff = sum(a != b for a, b in zip(ours, theirs, strict=True))
            rows.append((name, family, len(sample), sum(theirs), diff, ours_s, theirs_s))
    lines = [
        "# Token counts: memclaw.llm.tokens against litellm.token_counter",
        "",
        f"Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; Python {platform.python_version()}; "
        f"command: `python benchmarks/check_token_counts.py --limit {args.limit}`",
        "",
        "| data | family | texts | tokens (litellm) | texts counted differently | memclaw s | litellm s |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        *(f"| {n} | {f} | {k} | {tok} | {d} | {a:.2f} | {b:.2f} |" for n, f, k, tok, d, a, b in rows),
        "",
        "Every count equal: the prompt budget, and the budgeted recall figures in benchmarks/results, are unchanged."
        if all(r[4] == 0 for r in rows)
        else "**Counts differ**: budgeted figures would change.",
        "",
    ]
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    sys.exit(0 if all(r[4] == 0 for r in rows) else 1)


if __name__ == "__main__":
    main()

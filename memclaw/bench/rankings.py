"""Every ranked id of a run, per question and system, with what each memory budget kept: for an exact before/after
comparison (benchmarks/bench_diff.py reads the file)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memclaw.bench import metrics as M


def ranking_record(ranked: list[str], view: M.Budgeted) -> dict[str, Any]:
    """What one system answered for one question, for an exact before/after comparison: the ranked ids and the
    ids each memory-section budget kept."""
    return {"ranked": list(ranked), "kept": {str(b): list(ids) for b, ids in view.kept.items()}}


def write_rankings(res: dict[str, Any], path: Path) -> Path:
    """The per-question rankings of a run (`rankings=True`) as gzipped JSON (benchmarks/bench_diff.py reads it)."""
    import gzip

    path.write_bytes(gzip.compress(json.dumps(res["rankings"], sort_keys=True).encode("utf-8"), mtime=0))
    return path

"""Recall-quality and performance benchmarks (`memclaw bench ...`), run through memclaw's real path.

The public API is the modules in `__all__`: what the `memclaw bench` command and the scripts in benchmarks/ use.
- Data sets: locomo (LoCoMo), longmemeval (LongMemEval), synthetic and synthetic_archive (made-up memories), and
  record (writing a conversation as consolidation would).
- A run: run_config (its configuration and embedder), systems (the systems it compares), corpus (a converted
  workspace), embedcache (cached vectors), runner (LoCoMo), one_memory (one memory for both sets), models (one
  run per embedding model), perf and perf_measure (`bench perf`).
- Results: metrics (pure scores), budgeted (the memory-budget view), paired (question by question), report,
  locomo_report and perf_report (result files), machine (the machine a run was on).

The other modules are internals of a run: baselines, estimate, plots, prepared, progress, rankings, signal_view,
workspaces. Heavy libraries are imported lazily.
"""

__all__ = [
    "budgeted",
    "corpus",
    "embedcache",
    "locomo",
    "locomo_report",
    "longmemeval",
    "machine",
    "metrics",
    "models",
    "one_memory",
    "paired",
    "perf",
    "perf_measure",
    "perf_report",
    "record",
    "report",
    "run_config",
    "runner",
    "synthetic",
    "synthetic_archive",
    "systems",
]

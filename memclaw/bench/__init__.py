"""Recall-quality and performance benchmarks (`memclaw bench ...`), run through memclaw's real path.

Modules: locomo (LoCoMo loader + converter), longmemeval (LongMemEval loader, converter, runner), metrics (pure),
baselines (grep, grep-ranked), systems (named recall configurations), corpus (converted workspace + coverage),
run_config (a run's configuration and embedder), workspaces (a corpus's workspace for a run), prepared (one corpus
indexed and its systems bound), budgeted (the memory-budget view of a ranking), runner (the LoCoMo run loop),
rankings, report (shared Markdown/JSON/stdout parts), signal_view (the hybrid against its single signals, per
type), paired (the same question by question), plots, locomo_report (LoCoMo result files), machine, progress,
perf (`bench perf`), perf_measure (its timed measurements), perf_report (its result files), synthetic (its synthetic
memories). Heavy libraries are imported lazily.
"""

"""Recall-quality and performance benchmarks (`memclaw bench ...`), run through memclaw's real path.

Modules: locomo (LoCoMo loader + converter), longmemeval (LongMemEval loader, converter, runner), metrics (pure),
baselines (grep, grep-ranked), systems (named recall configurations), corpus (converted workspace + coverage),
runner (LoCoMo runs and result files), perf (`bench perf`). Heavy libraries are imported lazily.
"""

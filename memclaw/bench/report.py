"""The parts every benchmark report shares: Markdown tables, the provenance lines, the budgeted-view table, the
configuration summary of the JSON, and the compact table on stdout."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memclaw.config import Config


def _fmt(x: Any) -> str:
    return f"{x:.3f}" if isinstance(x, float) else str(x)


def md_table(header: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(_fmt(c) for c in r) + " |" for r in rows]
    return out


def provenance_md(res: dict[str, Any]) -> list[str]:
    m = res["machine"]
    return [
        f"- date: {res['date']}" + (f"; revision {res['revision']}" if res.get("revision") else ""),
        f"- machine: {m['nproc']} cores, {m['cpu']}, {m['ram_gib']} GiB RAM, {m['os']}, Python {m['python']}",
        f"- data: `{res['data_file']}` (sha256 `{res['data_sha256']}`)",
        f"- recall config (memclaw default): `{json.dumps(res['config']['recall'])}`",
        f"- embeddings: {res['config']['embeddings_model']}",
    ]


def disk_md(res: dict[str, Any]) -> list[str]:
    """The archive's disk use, per 1,000 archived turns (when the corpus has an archive)."""
    d = res.get("disk") or {}
    if not d.get("archived_turns"):
        return []
    return [
        f"- archive: {d['archived_turns']:,} archived turns; disk per 1,000 turns: Markdown "
        f"{d['archive_md_bytes_per_1000_turns'] / 1024:.0f} KiB, index {d['index_bytes_per_1000_turns'] / 2**20:.2f} "
        f"MiB (the whole index of the corpus, measured after the sync)"
    ]


def config_summary(base: Config) -> dict[str, Any]:
    from dataclasses import asdict

    recall = json.loads(base.recall.model_dump_json())
    return {"recall": recall, "tuning": asdict(base.recall.tuning), "embeddings_model": base.embeddings.model}


def run_provenance(base: Config, index_s: float, started: float) -> dict[str, Any]:
    """What every results file records about its run: budgets, token model, timings, date, machine, config."""
    import time
    from datetime import datetime

    from memclaw.bench import metrics as M
    from memclaw.bench.machine import machine_info, revision

    return {
        "revision": revision(),
        "budgets": list(M.BUDGETS),
        "token_model": base.agent.model,
        "index_seconds": round(index_s, 2),
        "run_seconds": round(time.time() - started, 1),
        "date": datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": machine_info(),
        "config": config_summary(base),
    }


def budget_md(res: dict[str, Any], metrics: Sequence[str]) -> list[str]:
    """The budgeted view: recall within a memory section of B tokens (filled by memclaw.context.memory_section, as the
    prompt is), beside the count view with what its top k costs in tokens."""
    budgets = res.get("budgets") or []
    if not budgets:
        return []
    lines = [
        "## Within a memory budget (the prompt's view)",
        "",
        f"Each system's top {res.get('k_ranked')} units go through the memory-section fill of the prompt at B tokens "
        f"(counted for `{res.get('token_model')}`); only the units kept count. `tok@k`: mean tokens the top k would "
        "take in the memory section; `used@Bt`: mean tokens the kept units take.",
        "",
    ]
    header = ["system"]
    for m in metrics:
        short = {"recall": "R", "recall_any": "any", "recall_all": "all"}[m]
        header += [f"{short}@{b}t" for b in budgets]
    header += [f"used@{b}t" for b in budgets] + ["tok@5", "tok@10"]
    rows = []
    for name, s in res["systems"].items():
        row = [name]
        for m in metrics:
            row += [s.get(f"{m}@{b}t") for b in budgets]
        row += [s.get(f"tokens@{b}t") for b in budgets] + [s.get("tokens@5"), s.get("tokens@10")]
        rows.append(row)
    return lines + md_table(header, rows)


def print_summary(res: dict[str, Any], keys: Sequence[str], *, questions: str | None = None) -> None:
    """A compact table of the main numbers on stdout, titled by `questions` (default: how many scored)."""
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"{res['dataset']} {res.get('corpus', '')} — {questions or str(res['n_questions']) + ' questions'}")
    t.add_column("system", no_wrap=True)
    for k in keys:
        short = k.replace("recall_any", "any").replace("recall_all", "all").replace("recall", "R").replace("_ms", "")
        t.add_column(short, justify="right", no_wrap=True)
    for name, s in res["systems"].items():
        t.add_row(name, *[_fmt(s.get(k, "")) for k in keys])
    Console(file=sys.stdout, width=200, markup=False, emoji=False).print(t)


def one_memory_md(res: dict[str, Any]) -> list[str]:
    """The one-memory section of a report: protocol, store size and what it costs."""
    one = res.get("one_memory")
    if not one:
        return []
    c = one["cost"]
    cold = c.get("cold_recall") or {}
    cold_s = cold.get("error") or (
        f"{cold.get('median_s')} s ({cold.get('cpu_s')} s of CPU), peak RSS {cold.get('peak_rss_mb')} MB"
    )
    lines = [
        "## One memory",
        "",
        f"- protocol `{one['protocol']}`: "
        + (
            "the store as of the question's date, other questions' answer sessions (LoCoMo: other conversations) "
            "masked, both before fusion"
            if one["protocol"] == "default"
            else "every unit a candidate"
        ),
        f"- store: {c.get('units', 0):,} units ({c.get('archived_turns', 0):,} archived turns); sessions cap "
        f"{one.get('sessions_cap') or 'none'} (seed {one['seed']})",
        (
            f"- cost: the store of an earlier run (--workdir), its sync check {c.get('index_seconds')} s"
            if c.get("reused")
            else f"- cost: write {c.get('write_seconds')} s, index {c.get('index_seconds')} s"
        )
        + (
            f" ({c['texts_embedded']:,} texts embedded, {c['texts_from_cache']:,} from the cache)"
            if "texts_embedded" in c
            else ""
        )
        + f", disk Markdown "
        f"{c['markdown_bytes'] / 2**20:.1f} MiB + index {c['index_bytes'] / 2**20:.1f} MiB; cold `memclaw recall` "
        f"{cold_s or 'not measured'}; warm p50 / p95 per system below (query embedding included)",
    ]
    return lines

"""`memclaw import SOURCE PATH`: another assistant's memory into this workspace (memclaw.importers; docs/import.md)."""

from __future__ import annotations

import sys
import time
from functools import partial
from pathlib import Path

import typer

from memclaw.cli.common import load, memory_service, note_interrupt, print_json
from memclaw.errors import UsageError


def import_command(
    kind: str,
    path: Path,
    workspace: Path | None,
    *,
    consolidate: bool,
    dry_run: bool,
    yes: bool,
    json_out: bool,
) -> None:
    from memclaw.importers import consolidate as llm_pass
    from memclaw.importers.run import Importer, dry_run_summary
    from memclaw.importers.sources import read_source
    from memclaw.util.progress import stderr_progress

    cfg, ws = load(workspace)
    # The whole source, validated before anything is written
    source = read_source(kind, path)
    mem = memory_service(cfg, ws, progress=not json_out)
    importer = Importer(mem, cfg)
    items, summary = importer.plan(source)
    est = None
    convs: list = []
    if consolidate:
        convs = llm_pass.conversations(importer.conversations, llm_pass.read_done(mem))
        est = llm_pass.estimate(cfg, convs)
        if not json_out:
            typer.echo(est.line(), err=True)
        if convs and not dry_run and not yes:
            if not sys.stdin.isatty():
                raise UsageError("--consolidate calls the model for every conversation: add --yes to go ahead")
            if not typer.confirm("Go ahead?", err=True):
                raise typer.Exit(1)
    if dry_run:
        _report(dry_run_summary(items, summary), est, json_out)
        return
    try:
        importer.write(items, summary, progress=None if json_out else partial(stderr_progress, unit="turn"))
        # also the scopes written before: a Ctrl-C in the last run's index sync left them to finish
        scopes = sorted(importer.scopes | set(summary.scopes))
        if scopes:
            t0 = time.monotonic()
            reports = mem.sync(scopes)
            summary.index_seconds = time.monotonic() - t0
            summary.vectors = sum(r.vectors for r in reports)
        if convs:
            progress = partial(stderr_progress, unit="conversation") if not json_out else None
            with progress(len(convs), "consolidating conversations") if progress else _null() as advance:
                summary.consolidated = llm_pass.consolidate(mem, cfg, convs, advance=advance)
    except KeyboardInterrupt:
        note_interrupt(
            f"import interrupted: {summary.records} of {len(items)} records written, each whole; run the same "
            "command again to add the rest"
        )
        raise
    _report(summary, est, json_out)


def _null():  # noqa: ANN202
    import contextlib

    return contextlib.nullcontext(None)


def _report(summary, est, json_out: bool) -> None:  # noqa: ANN001
    if json_out:
        data = summary.to_json()
        if est is not None:
            data["consolidation_estimate"] = est.to_json()
        print_json(data)
        return
    verb = "would add" if summary.dry_run else "added"
    s = summary.skipped
    lines = [
        f"{summary.source}: {verb} {summary.conversations:,} conversations ({summary.turns:,} turns), "
        f"{summary.facts:,} facts, {summary.history:,} history entries",
        f"already in memory, skipped: {s['conversations']:,} conversations, {s['facts']:,} facts, "
        f"{s['history']:,} history entries",
    ]
    if not summary.dry_run and summary.seconds > 0:
        lines.append(f"written in {summary.seconds:,.1f} s ({summary.rate:,.0f} turns/s)")
    if not summary.dry_run and summary.vectors:
        rate = summary.vectors / summary.index_seconds if summary.index_seconds > 0 else 0.0
        lines.append(f"indexed in {summary.index_seconds:,.1f} s ({summary.vectors:,} vectors, {rate:,.0f}/s)")
    if summary.consolidated:
        lines.append(f"consolidated {summary.consolidated:,} conversations with the model")
    for line in lines:
        typer.echo(line)

"""`memclaw recall`, `memclaw memory ...`, `memclaw onboard`: thin wrappers over MemoryService."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from memclaw.cli.common import (
    arg_or_stdin,
    console,
    err_console,
    held_warnings,
    invoked_as,
    load,
    memory_service,
    open_memory,
    print_json,
)
from memclaw.cli.sender_opt import sender_scope_for
from memclaw.markdown.units import MemoryUnit
from memclaw.util.redact import redact_url
from memclaw.util.richtext import line, warning
from memclaw.util.text import ECHO_CHARS, counted, shorten

if TYPE_CHECKING:
    from memclaw.context.memory_section import SectionFill
    from memclaw.recall.results import RecallResult


def onboard(*, demo: bool, workspace: Path | None) -> None:
    from memclaw.config import load_config, memclaw_home
    from memclaw.workspace import build_demo_workspace
    from memclaw.workspace import onboard as do_onboard

    # A config.toml (or environment override) that does not load is an error, not "ready"
    load_config()
    report = do_onboard(memclaw_home(), workspace)
    if demo:
        build_demo_workspace(report.workspace)
    for p in report.created:
        console.print(line(("created", "green"), f" {p}"))
    for p in report.kept:
        console.print(line((f"kept    {p}", "dim")))
    console.print(line("Workspace ready at ", (str(report.workspace), "bold")))


def demo(queries: list[str], *, workspace: Path | None) -> None:
    from memclaw.cli.tables import recall_table
    from memclaw.config import Config, memclaw_home
    from memclaw.service.facade import MemoryService
    from memclaw.util.progress import stderr_progress
    from memclaw.workspace import build_demo_workspace, demo_queries

    root = workspace or memclaw_home() / "demo"
    ws = build_demo_workspace(root)
    mem = MemoryService(ws, Config(workspace=root))
    mem.progress = stderr_progress
    mem.sync()
    n = sum(len(mem.parse_scope(s)) for s in ws.scopes())
    # a path is never wrapped (when stdout is not a terminal, rich wraps at 80 columns): it must stay copyable
    console.print(line("Demo workspace: ", (str(ws.root), "bold"), f" ({counted(n, 'memory')})"), soft_wrap=True)
    for q in queries or demo_queries():
        result = mem.recall_detailed(q, k=5)
        console.print(recall_table(result, width=console.width))
    console.print(line(f'Try: {invoked_as()} recall "your question" --workspace {ws.root}'), soft_wrap=True)


def recall(
    query: str,
    *,
    k: int | None,
    mode: str | None,
    tokens: int | None,
    sender: str | None,
    kind: str | None,
    json_out: bool,
    workspace: Path | None,
) -> None:
    query = arg_or_stdin(query)
    cfg, ws = load(workspace)
    scope = sender_scope_for(cfg, sender).scope
    embeds = bool(query.strip()) and (mode or cfg.recall.mode) != "bm25"
    mem = memory_service(cfg, ws, progress=not json_out, embeds=embeds)
    if tokens is not None and k is None:
        k = mem.config.context.recall_k or None
    with held_warnings() as logged:
        result = mem.recall_detailed(query, scope=scope, k=k, mode=mode, kind=kind)
    # Each once (memclaw logs some of them too)
    for w in dict.fromkeys([*logged, *result.warnings]):
        err_console.print(warning(w))
    section = None
    if tokens is not None:
        from memclaw.context.memory_section import fill_hits
        from memclaw.llm.tokens import counter_for

        section = fill_hits(result.hits, tokens, counter_for(mem.config.agent.model))
    if json_out:
        from memclaw.recall.results import rerank_json

        print_json([h.to_json() | rerank_json(result, h) | (section.hit_json(i) if section else {})
                    for i, h in enumerate(result.hits)])  # fmt: skip
        return
    print_recall(result, section, k or mem.config.recall.k)


def print_recall(result: RecallResult, section: SectionFill | None, asked: int) -> None:
    """The recall view: the table (with the memory-section cut when `section`), or why there is none."""
    from memclaw.cli.tables import recall_table

    if not result.hits:
        shown = shorten(result.query, ECHO_CHARS)
        console.print(
            line("No memories in scope ", (result.scope, "bold"), f" match {shown!r} above the relevance floor.")
        )
        return
    console.print(recall_table(result, width=console.width, section=section))
    if len(result.hits) < min(asked, result.scope_size):
        console.print(
            line(
                (
                    f"{len(result.hits)} of the {asked} asked for: the other memories in scope {result.scope} fell "
                    "below the relevance floor (recall.min_similarity, recall.min_bm25)",
                    "dim",
                )
            )
        )


def sync(*, json_out: bool, workspace: Path | None) -> None:
    mem = open_memory(workspace, json_out=json_out)
    _print_reports(mem.sync(), json_out)


def reindex(*, json_out: bool, workspace: Path | None) -> None:
    mem = open_memory(workspace, json_out=json_out)
    _print_reports(mem.sync(full=True), json_out)


def _print_reports(reports, json_out: bool) -> None:
    rows = [
        {
            "scope": r.scope,
            "added": r.added,
            "updated": r.updated,
            "removed": r.removed,
            "unchanged": r.unchanged,
            "rebuilt": r.rebuilt,
            "pending": r.pending,
        }
        for r in reports
    ]
    if json_out:
        print_json(rows)
        return
    for r in reports:
        for w in r.warnings:
            err_console.print(warning(w))
    from memclaw.cli.tables import sync_table

    console.print(sync_table(rows))


def add(
    text: str,
    *,
    section: str | None,
    learned: str | None,
    sender: str | None,
    json_out: bool,
    workspace: Path | None,
) -> None:
    """Remember a fact, marked with the day it was learned (a fact already there, whatever its date, is not written
    again). A provider embedding model without its key: the fact is saved, its vector pending, and that is the one
    line of EmbeddingKeyMissing (exit 5)."""
    from memclaw.errors import EmbeddingKeyMissing

    day = learned_day(learned)
    lines = [x for x in text.strip().splitlines() if x.strip()]
    # A fact is one line (memclaw.markdown.fact_ops.normalize_fact_text): say so, not silently
    if len(lines) > 1:
        err_console.print(warning(f"a fact is one line: its {len(lines)} lines are joined with spaces"))
    mem = open_memory(workspace, json_out=json_out)
    scope = sender_scope_for(mem.config, sender).scope
    with held_warnings() as logged:
        unit, written = mem.remember_fact(text, scope=scope, section=section, learned=day)
    known = not written
    pending = unit.id in mem.pending_vectors(unit.scope)
    where = f"{unit.source}:{unit.line}"
    if pending and isinstance(mem.embed_error, EmbeddingKeyMissing):
        raise EmbeddingKeyMissing(
            f"{mem.embed_error}; the fact is saved ({unit.id} in {where}), its vector is pending until the next sync"
        )
    for w in logged:
        err_console.print(warning(w))
    if json_out:
        print_json(
            {
                "id": unit.id,
                "text": unit.text,
                "scope": unit.scope,
                "source": where,
                "vector_pending": pending,
                "already_remembered": known,
            }
        )
    else:
        note = " (its vector is pending: the embedding provider is unreachable; the next sync adds it)"
        said = "already remembered " if known else "remembered "
        console.print(line(said, (unit.id, "bold"), f" in {where}{note if pending else ''}"))


def learned_day(value: str | None) -> date | None:
    """`memory add --date`: a real day written YYYY-MM-DD (UsageError, exit 2, otherwise); None: today."""
    from memclaw.errors import UsageError

    if value is None:
        return None
    try:
        if len(value.strip()) != len("YYYY-MM-DD"):
            raise ValueError
        return date.fromisoformat(value.strip())
    except ValueError:
        raise UsageError(
            f"--date {shorten(value, ECHO_CHARS)!r} is not a day: write it YYYY-MM-DD, e.g. 2026-11-25"
        ) from None


def unit_json(u: MemoryUnit) -> dict:
    """A listed or forgotten memory; an archive chunk (or day) also with its speakers and turn count."""
    listed: dict[str, object] = {}
    # A chunk or a day, not a turn
    if u.kind == "archive" and "speaker" not in u.extra:
        if "speakers" in u.extra:
            listed["speakers"] = u.extra["speakers"].split("\n")
        listed["turns"] = int(u.extra.get("turns", "0"))
    return {
        "id": u.id,
        "kind": u.kind,
        "scope": u.scope,
        "source": f"{u.source}:{u.line}",
        "date": u.timestamp.isoformat(timespec="minutes") if u.timestamp else None,
        "section": u.section,
        "text": u.text,
    } | listed


def list_memories(*, sender: str | None, kind: str | None, json_out: bool, workspace: Path | None) -> None:
    mem = open_memory(workspace)
    scope = sender_scope_for(mem.config, sender).scope
    units = mem.list_units(scope, kind)
    # (a fact or history entry that restates a forgotten memory: recall leaves it out or masks it)
    notes = mem.restating(units, scope=scope)
    if json_out:
        print_json([unit_json(u) | {"restates_forgotten": notes.get(u.id)} for u in units])
        return
    from memclaw.cli.tables import memory_table

    console.print(memory_table(units, scope, width=console.width, notes=notes))


def forget(ids: list[str], *, sender: str | None, json_out: bool, workspace: Path | None) -> None:
    mem = open_memory(workspace, json_out=json_out)
    forgot = mem.forget_detailed(ids, scope=sender_scope_for(mem.config, sender).scope)
    command = forget_command(sender=sender, workspace=workspace)
    if json_out:
        out = []
        for u in forgot.gone:
            also = [m.id for m in forgot.mentions.get(u.id, [])]
            extra = {"forget_too": f"{command} {' '.join(also)}"} if also else {}
            out.append(unit_json(u) | {"mentioned_in": also} | extra)
        print_json(out)
        return
    print_forgot(forgot.gone)
    from memclaw.agent.commands import mentioned_text

    also = mentioned_text(forgot.also, command)
    if also is not None:
        console.print(line(also), soft_wrap=True)


def forget_command(*, sender: str | None, workspace: Path | None) -> str:
    """The `memory forget` command for the same sender and workspace, for the ids to append to it."""
    import shlex

    parts = ["memclaw", "memory", "forget"]
    parts += ["--sender", shlex.quote(sender)] if sender is not None else []
    parts += ["-w", shlex.quote(str(workspace))] if workspace is not None else []
    return " ".join(parts)


def print_forgot(gone: list[MemoryUnit]) -> None:
    """What `memory forget` removed, one line each. The memories are gone by now: printing them cannot fail."""
    from memclaw.cli.tables import forgot_lines

    for text in forgot_lines(gone):
        console.print(text, soft_wrap=True)


def stats(*, json_out: bool, workspace: Path | None) -> None:
    mem = open_memory(workspace)
    data = mem.stats()
    if json_out:
        print_json(data)
        return
    from memclaw.cli.tables import stats_table

    console.print(stats_table(data))


def migrate(to: str, *, workspace: Path | None) -> None:
    from memclaw.service.migrate import migrate_to_server

    cfg, ws = load(workspace)
    n = migrate_to_server(ws, cfg, to, console=err_console)
    where = redact_url(to)
    console.print(line(f"migrated {counted(n, 'memory')} to {where}; set memory.chroma_url to this URL to use it"))


def status(*, json_out: bool, workspace: Path | None) -> None:
    from memclaw.cli.gateway_cmd import token_source
    from memclaw.config import config_path, dump_config
    from memclaw.llm.client import LLMClient

    mem = open_memory(workspace)
    cfg = mem.config
    discord = cfg.channels.discord
    source = token_source(cfg)
    data = {
        "config_file": str(config_path()) if config_path() else None,
        "model": cfg.agent.model,
        # A note naming the variable to set, or None
        "model_key_missing": LLMClient(cfg).missing_key(),
        "embedding_model": cfg.embeddings.model,
        "embedding_key_missing": _embedding_key_missing(cfg),
        "workspace": str(mem.workspace.root),
        "memory": mem.stats(),
        "channels": {
            "cli": {"configured": True, "owner": True},
            "discord": {
                "configured": source is not None,
                # Where the token comes from; never the token
                "token_from": source,
                "owners": len(cfg.owners.get("discord", [])),
                "allow_from": len(discord.allow_from),
                "guilds": len(discord.guilds),
                "channels": len(discord.channels),
                "always_answer_channels": len(discord.always_answer_channels),
            },
        },
        "config": dump_config(cfg),
    }
    if json_out:
        print_json(data)
        return
    print_status(data)


def print_status(data: dict) -> None:
    """`memclaw status` for people (the data is `status --json`'s)."""
    from memclaw.cli.gateway_cmd import TOKEN_ENV
    from memclaw.cli.tables import stats_table

    console.print(line(("config", "bold"), f"    {data['config_file'] or '(defaults + environment)'}"))
    console.print(
        line(("model", "bold"), f"     {data['model']}   ", ("embeddings", "bold"), f" {data['embedding_model']}")
    )
    for missing in (data["model_key_missing"], data["embedding_key_missing"]):
        if missing:
            console.print(warning(missing))
    console.print(line(("workspace", "bold"), f" {data['workspace']}"))
    d = data["channels"]["discord"]
    state = f"configured (token from {d['token_from']})" if d["configured"] else f"not configured (set {TOKEN_ENV})"
    console.print(
        line(
            ("discord", "bold"),
            f"   {state}; {d['owners']} owner id(s), {d['allow_from']} allowed user(s), {d['guilds']} guild(s), "
            f"{d['channels']} channel(s), {d['always_answer_channels']} always-answer channel(s)",
        )
    )
    console.print(line(("cli", "bold"), "       configured (`memclaw chat`, as the owner)"))
    console.print(stats_table(data["memory"]))


def _embedding_key_missing(cfg) -> str | None:
    """A provider embedding model without its key: the note naming the variable (no request, no litellm)."""
    from memclaw.embedding.provider import KEY_SETTING
    from memclaw.llm import providers

    e = cfg.embeddings
    if not providers.is_provider_model(e.model):
        return None
    return providers.required_key_missing(e.model, e.api_key.get_secret_value() if e.api_key else None, KEY_SETTING)

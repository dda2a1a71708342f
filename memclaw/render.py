"""Rich tables for people (the JSON forms are built by the data classes themselves)."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from rich import box
from rich.table import Table

from memclaw.dates import DateRange
from memclaw.recall import RecallResult
from memclaw.shorten import ECHO_CHARS, MEMORY_CHARS, shorten
from memclaw.units import MemoryUnit

if TYPE_CHECKING:
    from memclaw.memory_section import SectionFill


def _fmt(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def recall_table(result: RecallResult, *, width: int = 140, section: SectionFill | None = None) -> Table:
    """The recall hits with each signal's rank and score. The scope is in the title (one scope per recall). The
    text keeps its room on narrow terminals: under 110 columns the date and source columns are left out, under 80
    the per-signal columns too (`--json` always has everything). Long queries and texts are shortened."""
    signals, wide = width >= 80, width >= 110
    legend = "bm25: rank/score · vector: rank/cosine similarity · +link: lifted by a linked memory"
    caption = [legend] if signals else []
    caption += [f"+date: stamped {_span(r)} ({shorten(r.text, ECHO_CHARS)!r})" for r in result.date_ranges]
    if section is not None:
        caption.append(
            f"memory section: {len(section.kept)} of {len(section.candidates)} hits, {section.used} of "
            f"{section.budget} tokens (tok: what each costs in the prompt; cut: why it is left out)"
        )
    t = Table(
        title=f"recall {shorten(result.query, ECHO_CHARS)!r} · scope {result.scope} · {result.mode}",
        title_justify="left",
        caption="\n".join(caption) or None,
        caption_justify="left",
        box=box.SIMPLE_HEAD,
    )
    cols: list[tuple[str, dict[str, Any]]] = [("#", {"justify": "right"}), ("fused", {"justify": "right"})]
    if signals:
        cols += [("bm25", {"justify": "right"}), ("vector", {"justify": "right"})]
    cols.append(("kind", {}))
    if wide:
        cols += [("date", {}), ("source", {})]
    if section is not None:
        cols.append(("tok", {"justify": "right"}))
    for col, kw in cols:
        t.add_column(col, no_wrap=True, **kw)
    if section is not None:
        t.add_column("cut", overflow="fold", max_width=28)
    t.add_column("text", overflow="fold", ratio=1, min_width=20)
    skips = {s.index: s.reason for s in section.skipped} if section is not None else {}
    for n, h in enumerate(result.hits, 1):
        u = h.unit
        row = [str(n), f"{h.score:.4f}"]
        if signals:
            b = f"{h.bm25.rank}/{_fmt(h.bm25.score, 2)}" if h.bm25.rank else "-"
            b += "".join(f" +{k}" for k in h.boosts)
            row += [b, f"{h.vector.rank}/{_fmt(h.vector.score)}" if h.vector.rank else "-"]
        row.append(u.kind)
        if wide:
            row += [u.timestamp.strftime("%Y-%m-%d") if u.timestamp else "", f"{u.source}:{u.line}"]
        if section is not None:
            reason = skips.get(n - 1)
            row += [str(section.candidates[n - 1].tokens), f"[red]{reason}[/]" if reason else "[green]in[/]"]
        t.add_row(*row, shorten(u.text, MEMORY_CHARS))
    return t


def _span(r: DateRange) -> str:
    last = r.end - timedelta(days=1)
    return r.start.strftime("%Y-%m-%d") + ("" if last <= r.start else last.strftime(" to %Y-%m-%d"))


def sync_table(rows: list[dict[str, Any]]) -> Table:
    t = Table(title="index sync", title_justify="left")
    for col in ("scope", "added", "updated", "removed", "unchanged", "rebuilt"):
        t.add_column(col, justify="left" if col == "scope" else "right")
    for r in rows:
        t.add_row(
            r["scope"],
            *(str(r[c]) for c in ("added", "updated", "removed", "unchanged")),
            "yes" if r["rebuilt"] else "",
        )
    return t


def memory_table(units: list[MemoryUnit], scope: str) -> Table:
    """`memclaw memory list`: each memory with the id that `memory forget` takes."""
    t = Table(title=f"memories · scope {scope} · {len(units)}", title_justify="left", box=box.SIMPLE_HEAD)
    for col in ("id", "kind", "section / date", "source"):
        t.add_column(col, no_wrap=True)
    t.add_column("text", overflow="fold", ratio=1, min_width=20)
    for u in units:
        where = u.timestamp.strftime("%Y-%m-%d %H:%M") if u.kind == "history" and u.timestamp else (u.section or "")
        t.add_row(u.id, u.kind, where, f"{u.source}:{u.line}", u.text)
    return t


def forgot_text(units: list[MemoryUnit]) -> str:
    """What /forget removed, one line per memory (plain text for chat channels)."""
    return "\n".join(["Forgot:"] + [f"- {u.id} ({u.kind}): {' '.join(u.text.split())[:200]}" for u in units])


def stats_table(data: dict[str, Any]) -> Table:
    t = Table(
        title=f"memory · {data['workspace']} · model {data['model']} · store {data['store']}",
        title_justify="left",
    )
    for col in ("scope", "facts", "history", "indexed", "index"):
        t.add_column(col, justify="left" if col in ("scope", "index") else "right")
    for scope, s in data["scopes"].items():
        t.add_row(
            scope,
            str(s["facts"]),
            str(s["history"]),
            str(s["indexed"]),
            "[green]fresh[/]" if s["fresh"] else "[yellow]stale (syncs on next recall)[/]",
        )
    if data.get("rebuild"):
        t.caption = f"the index must be rebuilt: {data['rebuild']} (on the next recall or `memclaw memory sync`)"
    return t

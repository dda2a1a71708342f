"""Rich tables for people (the JSON forms are built by the data classes themselves)."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from memclaw.recall import RecallResult


def _fmt(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def recall_table(result: RecallResult) -> Table:
    t = Table(title=f"recall {result.query!r} · scope {result.scope} · {result.mode}", title_justify="left")
    for col, kw in (
        ("#", {"justify": "right"}),
        ("fused", {"justify": "right"}),
        ("bm25 rank/score", {"justify": "right"}),
        ("vec rank/sim", {"justify": "right"}),
        ("kind", {}),
        ("date", {}),
        ("scope", {}),
        ("source", {}),
        ("text", {"overflow": "fold", "ratio": 1}),
    ):
        t.add_column(col, **kw)
    for n, h in enumerate(result.hits, 1):
        u = h.unit
        b = f"{h.bm25.rank}/{_fmt(h.bm25.score, 2)}" if h.bm25.rank else "-"
        v = f"{h.vector.rank}/{_fmt(h.vector.score)}" if h.vector.rank else "-"
        if h.boosts:
            b += "".join(f" +{k}" for k in h.boosts)
        t.add_row(
            str(n),
            f"{h.score:.4f}",
            b,
            v,
            u.kind,
            u.timestamp.strftime("%Y-%m-%d") if u.timestamp else "",
            u.scope,
            f"{u.source}:{u.line}",
            u.text,
        )
    return t


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
    return t

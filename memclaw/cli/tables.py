"""The CLI's rich tables and lines: recall, memory list, forget, sync and stats.

The recall table renders memclaw.context.recall_view's rows; the JSON forms are built by the data classes.

Every cell, title and caption that holds user or file text is a `Text` from memclaw.util.richtext (never markup). A
table keeps its text column readable on any terminal: optional columns are left out, least useful first, until
the text has at least TEXT_MIN columns; the text then wraps at word boundaries (`--json` always has everything).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from rich import box
from rich.cells import cell_len
from rich.table import Table
from rich.text import Text

from memclaw.agent.commands import listed_text
from memclaw.context.recall_view import recall_rows, recall_title, rerank_line
from memclaw.markdown.formats import split_trailing_date
from memclaw.markdown.units import MemoryUnit
from memclaw.recall.dates import DateRange
from memclaw.recall.results import RecallResult
from memclaw.util.richtext import lit
from memclaw.util.text import ECHO_CHARS, MEMORY_CHARS, counted, shorten
from memclaw.util.visible import visible

if TYPE_CHECKING:
    from memclaw.context.memory_section import SectionFill

TEXT_MIN = 30
"""Columns the text of a memory keeps at least, on any terminal (while optional columns can still go)."""
CUT_MAX = 28
"""The widest the recall table's `cut` column gets (its reasons wrap)."""


def _fmt(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


@dataclass
class _Col:
    """One column of a table being laid out: its cells, and the group it is left out with (0: always shown)."""

    header: str
    cells: list[Text] = field(default_factory=list)
    # Columns are left out by group, the highest group first
    drop: int = 0
    justify: str = "left"
    # A column that wraps (its text folds), at most this wide
    wrap_max: int | None = None

    def width(self) -> int:
        natural = max([cell_len(self.header), *(c.cell_len for c in self.cells)])
        return min(natural, self.wrap_max) if self.wrap_max else natural


def _layout(cols: list[_Col], width: int, text_min: int = TEXT_MIN) -> list[_Col] | None:
    """The columns to show on a `width`-column terminal: drop groups (highest first) until the text column
    (not in `cols`) has `text_min` columns; an optional column with nothing in it is not shown. None when even
    the columns that must stay leave the text too little room (then each row is stacked: see `_table`). A table
    costs each column's width + 3, plus 1."""
    groups = sorted({c.drop for c in cols if c.drop}, reverse=True)
    # An optional column with no values
    shown = [c for c in cols if not c.drop or any(x.plain for x in c.cells)]

    def room() -> int:
        return width - (sum(c.width() + 3 for c in shown) + 3 + 1)

    for g in groups:
        if room() >= text_min:
            break
        shown = [c for c in shown if c.drop != g]
    # Still no room: narrow the wrapping columns
    for c in shown:
        if c.wrap_max and room() < text_min:
            c.wrap_max = max(10, c.width() - (text_min - room()))
    return shown if room() >= text_min else None


def _table(
    title: Text,
    caption: Text | None,
    cols: list[_Col] | None,
    texts: list[Text],
    all_cols: list[_Col],
    *,
    width: int | None = None,
) -> Table:
    """The table of `cols` and the text; with `cols` None (a terminal too narrow for columns), one row per item:
    its values (`all_cols`' that have a value, the optional ones too) on a line, the text under them. Given the
    terminal's `width`, the table is at least as wide as its title where that fits (a long query is not folded
    inside a narrow table)."""
    wide = min(width, cell_len(title.plain)) if width is not None else None
    t = Table(title=title, title_justify="left", caption=caption, caption_justify="left", box=box.SIMPLE_HEAD,
              min_width=wide)  # fmt: skip
    if cols is None:
        t.show_header = False
        t.add_column(overflow="fold")
        for n, text in enumerate(texts):
            head = Text(" · ", style="dim").join(
                Text.assemble((c.header if c.header == "#" else c.header + " ", "dim"), c.cells[n])
                for c in all_cols
                if c.cells[n].plain
            )
            t.add_row(Text.assemble(head, "\n", text, "\n"))
        return t
    for c in cols:
        if c.wrap_max:
            t.add_column(c.header, justify=c.justify, overflow="fold", max_width=c.wrap_max)  # type: ignore[arg-type]
        else:
            t.add_column(c.header, justify=c.justify, no_wrap=True)  # type: ignore[arg-type]
    t.add_column("text", overflow="fold", ratio=1)
    for n, text in enumerate(texts):
        t.add_row(*(c.cells[n] for c in cols), text)
    return t


def section_status(section: SectionFill, index: int) -> Text:
    """What the memory section did with candidate `index`: its skip reason in red, else "in" or "joined #n" in
    green."""
    reason = section.skip_reason(index)
    return lit(reason, "red") if reason else Text(section.status(index) or "in", style="green")


def recall_table(
    result: RecallResult, *, width: int = 140, section: SectionFill | None = None, ids: bool = False
) -> Table:
    """The recall hits with each signal's rank and score. The scope is in the title (one scope per recall).
    `ids`: a column with each memory's id (what /forget takes). On a narrow terminal the date and source columns
    go first, then the per-signal ones. Long queries and texts are shortened."""
    cols = [_Col("#", justify="right"), _Col("fused", justify="right")]
    if ids:
        cols.append(_Col("id"))
    bm25, vector = _Col("bm25", drop=2, justify="right"), _Col("vector", drop=2, justify="right")
    kind, date, source = _Col("kind"), _Col("date", drop=3), _Col("source", drop=3)
    tok, cut = _Col("tok", justify="right"), _Col("cut", wrap_max=CUT_MAX)
    # optional: empty (not shown) without a re-ranker
    rerank = _Col("rerank", drop=2, wrap_max=CUT_MAX)
    cols += [rerank, bm25, vector, kind, date, source] + ([tok, cut] if section is not None else [])
    texts: list[Text] = []
    for r in recall_rows(result):
        cols[0].cells.append(Text(str(r.n)))
        cols[1].cells.append(Text(f"{r.score:.4f}"))
        if ids:
            cols[2].cells.append(lit(r.id))
        b = f"{r.bm25_rank}/{_fmt(r.bm25_score, 2)}" if r.bm25_rank else "-"
        bm25.cells.append(lit(b + "".join(f" {k}" for k in r.boosts)))
        vector.cells.append(Text(f"{r.vector_rank}/{_fmt(r.vector_score)}" if r.vector_rank else "-"))
        rerank.cells.append(Text(r.rerank))
        kind.cells.append(lit(r.kind))
        stamp = "%Y-%m-%d %H:%M" if r.kind == "excerpt" else "%Y-%m-%d"
        date.cells.append(Text(r.timestamp.strftime(stamp) if r.timestamp else ""))
        source.cells.append(lit(r.source))
        if section is not None:
            tok.cells.append(Text(str(section.candidates[r.n - 1].tokens)))
            cut.cells.append(section_status(section, r.n - 1))
        texts.append(lit(r.text))
    shown = _layout(cols, width)
    caption = ["bm25: rank/score · vector: rank/cosine similarity · +link: lifted by a linked memory"]
    if shown is not None and bm25 not in shown:
        caption = []
    said = rerank_line(result)
    if said is not None:
        caption.append(said)
        if shown is not None and rerank in shown:
            caption.append("rerank: the hit's place in the fused order, and the re-ranker's score")
    if any(r.kind == "excerpt" for r in recall_rows(result)):
        caption.append("excerpt: an archived turn »as said« with the turns around it in its conversation")
    if result.agent_asked is not None:
        caption.append(f"agent: the question asks what the agent said; its own turns keep {result.agent_asked:g} of "
                       "their score")  # fmt: skip
    caption += [
        f"+date: {'stamped' if r.stamps else 'naming'} {_span(r)} ({shorten(r.text, ECHO_CHARS)!r})"
        for r in result.date_ranges
    ]
    if section is not None:
        caption.append(
            f"memory section: {len(section.kept)} of {counted(len(section.candidates), 'hit')}, {section.used} of "
            f"{section.budget} tokens (tok: what each costs in the prompt; cut: why it is left out; joined #n: "
            "in the item of hit n, one piece of their conversation)"
        )
    title = lit(recall_title(result))
    return _table(title, lit("\n".join(caption)) if caption else None, shown, texts, cols, width=width)


def _span(r: DateRange) -> str:
    last = r.end - timedelta(days=1)
    return r.start.strftime("%Y-%m-%d") + ("" if last <= r.start else last.strftime(" to %Y-%m-%d"))


def sync_table(rows: list[dict[str, Any]]) -> Table:
    t = Table(title="index sync", title_justify="left")
    for col in ("scope", "added", "updated", "removed", "unchanged", "rebuilt"):
        t.add_column(col, justify="left" if col == "scope" else "right")
    for r in rows:
        t.add_row(
            lit(r["scope"]),
            *(str(r[c]) for c in ("added", "updated", "removed", "unchanged")),
            "yes" if r["rebuilt"] else "",
        )
    return t


RESTATES = {
    "hidden": "restates a forgotten memory: not recalled",
    "masked": "restates a forgotten memory in part: recall masks that part",
}
"""`memory list`'s note on a fact or history entry that restates a forgotten memory (memclaw.service.
forgotten), by what recall does with it."""


def memory_table(units: list[MemoryUnit], scope: str, *, width: int = 140,
                 notes: dict[str, str] | None = None) -> Table:  # fmt: skip
    """`memclaw memory list`: each memory with the id that `memory forget` takes (an archive chunk: its
    consolidation id, time, speakers, turns and first words). On a narrow terminal the source column goes first,
    then the kind, then the section or date. `notes`: a unit's id -> a key of RESTATES, said before its text."""
    notes = notes or {}
    ident, kind = _Col("id"), _Col("kind", drop=2)
    where, source = _Col("section / date", drop=1, wrap_max=24), _Col("source", drop=3)
    texts: list[Text] = []
    for u in units:
        ident.cells.append(lit(u.id))
        kind.cells.append(lit(u.kind))
        where.cells.append(lit(_section_and_date(u)))
        source.cells.append(lit(f"{u.source}:{u.line}"))
        text = lit(shorten(_without_shown_date(u), MEMORY_CHARS))
        note = RESTATES.get(notes.get(u.id, ""))
        texts.append(Text.assemble((f"({note}) ", "italic yellow"), text) if note else text)
    cols = [ident, kind, where, source]
    return _table(lit(f"memories · scope {scope} · {len(units)}"), None, _layout(cols, width), texts, cols)


def _section_and_date(u: MemoryUnit) -> str:
    """A fact's section and date (its stamped date, or the day it was learned); an entry's or a chunk's time."""
    if u.kind != "fact":
        return u.timestamp.strftime("%Y-%m-%d %H:%M") if u.timestamp else ""
    day = u.timestamp.strftime("%Y-%m-%d") if u.timestamp else None
    return " · ".join(x for x in (u.section, day) if x)


def _without_shown_date(u: MemoryUnit) -> str:
    """A listed memory's text, a fact's trailing date left out when it is the date its row shows."""
    text = listed_text(u)
    if u.kind == "fact" and u.timestamp is not None:
        body, written = split_trailing_date(text)
        if written == u.timestamp.strftime("%Y-%m-%d"):
            return body
    return text


def forgot_lines(units: list[MemoryUnit]) -> list[Text]:
    """`memclaw memory forget`: one line per forgotten memory, the id in bold, the text as written."""
    return [
        Text.assemble(
            "forgot ", (visible(u.id), "bold"), visible(f" ({u.kind}, {u.source}:{u.line}): {listed_text(u)}")
        )
        for u in units
    ]


def stats_table(data: dict[str, Any]) -> Table:
    t = Table(
        title=lit(f"memory · {data['workspace']} · model {data['model']} · store {data['store']}"),
        title_justify="left",
    )
    for col in ("scope", "facts", "history", "archive", "indexed", "index"):
        t.add_column(col, justify="left" if col in ("scope", "index") else "right")
    for scope, s in data["scopes"].items():
        t.add_row(
            lit(scope),
            str(s["facts"]),
            str(s["history"]),
            str(s.get("archive", 0)),
            str(s["indexed"]),
            Text("fresh", style="green") if s["fresh"] else Text("stale (syncs on next recall)", style="yellow"),
        )
    if data.get("rebuild"):
        t.caption = lit(f"the index must be rebuilt: {data['rebuild']} (on the next recall or `memclaw memory sync`)")
    return t

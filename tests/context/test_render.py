"""The recall table people read: every word of every hit survives any terminal width, and narrow terminals drop the
date and source columns rather than squeeze the text."""

from __future__ import annotations

from datetime import datetime

import pytest
from rich.console import Console

from memclaw.cli.tables import recall_table
from memclaw.markdown.units import MemoryUnit
from memclaw.recall.results import RecallHit, RecallResult, Signal

TEXTS = [
    "I am allergic to penicillin",
    "Leo had a fever and stayed home from daycare; Nadia moved her research interviews to Thursday and asked "
    "for a reminder to call the paediatrician.",
]


def _result() -> RecallResult:
    hits = [
        RecallHit(
            unit=MemoryUnit("f1", "fact", "owner", "memory/MEMORY.md", 26, TEXTS[0]),
            score=0.9953,
            bm25=Signal(1, 5.03),
            vector=Signal(2, 0.295),
        ),
        RecallHit(
            unit=MemoryUnit("h1", "history", "owner", "memory/HISTORY.md", 3, TEXTS[1], datetime(2025, 1, 27, 9, 30)),
            score=0.41,
            bm25=Signal(None, None),
            vector=Signal(1, 0.312),
            boosts={"link": 0.1},
        ),
    ]
    return RecallResult("what is Maya allergic to", "owner", "hybrid", hits)


def _render(width: int) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(recall_table(_result(), width=width))
    return console.export_text()


@pytest.mark.parametrize("width", [60, 80, 100, 110, 120, 160])
def test_every_word_survives_and_columns_fit_the_width(width):
    out = _render(width)
    words = " ".join(out.split())
    for text in TEXTS:
        for word in text.split():
            assert word in words, (word, out)
    assert all(len(line) <= width for line in out.splitlines())
    assert "scope owner" in out and "0.9953" in out
    assert ("1/5.03" in out and "2/0.295" in out and "+link" in out) == (width >= 80)
    wide = width >= 120  # (the text keeps at least 30 columns)
    assert ("memory/HISTORY.md:3" in out) == wide and ("2025-01-27" in out) == wide


@pytest.mark.parametrize("width", [40, 50, 60, 80, 100, 140])
def test_memory_list_and_recall_tokens_wrap_whole_words_at_any_width(width):
    """Issue 19.9: `memory list` and `recall --tokens` cut the text mid-word at 80 columns (their tables were
    wider than the terminal, so the right edge was cropped). Now the table fits, and the text wraps at words."""
    from memclaw.cli.tables import memory_table
    from memclaw.context.memory_section import fill_hits

    units = [h.unit for h in _result().hits]
    section = fill_hits(_result().hits, 30, lambda t: len(t.split()))
    for table in (memory_table(units, "owner", width=width), recall_table(_result(), width=width, section=section)):
        console = Console(width=width, record=True, color_system=None)
        console.print(table)
        out = console.export_text()
        assert all(len(line.rstrip()) <= width for line in out.splitlines()), out
        tokens = out.split()
        for text in TEXTS:
            for word in text.split():
                assert word in tokens, (word, out)  # each word whole, on one line

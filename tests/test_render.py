"""The recall table people read: every word of every hit survives any terminal width, and narrow terminals drop the
date and source columns rather than squeeze the text."""

from __future__ import annotations

from datetime import datetime

import pytest
from rich.console import Console

from memclaw.recall import RecallHit, RecallResult, Signal
from memclaw.render import recall_table
from memclaw.units import MemoryUnit

TEXTS = [
    "I am allergic to penicillin",
    "Leo had a fever and stayed home from daycare; Nadia moved her research interviews to Thursday and asked "
    "for a reminder to call the paediatrician.",
]


def _result() -> RecallResult:
    hits = [
        RecallHit(
            MemoryUnit("f1", "fact", "owner", "memory/MEMORY.md", 26, TEXTS[0]),
            0.9953,
            Signal(1, 5.03),
            Signal(2, 0.295),
        ),
        RecallHit(
            MemoryUnit("h1", "history", "owner", "memory/HISTORY.md", 3, TEXTS[1], datetime(2025, 1, 27, 9, 30)),
            0.41,
            Signal(None, None),
            Signal(1, 0.312),
            {"link": 0.1},
        ),
    ]
    return RecallResult("what is Maya allergic to", "owner", "hybrid", hits)


def _render(width: int) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(recall_table(_result(), width=width))
    return console.export_text()


@pytest.mark.parametrize("width", [60, 80, 100, 110, 160])
def test_every_word_survives_and_columns_fit_the_width(width):
    out = _render(width)
    words = " ".join(out.split())
    for text in TEXTS:
        for word in text.split():
            assert word in words, (word, out)
    assert all(len(line) <= width for line in out.splitlines())
    assert "scope owner" in out and "0.9953" in out
    assert ("1/5.03" in out and "2/0.295" in out and "+link" in out) == (width >= 80)
    wide = width >= 110
    assert ("memory/HISTORY.md:3" in out) == wide and ("2025-01-27" in out) == wide

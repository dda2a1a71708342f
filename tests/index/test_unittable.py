"""The unit table's lookups by text (what `memory add` uses to say "already remembered" and to read a fact back)."""

from __future__ import annotations

from memclaw.index.unittable import UnitTable
from memclaw.markdown.units import MemoryUnit

SRC = "memory/MEMORY.md"


def _unit(uid: str, kind: str, text: str, line: int) -> MemoryUnit:
    return MemoryUnit(uid, kind, "owner", SRC if kind == "fact" else "memory/HISTORY.md", line, text)


def test_last_match_is_the_last_row_of_that_kind_with_exactly_that_text():
    units = [
        _unit("f1", "fact", "Anna lives in Porto", 1),
        _unit("f2", "fact", "Anna lives in Lisbon", 2),
        _unit("f3", "fact", "Anna lives in Porto", 3),
        _unit("h1", "history", "Anna lives in Porto", 1),  # the same text, another kind: not a fact
        _unit("f4", "fact", "anna lives in porto", 4),  # another text (case counts)
    ]
    table = UnitTable.from_units(units)
    assert table.last_match("fact", "Anna lives in Porto").id == "f3"
    assert table.last_match("history", "Anna lives in Porto").id == "h1"
    assert table.last_match("fact", "Anna lives in Lisbon").id == "f2"
    assert table.last_match("fact", "Anna lives in Berlin") is None
    assert table.last_match("history", "Anna lives in Lisbon") is None
    assert UnitTable.from_units([]).last_match("fact", "x") is None


def test_last_match_reads_the_table_as_saved_and_loaded():
    from memclaw.index.unittable import table_from_bytes, table_to_bytes

    units = [_unit(f"f{i}", "fact", f"fact {i % 7}", i) for i in range(50)]
    table = table_from_bytes(table_to_bytes(UnitTable.from_units(units)))
    assert table.last_match("fact", "fact 3").id == "f45"
    assert table.last_match("fact", "fact 9") is None


def test_with_prefix_gives_the_facts_that_start_so_last_first():
    """What `memory add` reads to compare a fact without its learned-mark (memclaw.service.learned)."""
    units = [
        _unit("f1", "fact", "Anna lives in Porto (2026-11-01)", 1),
        _unit("f2", "fact", "Anna lives in Lisbon", 2),
        _unit("h1", "history", "Anna lives in Porto, she said", 1),
        _unit("f3", "fact", "Anna lives in Porto (2026-11-20 #c7f3a9b21)", 3),
    ]
    table = UnitTable.from_units(units)
    assert [u.id for u in table.with_prefix("fact", "Anna lives in Porto")] == ["f3", "f1"]
    assert [u.id for u in table.with_prefix("history", "Anna lives in Porto")] == ["h1"]
    assert table.with_prefix("fact", "Anna lives in Berlin") == []

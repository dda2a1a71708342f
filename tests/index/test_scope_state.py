"""The scope state file (memclaw.index._scope_state): a snapshot plus a log of appends reads back exactly as written,
folds
its log into the snapshot past the limit, and refuses anything that is not its own layout as damage."""

from __future__ import annotations

import sqlite3
from datetime import datetime

import pytest

import memclaw.index._scope_state as scope_state
from memclaw.errors import DerivedIndexError
from memclaw.index._bm25 import InvertedBM25
from memclaw.index.unittable import UnitTable
from memclaw.markdown.incremental import parse_file
from memclaw.markdown.units import MemoryUnit

SRC_M, SRC_H = "memory/MEMORY.md", "memory/HISTORY.md"


def _units(start: int, n: int, source: str = SRC_M) -> list[MemoryUnit]:
    kind = "fact" if source == SRC_M else "history"
    return [
        MemoryUnit(
            f"{kind[0]}{start + i:011x}",
            kind,
            "owner",
            source,
            start + i + 1,
            f"memory number {start + i}",
            datetime(2024, 1, 1 + i % 28) if kind == "history" else None,
            "Notes" if kind == "fact" else None,
            {"style": "bullet"} if kind == "fact" else {},
        )  # fmt: skip
        for i in range(n)
    ]


def _state(table: UnitTable) -> scope_state.ScopeState:
    _, mark = parse_file(b"- x\n", kind="fact", scope="owner", source=SRC_M)
    sigs = {SRC_M: (1, 2, 3), SRC_H: None}
    return scope_state.ScopeState("owner", sigs, table, {"f1": ["h1"]}, {SRC_M: mark}, {"f0"})


def _lexical(units: list[MemoryUnit]):
    lex = InvertedBM25()
    for u in units:
        lex.add(u.id, u.text.split())
    return lex


def test_snapshot_then_appends_read_back_exactly(tmp_path):
    path = tmp_path / "state.sqlite3"
    facts, hist = _units(0, 50), _units(1000, 10, SRC_H)
    table = UnitTable.concat([UnitTable.from_units(facts), UnitTable.from_units(hist)])
    lex = _lexical(facts + hist)
    scope_state.save(path, _state(table), lex.to_bytes)
    for step in range(5):  # appends to MEMORY.md land before HISTORY.md's rows, as a sync orders them
        new = _units(100 + step, 1)
        facts += new
        added = UnitTable.from_units(new)
        table = UnitTable.concat([UnitTable.from_units(facts), UnitTable.from_units(hist)])
        for u in new:
            lex.add(u.id, u.text.split())
        changes = scope_state.Changes(appended=[(SRC_M, added)], order=[SRC_M, SRC_H], links={},
                                      bm25_added=[(u.id, u.text.split()) for u in new])  # fmt: skip
        scope_state.save(path, _state(table), lex.to_bytes, changes)
    loaded = scope_state.load(path)
    assert loaded is not None and loaded.lexical is not None
    assert loaded.state.units.units() == table.units()
    assert loaded.state.units.hashes() == table.hashes()
    assert loaded.state.links == {"f1": ["h1"]} and loaded.state.pending == {"f0"}
    assert loaded.lexical.ids() == lex.ids()
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT count(*) FROM log WHERE part = 'units'").fetchone()[0] == 5


def test_the_log_is_folded_into_the_snapshot_past_the_limit(tmp_path):
    path = tmp_path / "state.sqlite3"
    facts = _units(0, 10)
    lex = _lexical(facts)
    scope_state.save(path, _state(UnitTable.from_units(facts)), lex.to_bytes)
    limit = scope_state.compact_after(len(facts))
    for i in range(limit + 3):
        new = _units(100 + i, 1)
        facts += new
        for u in new:
            lex.add(u.id, u.text.split())
        changes = scope_state.Changes(appended=[(SRC_M, UnitTable.from_units(new))], order=[SRC_M], links={},
                                      bm25_added=[(u.id, u.text.split()) for u in new])  # fmt: skip
        scope_state.save(path, _state(UnitTable.from_units(facts)), lex.to_bytes, changes)
    with sqlite3.connect(path) as con:
        rows = con.execute("SELECT COALESCE(SUM(n), 0) FROM log").fetchone()[0]
    assert rows <= 2 * limit  # folded at least once
    loaded = scope_state.load(path)
    assert loaded.state.units.units() == UnitTable.from_units(facts).units()
    assert loaded.lexical.ids() == lex.ids()


def test_a_text_holding_a_nul_round_trips(tmp_path):
    path = tmp_path / "state.sqlite3"
    units = [*_units(0, 2), MemoryUnit("f999", "fact", "owner", SRC_M, 9, "odd\x00text")]
    scope_state.save(path, _state(UnitTable.from_units(units)), _lexical(units).to_bytes)
    assert scope_state.load(path).state.units.units() == units


@pytest.mark.parametrize(
    "damage",
    [
        "CREATE TRIGGER t AFTER INSERT ON meta BEGIN DELETE FROM log; END",  # a schema of someone else's
        "CREATE VIEW v AS SELECT 1",
        "UPDATE meta SET value = '\"another-format\"' WHERE key = 'format'",
        "UPDATE snapshot SET data = X'00' WHERE name = 'units'",
        "UPDATE meta SET value = '[1, 2]' WHERE key = 'signatures'",
        "INSERT INTO log(part, n, data) VALUES ('units', 1, CAST('{\"source\": 1}' AS BLOB))",
    ],
)
def test_anything_but_its_own_layout_is_damage_and_a_save_replaces_it(tmp_path, damage):
    path = tmp_path / "state.sqlite3"
    units = _units(0, 3)
    scope_state.save(path, _state(UnitTable.from_units(units)), _lexical(units).to_bytes)
    with sqlite3.connect(path) as con:
        con.execute(damage)
    with pytest.raises(DerivedIndexError):
        scope_state.load(path)
    scope_state.save(path, _state(UnitTable.from_units(units)), _lexical(units).to_bytes)  # a rebuild replaces it
    assert scope_state.load(path).state.units.units() == units


def test_garbage_and_a_folder_at_the_path(tmp_path):
    path = tmp_path / "state.sqlite3"
    path.write_bytes(b"not a database at all")
    with pytest.raises(DerivedIndexError, match="corrupted"):
        scope_state.load(path)
    path.unlink()
    path.mkdir()
    with pytest.raises(DerivedIndexError, match="move it out of the way"):
        scope_state.load(path)
    units = _units(0, 1)
    with pytest.raises(DerivedIndexError, match="move it out of the way"):
        scope_state.save(path, _state(UnitTable.from_units(units)), _lexical(units).to_bytes)
    assert path.is_dir()  # not memclaw's to remove

"""A loaded unit table keeps its texts and hashes as their saved bytes and decodes a row when it is read
(memclaw.index.unittable.TextColumn): every row reads back as written, slices, segments, concatenation and a save
of such a table give what the decoded lists give, and bytes that are not UTF-8 are refused at load, not at a read."""

from __future__ import annotations

from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memclaw.index.unittable import TextColumn, UnitTable, table_from_bytes, table_to_bytes
from memclaw.markdown.units import MemoryUnit

DAY = "memory/archive/2026-11-25.md"
TEXTS = ["Maya: the café on Rua Nova", "", "Lena: 🎉 stoked!", "x" * 5000, "tab\tand\nnewline", "last"]


def _units(texts: list[str], day: str = DAY, first: int = 0) -> list[MemoryUnit]:
    return [MemoryUnit(f"a{first + i:011x}", "archive", "owner", day, 3 + i, t, datetime(2026, 11, 25, 14, i % 60),
                       None, {"cid": "c7f3a9b21", "turn": str(i), "speaker": "Maya"})
            for i, t in enumerate(texts)]  # fmt: skip


def test_a_loaded_table_keeps_its_texts_as_bytes_and_reads_every_row_back():
    units = _units(TEXTS)
    back = table_from_bytes(table_to_bytes(UnitTable.from_units(units)))
    assert isinstance(back.columns["texts"], TextColumn) and isinstance(back.columns["hashes"], TextColumn)
    assert back.units() == units
    assert [back.texts[i] for i in range(-len(TEXTS), 0)] == TEXTS
    assert list(back.texts) == TEXTS and back.texts == TEXTS
    assert back.texts[1:4] == TEXTS[1:4] and back.texts[::-1] == TEXTS[::-1] and back.texts[4:2] == []
    assert back.hashes() == UnitTable.from_units(units).hashes()
    with pytest.raises(IndexError):
        back.texts[len(TEXTS)]


@pytest.mark.parametrize("texts", [[], [""], ["only"], ["", ""]], ids=["none", "one-empty", "one", "two-empty"])
def test_small_columns_read_back(texts):
    units = _units(texts)
    back = table_from_bytes(table_to_bytes(UnitTable.from_units(units)))
    assert back.units() == units and list(back.texts) == texts


def test_a_text_with_a_nul_is_kept_as_a_list_and_reads_back():
    units = _units(["a \x00 b", "plain"])
    back = table_from_bytes(table_to_bytes(UnitTable.from_units(units)))
    assert back.units() == units and type(back.columns["texts"]) is list


def test_a_save_of_a_loaded_table_is_the_same_bytes():
    data = table_to_bytes(UnitTable.from_units(_units(TEXTS)))
    assert table_to_bytes(table_from_bytes(data)) == data


def test_segments_and_concatenation_of_loaded_tables_match_the_decoded_ones():
    a, b = _units(TEXTS, "memory/archive/2026-11-24.md"), _units(["one", "two \x00 nul"], DAY, first=100)
    c = _units(["three", "four"], "memory/archive/2026-11-26.md", first=200)
    loaded = table_from_bytes(table_to_bytes(UnitTable.from_units(a + c)))
    seg = loaded.segment("memory/archive/2026-11-24.md")
    assert seg is not None and isinstance(seg.columns["texts"], TextColumn) and seg.units() == a
    # a loaded part with a list part (the log's appended rows), plain or holding a NUL
    for extra in (c[:0], _units(["five"], DAY, first=300), b):
        joined = UnitTable.concat([loaded, UnitTable.from_units(extra)])
        assert joined.units() == a + c + extra
        assert table_from_bytes(table_to_bytes(joined)).units() == a + c + extra
    both = UnitTable.concat([seg, loaded.segment("memory/archive/2026-11-26.md")])
    assert isinstance(both.columns["texts"], TextColumn) and both.units() == a + c


def test_texts_that_are_not_utf8_are_refused_at_load():
    data = table_to_bytes(UnitTable.from_units(_units(["fine", "caf\u00e9 au lait", "end"])))
    bad = data.replace("caf\u00e9".encode(), b"caf\xff\xfe")
    assert len(bad) == len(data)
    with pytest.raises(ValueError):
        table_from_bytes(bad)


WHITESPACE = " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000"
# characters that share lead bytes with those spaces without being one
NEAR = "\u2019\u2014\u2060\u20ac\u3001\u1681\u00a9"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from([*WHITESPACE, *NEAR, "a", "é", "z", "🎉"]), max_size=160),
                max_size=12))  # fmt: skip
def test_short_texts_are_those_of_is_long_from_a_list_and_from_bytes(texts):
    from memclaw.index.passages import is_long, short_texts

    want = [not is_long(t) for t in texts]
    assert short_texts(texts).tolist() == want
    assert short_texts(TextColumn.of(texts)).tolist() == want


def test_short_texts_at_the_edges_of_the_word_limit():
    from memclaw.index.passages import MAX_WORDS, is_long, short_texts

    texts = [" ".join("w" * MAX_WORDS), "w " * MAX_WORDS, "w " * (MAX_WORDS + 1), " w" * (MAX_WORDS + 1) + " ",
             "\u00e9 " * MAX_WORDS, "\u00e9\u00a0" * (MAX_WORDS + 1), "x" * 5000]  # fmt: skip
    want = [not is_long(t) for t in texts]
    assert want[:3] == [True, True, False]
    assert short_texts(texts).tolist() == want and short_texts(TextColumn.of(texts)).tolist() == want


def test_the_turn_contexts_of_a_loaded_table_are_those_of_the_decoded_one():
    from memclaw.index.passages import context_rows_all

    texts = ["short one", "word " * 300, "short two", "", "short three \u00a0 x", "and four"]
    table = UnitTable.from_units(_units(texts))
    loaded = table_from_bytes(table_to_bytes(table))
    for got, want in zip(context_rows_all(loaded), context_rows_all(table), strict=True):
        assert got.tolist() == want.tolist()


def test_a_character_split_across_checked_chunks_is_valid_and_a_cut_one_is_not(monkeypatch):
    import memclaw.index.unittable as ut

    monkeypatch.setattr(ut, "_CHUNK", 4)
    texts = ["ab", "c\u00e9d", "ascii only here", "\U0001f389\u2019x", "end"]
    units = _units(texts)
    data = table_to_bytes(UnitTable.from_units(units))
    assert table_from_bytes(data).units() == units
    # the last byte of the emoji replaced by ASCII: a sequence cut short in the middle of a row
    bad = data.replace("\U0001f389".encode(), "\U0001f389".encode()[:3] + b"z")
    with pytest.raises(ValueError):
        table_from_bytes(bad)

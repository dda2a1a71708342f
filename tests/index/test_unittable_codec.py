"""The unit table's saved form (memclaw.index.unittable): every column reads back exactly, the extras written
by column (the distinct key lists, each extra's, the values as one string) whatever their keys and values, a table
written before (the extras as JSON pairs) is still read, and a header that lies about the extras is refused."""

from __future__ import annotations

import json
import struct
from datetime import datetime

import pytest

from memclaw.index.unittable import INT_COLUMNS, JOINED_COLUMNS, UnitTable, little, table_from_bytes, table_to_bytes
from memclaw.markdown.units import MemoryUnit

DAY = "memory/archive/2026-11-25.md"


def _turn(i: int, **extra: str) -> MemoryUnit:
    return MemoryUnit(f"a{i:011x}", "archive", "owner", DAY, 3 + i, f"Maya: turn {i}", datetime(2026, 11, 25, 14, i),
                      None, {"cid": "c7f3a9b21", "turn": str(i), "speaker": "Maya", **extra})  # fmt: skip


UNITS = [
    MemoryUnit(
        "f1", "fact", "owner", "memory/MEMORY.md", 2, "Lena lives in Porto", None, "People", {"style": "bullet"}
    ),
    MemoryUnit("f2", "fact", "owner", "memory/MEMORY.md", 3, "no extras at all"),
    MemoryUnit("h1", "history", "owner", "memory/HISTORY.md", 1, "Talked about Porto", datetime(2026, 11, 25, 14, 2)),
    *(_turn(i, near=f"{i:012x}") for i in range(4)),
    _turn(9, note="a value with a \x00 in it", empty=""),  # (the values go as JSON then)
    _turn(10, speaker="Lena"),  # the same keys as others, one value differs
]


def _columns(table: UnitTable) -> dict[str, list]:
    return {k: list(v) for k, v in table.columns.items()}


@pytest.mark.parametrize("units", [UNITS, UNITS[:7], [UNITS[1]], []], ids=["nul", "plain", "no-extras", "empty"])
def test_every_column_reads_back_exactly(units):
    table = UnitTable.from_units(units)
    data = table_to_bytes(table)
    back = table_from_bytes(data)
    assert back.units() == units
    assert _columns(back) == _columns(table)
    assert table_to_bytes(back) == data


def test_the_extras_are_written_by_column_not_as_json_pairs():
    data = table_to_bytes(UnitTable.from_units(UNITS[:7]))
    head = _header(data)
    assert "extras" not in head and head["extra_values_as"] == "joined"
    assert ["cid", "turn", "speaker", "near"] in head["extra_keys"]
    assert b"c7f3a9b21\x004\x00" not in data and b"c7f3a9b21\x000\x00Maya\x00000000000000" in data


def test_a_table_written_with_the_extras_as_json_pairs_is_still_read():
    table = UnitTable.from_units(UNITS)
    assert table_from_bytes(_previous_form(table)).units() == UNITS


def _shape_beyond(head: dict) -> None:
    head["extra_shapes"][-1] = len(head["extra_keys"])


def _shape_negative(head: dict) -> None:
    head["extra_shapes"][-1] = -1


def _shape_bool(head: dict) -> None:
    head["extra_shapes"][0] = True  # (True is no index)


def _shapes_no_list(head: dict) -> None:
    head["extra_shapes"] = "0,1,2"


def _key_no_string(head: dict) -> None:
    head["extra_keys"][0][0] = 7


def _a_key_fewer(head: dict) -> None:
    head["extra_keys"][-1].pop()  # fewer values called for than the blob holds


def _values_as_json(head: dict) -> None:
    head["extra_values_as"] = "json"  # a blob that is no JSON list


def _size_negative(head: dict) -> None:
    head["sizes"][-1] = -1


def _both_forms(head: dict) -> None:
    head["extras"] = []


@pytest.mark.parametrize(
    "lie",
    [_shape_beyond, _shape_negative, _shape_bool, _shapes_no_list, _key_no_string, _a_key_fewer, _values_as_json,
     _size_negative, _both_forms],
)  # fmt: skip
def test_a_header_that_lies_about_the_extras_is_refused(lie):
    data = table_to_bytes(UnitTable.from_units(UNITS[:7]))
    head = _header(data)
    lie(head)
    with pytest.raises(ValueError):
        table_from_bytes(_with_header(data, head))


def _header(data: bytes) -> dict:
    (n,) = struct.unpack_from("<Q", data, 0)
    return json.loads(data[8 : 8 + n])


def _with_header(data: bytes, head: dict) -> bytes:
    (n,) = struct.unpack_from("<Q", data, 0)
    text = json.dumps(head).encode("utf-8")
    return struct.pack("<Q", len(text)) + text + data[8 + n :]


def _previous_form(table: UnitTable) -> bytes:
    """The table as memclaw wrote it before the extras went by column (JSON pairs in the header)."""
    c = table.columns
    head = {k: c[k] for k in ("timestamps", "sections", "scopes", "sources")}
    head["extras"] = [[list(kv) for kv in e] for e in c["extras"]]
    head["n"] = len(table)
    blobs = []
    for k in JOINED_COLUMNS:
        joined = "\x00".join(c[k])
        plain = joined.count("\x00") == max(len(table) - 1, 0)
        blobs.append((joined if plain else json.dumps(c[k])).encode("utf-8"))
        head[f"{k}_as"] = "joined" if plain else "json"
    head["sizes"] = [len(b) for b in blobs]
    text = json.dumps(head).encode("utf-8")
    ints = [little(c[k]) for k in INT_COLUMNS] + [little(c["kinds"])]
    return b"".join([struct.pack("<Q", len(text)), text, *blobs, *ints])


def test_a_pair_that_repeats_across_extras_is_read_as_one_object():
    """A loaded table stays in memory for the life of a chat or the Discord bot: 100k archived turns hold ~600k
    pairs, most of them repeats (a chunk's id, a speaker), so each distinct pair is one object."""
    back = table_from_bytes(table_to_bytes(UnitTable.from_units(UNITS)))
    cids = [pair for e in back.columns["extras"] for pair in e if pair[0] == "cid"]
    assert len(cids) == 6 and all(pair is cids[0] for pair in cids)

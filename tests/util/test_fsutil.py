"""Durable replacement: the temp files a killed writer leaves are cleaned up by the next write."""

from __future__ import annotations

import os
import time

from memclaw.util.files import STALE_TEMP_S, replace_atomically


def test_next_write_removes_stale_temps_and_keeps_live_ones(tmp_path):
    tmp_path = tmp_path / "memory"
    tmp_path.mkdir()
    target = tmp_path / "MEMORY.md"
    target.write_text("- old\n")
    stale = tmp_path / ".MEMORY.md.abc123.tmp"  # what a SIGKILL mid-write leaves behind
    live = tmp_path / ".MEMORY.md.def456.tmp"  # a write in progress in another process
    other = tmp_path / ".HISTORY.md.abc123.tmp"  # another file's temp: not ours to judge
    for p in (stale, live, other):
        p.write_text("partial")
    old = time.time() - STALE_TEMP_S - 60
    os.utime(stale, (old, old))
    os.utime(other, (old, old))
    replace_atomically(target, b"- new\n")
    assert target.read_bytes() == b"- new\n"
    assert not stale.exists() and live.exists() and other.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".HISTORY.md.abc123.tmp",
        ".MEMORY.md.def456.tmp",
        "MEMORY.md",
    ]


def test_names_with_glob_characters_are_matched_literally(tmp_path):
    target = tmp_path / "notes[1].md"
    stale = tmp_path / ".notes[1].md.x.tmp"
    unrelated = tmp_path / ".notes1.md.x.tmp"
    for p in (stale, unrelated):
        p.write_text("partial")
        old = time.time() - STALE_TEMP_S - 60
        os.utime(p, (old, old))
    replace_atomically(target, b"x")
    assert not stale.exists() and unrelated.exists()

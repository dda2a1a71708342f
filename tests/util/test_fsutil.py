"""Durable replacement: the temp files a killed writer leaves are cleaned up by the next write; a read-only file is
never replaced."""

from __future__ import annotations

import os
import stat
import time

import pytest

from memclaw.util.files import STALE_TEMP_S, ReadOnlyFileError, check_writable, replace_atomically


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


def test_a_read_only_file_is_never_replaced_even_by_root(tmp_path):
    """A rename replaces a file whatever its mode (and root may write anything): the file's own mode decides, as it
    would for its owner. Nothing is written, no temp file is left, the mode is kept."""
    folder = tmp_path / "memory"
    folder.mkdir()
    target = folder / "MEMORY.md"
    target.write_bytes(b"- keep me\n")
    for mode in (0o444, 0o400, 0o044):
        target.chmod(mode)
        with pytest.raises(ReadOnlyFileError, match="read-only") as caught:
            replace_atomically(target, b"- replaced\n")
        assert caught.value.filename == str(target) and isinstance(caught.value, PermissionError)
        assert target.read_bytes() == b"- keep me\n" and stat.S_IMODE(target.stat().st_mode) == mode
    assert [p.name for p in folder.iterdir()] == ["MEMORY.md"]
    target.chmod(0o644)
    replace_atomically(target, b"- replaced\n")
    assert target.read_bytes() == b"- replaced\n" and stat.S_IMODE(target.stat().st_mode) == 0o644


def test_which_write_bit_counts_is_the_one_for_this_process(tmp_path):
    """The owner's bit for the owner (and root), the group's for a member of the file's group, the others' else."""
    f = tmp_path / "f"
    f.write_text("x")
    st = f.stat()
    me, group = os.geteuid(), os.getegid()

    def as_file(mode: int, uid: int, gid: int) -> os.stat_result:
        fields = list(st)
        fields[stat.ST_MODE], fields[stat.ST_UID], fields[stat.ST_GID] = stat.S_IFREG | mode, uid, gid
        return os.stat_result(fields)

    check_writable(as_file(0o200, me, group), f)
    with pytest.raises(ReadOnlyFileError):
        check_writable(as_file(0o022, me, group), f)  # the owner may not, whoever else may
    if me != 0:  # root counts as the owner of every file
        stranger = me + 1
        check_writable(as_file(0o020, stranger, group), f)
        with pytest.raises(ReadOnlyFileError):
            check_writable(as_file(0o202, stranger, group), f)
        check_writable(as_file(0o002, stranger, group + 1 if group + 1 not in os.getgroups() else 65533), f)
    else:
        check_writable(as_file(0o200, 12345, 12345), f)
        with pytest.raises(ReadOnlyFileError):
            check_writable(as_file(0o066, 12345, 12345), f)

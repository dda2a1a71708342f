"""memclaw.util.dirwatch: a folder's changes seen with one read (real inotify on Linux; elsewhere, always 'changed')."""

from __future__ import annotations

import os
import sys

import pytest

from memclaw.util.dirwatch import DirWatch

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")


@linux
def test_every_kind_of_change_is_seen_and_a_quiet_folder_costs_one_read(tmp_path):
    day = tmp_path / "2026-11-25.md"
    day.write_text("# 2026-11-25\n", "utf-8")
    w = DirWatch(tmp_path)
    w.begin()
    assert not w.changed() and not w.changed()
    changes = [
        lambda: day.open("a").write("- 14:02 **Maya**: appended\n"),  # in place: the folder's mtime does not move
        lambda: day.write_text("# 2026-11-25\n- edited\n", "utf-8"),
        lambda: os.utime(day, (1, 1)),
        lambda: (tmp_path / "2026-11-26.md").write_text("", "utf-8"),
        lambda: os.replace(tmp_path / "2026-11-26.md", tmp_path / "2026-11-27.md"),
        lambda: (tmp_path / "2026-11-27.md").unlink(),
    ]
    for change in changes:
        change()
        assert w.changed()
        w.begin()
        assert not w.changed()
    w.close()


@linux
def test_a_folder_moved_or_removed_or_not_there_counts_as_changed(tmp_path):
    d = tmp_path / "archive"
    w = DirWatch(d)
    w.begin()  # no folder yet: not watched, so always 'changed' (the caller scans)
    assert w.changed() and w.changed()
    d.mkdir()
    w.begin()
    assert not w.changed()
    d.rename(tmp_path / "moved")
    assert w.changed()


def test_without_a_watch_everything_is_a_change(tmp_path, monkeypatch):
    import memclaw.util.dirwatch as dw

    monkeypatch.setattr(dw, "_LIB", None)  # not Linux, or no inotify
    w = DirWatch(tmp_path)
    w.begin()
    assert w.changed() and w.changed()


@linux
def test_more_folders_than_inotify_instances_are_each_watched_on_their_own(tmp_path):
    """A gateway watches one archive folder per sender: 300 folders (a user gets ~128 inotify instances, all its
    processes together) share the process's one instance; a change marks its own folder only, and two watches of one
    folder stay independent (closing one leaves the other watching)."""
    folders = [tmp_path / f"s{i}" for i in range(300)]
    watches = []
    for f in folders:
        f.mkdir()
        w = DirWatch(f)
        w.begin()
        watches.append(w)
    twin = DirWatch(folders[7])
    twin.begin()
    assert not any(w.changed() for w in watches) and not twin.changed()
    (folders[7] / "2026-11-25.md").write_text("x", "utf-8")
    assert [i for i, w in enumerate(watches) if w.changed()] == [7] and twin.changed()
    watches[7].close()
    twin.begin()
    (folders[7] / "2026-11-26.md").write_text("y", "utf-8")
    assert twin.changed() and watches[7].changed()  # (closed: unwatched, so always 'changed')
    for w in watches:
        w.close()


@linux
def test_a_forked_child_never_takes_its_parents_watch_for_its_own(tmp_path):
    """A watch armed before a fork belongs to the parent's inotify instance: in the child it reports 'changed' (the
    caller scans) until the child arms its own, which then sees the child's changes and only those."""
    w = DirWatch(tmp_path)
    w.begin()
    assert not w.changed()
    pid = os.fork()
    if pid == 0:  # the child: exit status 0 only if every check holds
        ok = w.changed()  # the parent's watch is not the child's
        w.begin()
        ok = ok and not w.changed()
        (tmp_path / "2026-11-25.md").write_text("x", "utf-8")
        ok = ok and w.changed()
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    assert w.changed()  # the child's file is a change in the parent's folder too
    w.close()

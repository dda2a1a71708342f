"""Memory Markdown files on disk: read into units, locked for an edit, replaced atomically.

The edits themselves live in memclaw.markdown.fact_ops (MEMORY.md) and memclaw.markdown.history_file (HISTORY.md).

- Reading never follows a symlink and decodes with errors="surrogateescape". A stray non-UTF-8 byte survives a
  rewrite unchanged, while the units handed to the index carry U+FFFD in its place.
- A file that is not text is refused (MemoryFileError, exit 3), never indexed and never written to (`check_text`).
  Such a file holds a NUL byte, or more than 1 byte in MAX_UNDECODABLE_SHARE that is not UTF-8.
- A read-only file is never replaced or appended to, even by root (memclaw.util.files.check_writable). The error
  names the chmod that allows it.
- An edit is a read-modify-write under an exclusive lock on a hidden sidecar, `.MEMORY.md.lock` (`locked`). It lands
  with one atomic replace (`atomic_write`), so a crash leaves the old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from memclaw.errors import MemoryFileError
from memclaw.markdown.formats import parse_history
from memclaw.markdown.memory_md import parse_memory
from memclaw.markdown.units import MemoryUnit
from memclaw.util.files import ReadOnlyFileError, check_writable, fsync_dir, replace_atomically
from memclaw.util.safepath import NotRegularFileError, is_symlink_error, open_nofollow, read_nofollow, refusal

# POSIX only; elsewhere writes are still atomic, just not locked across processes
try:
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

ENCODING = "utf-8"
ERRORS = "surrogateescape"
# a memory file with more than 1 byte in 8 that is not UTF-8 is not text
MAX_UNDECODABLE_SHARE = 8


# ----- low-level file helpers ----------------------------------------------------------------------------
def os_reason(e: OSError) -> str:
    """An OSError in a few words (its strerror, else its class name)."""
    return e.strerror or e.__class__.__name__


def _write_error(path: Path, e: OSError, doing: str, fix: str) -> MemoryFileError:
    """The one line for a failed write of a memory file: a read-only file (memclaw.util.files.check_writable) names
    the chmod that allows the write; anything else `fix`."""
    if isinstance(e, ReadOnlyFileError):
        return MemoryFileError(
            f"cannot {doing} {path}: it is read-only (permission denied), so memclaw leaves it as it is: make it "
            f"writable (chmod u+w {path}) to let memclaw change it"
        )
    return MemoryFileError(f"cannot {doing} {path}: {os_reason(e)}; {fix}")


def _fix(e: OSError) -> str:
    """What to do about an OSError on a memory file that should be a readable regular file."""
    if isinstance(e, IsADirectoryError):
        return "it is a folder: move it out of the way"
    if isinstance(e, NotRegularFileError):
        return "memclaw reads and writes only regular files"
    if e.errno == errno.ELOOP:
        return "it is a symlink loop: fix or remove the link"
    if isinstance(e, NotADirectoryError):
        return "a folder on its path is a file: move that file out of the way"
    return "fix its permissions"


def check_text(path: Path, data: bytes) -> None:
    """Raise MemoryFileError (naming the file and the fix) if a memory file's bytes are not text: a NUL byte, or
    more than 1 byte in MAX_UNDECODABLE_SHARE that is not UTF-8. A few stray non-UTF-8 bytes are kept."""
    if b"\x00" in data:
        why = "it is UTF-16" if data[:2] in (b"\xff\xfe", b"\xfe\xff") else "it holds NUL bytes, as binary files do"
    else:
        try:
            data.decode(ENCODING)
            return
        except UnicodeDecodeError:
            pass
        bad = len(data) - len(data.decode(ENCODING, "ignore").encode(ENCODING))
        if bad * MAX_UNDECODABLE_SHARE <= len(data):
            return
        why = f"{bad:,} of its {len(data):,} bytes are not UTF-8"
    raise MemoryFileError(
        f"memory file {path} is not UTF-8 text ({why}); memclaw neither indexes nor changes it: re-save it as "
        "UTF-8, or move it out of the way if it is not your memory"
    )


def read_bytes(path: Path) -> bytes | None:
    """The file's bytes, or None if it does not exist. MemoryFileError if it cannot be read or is not text."""
    try:
        data = read_nofollow(Path(path))
    except FileNotFoundError:
        return None
    except OSError as e:
        if is_symlink_error(e, path):
            raise MemoryFileError(refusal(Path(path))) from e
        raise MemoryFileError(f"cannot read memory file {path}: {os_reason(e)}; {_fix(e)}") from e
    check_text(path, data)
    return data


def read_text(path: Path) -> str | None:
    """The file's text (surrogate-escaped where not UTF-8), or None if it does not exist."""
    data = read_bytes(path)
    return None if data is None else data.decode(ENCODING, ERRORS)


def file_signature(path: Path) -> tuple[int, int, int] | None:
    """(mtime_ns, size, inode): changes whenever the file is rewritten or appended to; None if missing."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise MemoryFileError(f"cannot read memory file {path}: {os_reason(e)}; {_fix(e)}") from e
    if stat.S_ISLNK(st.st_mode):
        raise MemoryFileError(refusal(Path(path)))
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def lock_path(path: Path) -> Path:
    path = Path(path)
    return path.with_name(f".{path.name}.lock")


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Exclusive lock for edits of `path` (a sidecar lock file; works across threads and processes)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = open_nofollow(lock_path(path), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        if is_symlink_error(e, lock_path(path)):
            raise MemoryFileError(refusal(lock_path(path))) from e
        raise MemoryFileError(f"cannot lock memory file {path}: {os_reason(e)}; check the folder's permissions") from e
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        # closing releases the lock
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data` atomically (see memclaw.util.files), as a MemoryFileError naming the fix."""
    path = Path(path)
    try:
        st = os.lstat(path)
        mode = stat.S_IMODE(st.st_mode)
    except FileNotFoundError:
        mode = 0o644
    except OSError as e:
        raise MemoryFileError(f"cannot write memory file {path}: {os_reason(e)}; fix its permissions") from e
    else:
        if stat.S_ISLNK(st.st_mode):
            raise MemoryFileError(refusal(path))
    try:
        replace_atomically(path, data, mode=mode)
    except OSError as e:
        if is_symlink_error(e, path):
            raise MemoryFileError(refusal(path)) from e
        raise _write_error(path, e, "write memory file", "check disk space and permissions") from e


_DAY_FILE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}\.md\Z")


def day_files(folder: Path, *, ordered: bool = True) -> list[tuple[str, os.stat_result]]:
    """The name and lstat of each archive day file (`YYYY-MM-DD.md`) in `folder`, by name when `ordered`; [] if the
    folder does not exist. One open of the folder, then one fstatat per file (no path walk: recall checks every day
    file). A symlink among them is refused (MemoryFileError); OSError if the folder cannot be listed."""
    match = _DAY_FILE.match
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    try:
        names = [n for n in os.listdir(fd) if match(n)]
        for name in sorted(names) if ordered else names:
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            # gone since the scan
            except FileNotFoundError:
                continue
            except OSError as e:
                path = Path(folder) / name
                raise MemoryFileError(f"cannot read memory file {path}: {os_reason(e)}; {_fix(e)}") from e
            if stat.S_ISLNK(st.st_mode):
                raise MemoryFileError(refusal(Path(folder) / name))
            out.append((name, st))
    finally:
        os.close(fd)
    return out


def append_block(path: Path, make: Callable[[str], str | None]) -> bool:
    """Append `make(current text)` to `path` as a block of its own; False when `make` returns None.

    It is a true append under the file's lock: earlier bytes are never rewritten. The block is blank-line separated,
    in the file's own line endings, and fsynced with its folder when the file is new. A missing file is created; a
    symlink or a file that is not text is refused (MemoryFileError naming the fix)."""
    path = Path(path)
    with locked(path):
        try:
            created = not os.path.lexists(path)
            if not created:
                # a symlink passes here and is refused by the open
                check_writable(os.lstat(path), path)
            fd = open_nofollow(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        except ReadOnlyFileError as e:
            raise _write_error(path, e, "append to", "") from e
        except OSError as e:
            if is_symlink_error(e, path):
                raise MemoryFileError(refusal(path)) from e
            raise MemoryFileError(f"cannot append to {path}: {os_reason(e)}; fix its permissions") from e
        try:
            size = os.fstat(fd).st_size
            data = os.pread(fd, size, 0) if size else b""
            check_text(path, data)
            block = make(data.decode(ENCODING, ERRORS))
            if block is None:
                return False
            first_end = data.find(b"\n", 0, 4096)
            nl = "\r\n" if first_end > 0 and data[first_end - 1 : first_end] == b"\r" else "\n"
            t = data[-8:].replace(b"\r", b"")
            if not size or (t.endswith(b"\n\n") or t == b"\n"):
                sep = ""
            elif t.endswith(b"\n"):
                sep = nl
            else:
                sep = nl + nl
            view = memoryview((sep + block.rstrip("\n").replace("\n", nl) + nl).encode(ENCODING, ERRORS))
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        except OSError as e:
            raise _write_error(path, e, "append to", "check disk space and permissions") from e
        finally:
            os.close(fd)
    if created:
        fsync_dir(path.parent)
    return True


# ----- reading -------------------------------------------------------------------------------------------
def read_units(path: Path, *, scope: str, kind: str, source: str) -> list[MemoryUnit]:
    """Units of one memory file (`kind` "fact" for MEMORY.md, "history" for HISTORY.md, "archive" for an archive
    day file); [] if missing. A unit over the size limit is cut to it, with a warning (memclaw.markdown.unit_size)."""
    from memclaw.markdown.archive import archive_units
    from memclaw.markdown.unit_size import cap_units

    if kind not in ("fact", "history", "archive"):
        raise MemoryFileError(f"unknown memory kind {kind!r}: use 'fact', 'history' or 'archive'")
    text = read_text(path)
    if text is None:
        return []
    if kind == "fact":
        return cap_units(parse_memory(text, scope=scope, source=source))
    if kind == "archive":
        return cap_units(archive_units(text, scope=scope, source=source))
    return cap_units(parse_history(text, scope=scope, source=source))


def encode_text(text: str) -> bytes:
    """A memory file's text as bytes, stray non-UTF-8 bytes restored (the inverse of `read_text`)."""
    return text.encode(ENCODING, ERRORS)

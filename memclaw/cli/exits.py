"""How the console script ends when its output cannot be written.
A reader that went away (`| head -1`) ends it quietly with 141. A closed stdout (`>&-`) is treated as /dev/null.
An output that cannot take the text, such as a full disk, gives one line and exit 1.
memclaw.cli.main.run is the one place that calls these."""

from __future__ import annotations

import contextlib
import errno
import os
import select
import stat
import sys

BROKEN_PIPE_EXIT = 141
"""A reader that closed stdout (`memclaw recall x | head -1`): no message, the shell's code for SIGPIPE (128 + 13)."""


def closed_stdout(e: SystemExit) -> bool:
    """The exit is click's for a closed stdout: typer catches EPIPE inside a command and exits 1 quietly."""
    cause = e.__context__
    return isinstance(cause, OSError) and cause.errno == errno.EPIPE


def reader_gone() -> bool:
    """stdout is a pipe whose reader has closed it. Checked after a command: a large write that the reader left
    halfway returns the part it took, and Python drops the rest without an error (`memory list | head -c 100`)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sys.stdout.flush()
        fd = sys.stdout.fileno()
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            poll = select.poll()
            # Errors are always reported: a pipe without a reader is one
            poll.register(fd, 0)
            return any(events & select.POLLERR for _fd, events in poll.poll(0))
    return False


def quiet_exit_for_closed_stdout() -> None:
    """Exit BROKEN_PIPE_EXIT without a word, stdout pointed at /dev/null so that the interpreter's last flush
    of what is still buffered fails on nothing (Python's documented way: "Note on SIGPIPE" in the signal module)."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    sys.exit(BROKEN_PIPE_EXIT)


OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
"""No room to write (`> /dev/full`, a full disk or quota), met where no code path said it in its own words: one line,
exit 1."""


def closed_streams_to_devnull() -> None:
    """A process started with stdout or stderr closed (`memclaw recall x >&-`) has None there: it writes to
    /dev/null instead (the work is done, nothing is shown), as if redirected."""
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115 (lives as long as the process)


def exit_for_unwritable_output(e: OSError) -> None:
    """One line on stderr naming what could not be written, then exit 1 with stdout on /dev/null.

    The stderr line is skipped if stderr cannot take it. The redirect keeps the interpreter's last flush from
    failing again."""
    what = f"cannot write {e.filename}" if e.filename else "cannot write the output"
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"Error: {what}: {e.strerror or e}; free some space, or send the output elsewhere\n")
        sys.stderr.flush()
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    sys.exit(1)

"""Start-up work run in background threads (opening the vector store, loading the embedding model), and the one
wait for it before the process exits.

That work runs native code: chromadb's Rust bindings and ONNX Runtime. A command may end before it needs the
result. If the interpreter then shuts down while such a thread runs, the process dies with a segmentation fault.
So every such thread is made here and is never a daemon. The console script calls `wait_for_background()` on
every exit path, before the interpreter shuts down.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable

_threads: list[threading.Thread] = []
_threads_lock = threading.Lock()

INTERRUPTED_EXIT = 130


def background_thread(target: Callable[[], object], name: str) -> threading.Thread:
    """A thread (not started: the caller starts it) that `wait_for_background` waits for."""
    thread = threading.Thread(target=target, name=name, daemon=False)
    with _threads_lock:
        _threads[:] = [t for t in _threads if t.ident is None or t.is_alive()]
        _threads.append(thread)
    return thread


def wait_for_background() -> None:
    """Wait for every background thread started so far. A Ctrl-C while waiting ends the process at once, without
    the interpreter's shutdown (which would tear down what the thread still uses): exit code 130."""
    try:
        while thread := _next_started():
            thread.join()
    except KeyboardInterrupt:
        _flush_std_streams()
        os._exit(INTERRUPTED_EXIT)


def _next_started() -> threading.Thread | None:
    with _threads_lock:
        while _threads:
            thread = _threads.pop()
            # Started (one never started has nothing to wait for)
            if thread.ident is not None:
                return thread
    return None


def _flush_std_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()

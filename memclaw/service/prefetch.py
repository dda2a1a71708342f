"""A piece of start-up work run in a background thread (opening the vector store), its error handed to whoever
waits for it, as if the work had run in that thread. The thread is one of memclaw.util.background's: the console
script waits for it before exiting, whether or not the command used what it opened."""

from __future__ import annotations

import threading
from collections.abc import Callable

from memclaw.util.background import background_thread


class Prefetch:
    """One background run of `work`; `join` waits for it and returns its error, if any."""

    def __init__(self, work: Callable[[], object], name: str) -> None:
        self._work = work
        self._error: BaseException | None = None
        self._thread = background_thread(self._run, name)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            self._work()
        except BaseException as e:  # re-raised in the caller's thread by whoever joins
            self._error = e

    def inside(self) -> bool:
        """The caller runs in the prefetch's own thread (which must not wait for itself)."""
        return self._thread is threading.current_thread()

    def join(self) -> BaseException | None:
        self._thread.join()
        err, self._error = self._error, None
        return err

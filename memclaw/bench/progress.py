"""The progress of a benchmark run on stderr: a rich bar on a terminal, a plain line now and then in a log
(memclaw.util.progress), or nothing (tests, `--no-progress`)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable


class Progress:
    """A rich progress bar on stderr, plain lines when stderr is no terminal, or nothing when not `enabled`."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._prog = None
        # the plain lines' reporters, closed on exit
        self._plain: contextlib.ExitStack | None = None

    def __enter__(self) -> Progress:
        if self.enabled and not sys.stderr.isatty():
            self._plain = contextlib.ExitStack()
        elif self.enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._prog = Progress(
                TextColumn("{task.description}", style="bold", markup=False),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
                console=Console(stderr=True, markup=False, emoji=False, highlight=False),
            )
            self._prog.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._prog is not None:
            self._prog.__exit__(*exc)
        if self._plain is not None:
            self._plain.__exit__(*exc)

    def task(self, description: str, total: int) -> Callable[..., None]:
        """Add a task; returns advance(n=1, description=None)."""
        if self._plain is not None:
            from memclaw.util.progress import stderr_progress

            step = self._plain.enter_context(stderr_progress(total, description, unit="step"))
            return lambda n=1, description=None: step(n)
        if self._prog is None:
            return lambda n=1, description=None: None
        prog = self._prog
        tid = prog.add_task(description, total=total)

        def advance(n: int = 1, description: str | None = None) -> None:
            prog.update(tid, advance=n, **({"description": description} if description else {}))

        return advance

    def log(self, msg: str) -> None:
        if self._prog is not None:
            self._prog.console.print(msg)
        elif self._plain is not None:
            print(msg, file=sys.stderr, flush=True)

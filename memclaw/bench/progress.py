"""The progress bar of a benchmark run: rich on stderr, or nothing (tests and non-interactive use)."""

from __future__ import annotations

from collections.abc import Callable


class Progress:
    """A rich progress bar on stderr (or nothing, for tests and non-interactive use)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._prog = None

    def __enter__(self) -> Progress:
        if self.enabled:
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

    def task(self, description: str, total: int) -> Callable[..., None]:
        """Add a task; returns advance(n=1, description=None)."""
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

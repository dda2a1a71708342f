"""Progress of long index work (embedding a rebuild, a large first sync) on stderr.

Shown only once the work has taken `SHOW_AFTER_S`, so a sync of a few memories says nothing. On a terminal: a rich
bar with the count, the rate and the time left, then one summary line. Elsewhere (a pipe, a log file): a plain
line every `LINE_EVERY_S` with the same figures, and the summary line. Work that cannot be counted (`total` 0:
one step, e.g. parsing a 30 MB file) says `what...` once it has taken `SHOW_AFTER_S`, then how long it took.
The CLI passes `stderr_progress` to the memory service (`MemoryService.progress`); `--json` commands pass nothing.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import IO, Any

from memclaw.util.text import counted

Advance = Callable[[int], None]
ProgressFactory = Callable[[int, str], contextlib.AbstractContextManager[Advance]]

SHOW_AFTER_S = 1.0
LINE_EVERY_S = 10.0


def _seconds(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min"


class _Reporter:
    def __init__(
        self, total: int, what: str, stream: IO[str], tty: bool, clock: Callable[[], float], unit: str = "vector"
    ) -> None:
        self.total, self.what, self.stream, self.tty, self.clock, self.unit = total, what, stream, tty, clock, unit
        self.done = 0
        self.t0 = clock()
        self.shown = False
        self._last_line = 0.0
        self._bar: Any = None
        self._task: Any = None

    def rate(self, now: float) -> float:
        return self.done / max(now - self.t0, 1e-9)

    def figures(self, now: float) -> str:
        rate = self.rate(now)
        left = (self.total - self.done) / rate if rate > 0 else 0.0
        return f"{self.done:,}/{self.total:,} {self.unit}s, {rate:,.0f}/s, about {_seconds(left)} left"

    def advance(self, n: int) -> None:
        self.done += n
        now = self.clock()
        if not self.shown and (now - self.t0 < SHOW_AFTER_S or self.done >= self.total):
            # Quick so far, or already done: nothing to show
            return
        self.shown = True
        if self.tty:
            self._draw(now)
        elif self.done < self.total and (not self._last_line or now - self._last_line >= LINE_EVERY_S):
            self._last_line = now
            print(f"{self.what}: {self.figures(now)}", file=self.stream, flush=True)

    def _draw(self, now: float) -> None:
        if self._bar is None:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeRemainingColumn(),
                console=Console(file=self.stream),
                transient=True,
            )
            self._task = self._bar.add_task(self.what, total=self.total, completed=self.done, rate="")
            self._bar.start()
        self._bar.update(self._task, completed=self.done, rate=f"{self.rate(now):,.0f}/s")

    def close(self, finished: bool) -> None:
        if self._bar is not None:
            self._bar.stop()
        if self.shown and finished:
            now = self.clock()
            took = f"{counted(self.done, self.unit)} in {_seconds(now - self.t0)} ({self.rate(now):,.0f}/s)"
            print(f"{self.what}: {took}", file=self.stream, flush=True)


@contextlib.contextmanager
def stderr_progress(
    total: int,
    what: str,
    *,
    stream: IO[str] | None = None,
    clock: Callable[[], float] = time.monotonic,
    unit: str = "vector",
) -> Iterator[Advance]:
    """`advance(n)` after each n of `total` items of `what` (e.g. "embedding 5,000 memories"), counted as `unit`s."""
    out = stream if stream is not None else sys.stderr
    if total <= 0:
        with _step(what, out, clock):
            yield lambda n: None
        return
    tty = bool(getattr(out, "isatty", lambda: False)())
    r = _Reporter(total, what, out, tty, clock, unit)
    finished = False
    try:
        yield r.advance
        finished = True
    finally:
        r.close(finished)


@contextlib.contextmanager
def _step(what: str, out: IO[str], clock: Callable[[], float]) -> Iterator[None]:
    t0 = clock()
    said = threading.Event()

    def say() -> None:
        said.set()
        print(f"{what}...", file=out, flush=True)

    timer = threading.Timer(SHOW_AFTER_S, say)
    timer.daemon = True
    timer.start()
    finished = False
    try:
        yield
        finished = True
    finally:
        timer.cancel()
        if said.is_set() and finished:
            print(f"{what}: done in {_seconds(clock() - t0)}", file=out, flush=True)


def progress_for(
    factory: ProgressFactory | None, given: Advance | None, total: int, what: str
) -> contextlib.AbstractContextManager[Advance | None]:
    """The progress to report `total` items of `what` to: the `given` callback if any, else a new one from
    `factory` (e.g. `stderr_progress`), else none."""
    if given is not None or factory is None:
        return contextlib.nullcontext(given)
    return factory(total, what)

"""Long index work on a terminal (memclaw.util.progress, issue 19.6): after a second, a bar with the count and the
rate, redrawn in place and cleared at the end, then one summary line. (Plain lines on a pipe: test_unit_size.)"""

from __future__ import annotations

import io
import re

from memclaw.util.progress import stderr_progress


class Terminal(io.StringIO):
    """stderr as a terminal (a tty) that records what is written to it."""

    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_a_bar_then_a_summary_line():
    now = [0.0]
    term = Terminal()
    with stderr_progress(1000, "embedding 900 memories", stream=term, clock=lambda: now[0]) as advance:
        now[0] = 0.5
        advance(100)
        assert term.getvalue() == ""  # within a second: nothing
        for step in range(9):
            now[0] = 2.0 + step
            advance(100)
    out = term.getvalue()
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out)  # the terminal's control sequences removed
    assert "embedding 900 memories" in shown and "━" in shown  # the bar, with its description
    counts = re.findall(r"\b(\d+)/1000\b", shown)
    assert counts[0] == "200" and counts[-1] == "1000", shown  # the count: from the first frame, what was done
    assert "\x1b[" in out  # drawn in place, as a live display
    assert shown.rstrip().splitlines()[-1] == "embedding 900 memories: 1,000 vectors in 10 s (100/s)"

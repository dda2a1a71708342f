"""Priority-ordered token budgeting: pure logic, no I/O.

Sections are considered from the highest priority (lowest number) down. A section that fits is kept whole.
The first section that does not fit is cut to what is left and every lower-priority section is dropped, so a
lower-priority section never survives while a higher one was cut. How a section is cut depends on its mode:

- `required`: never cut or dropped (identity and safety rules); if it cannot fit, the budget is impossible.
- `text`: cut at a paragraph boundary (else a line, else a character boundary for one giant line), followed by
  a visible `[truncated]` marker; dropped whole if not even the marker fits.
- `ranked`: whole items in rank order (best first); the lowest-ranked are dropped first.
- `history`: whole items in chronological order (a turn: never split, so a tool call stays with its result);
  the oldest are dropped first.

Every section carries `overhead`: tokens it costs when anything of it is kept (headers, separators). A text section
may yield to lower-priority sections (`yields_to`): the current message yields to the profile, bootstrap files and
memories. It is cut to what their whole cost leaves, never below half of what is left, and that cut drops nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from memclaw.errors import ConfigError

Mode = Literal["required", "text", "ranked", "history"]
Status = Literal["kept", "truncated", "dropped"]
TRUNCATED = "[truncated]"

_PARA_RE = re.compile(r"\n[ \t]*\n")


@dataclass(frozen=True)
class BudgetItem:
    # Label in reports: a memory id, "turn 3", ...
    key: str
    tokens: int


@dataclass(frozen=True)
class BudgetSection:
    name: str
    # 0 = highest
    priority: int
    mode: Mode
    # Required / text sections
    text: str = ""
    # Ranked / history sections
    items: tuple[BudgetItem, ...] = ()
    overhead: int = 0
    yields_to: tuple[str, ...] = ()
    """(text sections) Lower-priority sections this one makes room for: it is cut to what is left after their
    whole cost (but to no less than half of what is left), and that cut drops nothing after it."""


@dataclass
class SectionReport:
    name: str
    priority: int
    # Tokens the whole section would cost
    requested: int
    # Tokens it was granted: all it asked for, or what was left when it was cut
    allotted: int
    # Tokens it actually uses (<= allotted)
    used: int
    status: Status
    # Item keys, or a description of what was cut
    dropped: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {
            "section": self.name,
            "priority": self.priority,
            "requested": self.requested,
            "allotted": self.allotted,
            "used": self.used,
            "status": self.status,
            "dropped": list(self.dropped),
        }


@dataclass
class SectionResult:
    section: BudgetSection
    # Kept text (text / required modes), possibly ending with the [truncated] marker
    text: str
    # Indices of kept items (ranked / history modes), ascending
    kept: list[int]
    report: SectionReport


@dataclass
class Allocation:
    budget: int
    used: int
    results: dict[str, SectionResult]

    def reports(self) -> list[SectionReport]:
        return [r.report for r in self.results.values()]

    def __getitem__(self, name: str) -> SectionResult:
        return self.results[name]


def _largest_fitting(n: int, build: Callable[[int], str], cost: Callable[[str], int], cap: int) -> tuple[str, int]:
    """The candidate build(i) for the largest i in 1..n whose cost fits `cap`, and its cost. Cost grows with i.

    Galloping first (1, 2, 4, ...), then bisection. The longest prefix ever counted is under twice the answer.
    So a 1 MB message cut to a 2k-token budget costs a few counts of a few kB."""
    found, found_cost = "", 0
    lo, step = 1, 1
    # Gallop: find a failing bound
    while lo <= n:
        cand = build(lo)
        c = cost(cand)
        if c > cap:
            break
        found, found_cost = cand, c
        lo, step = lo + step, step * 2
    hi = min(lo, n + 1) - 1
    lo = lo - step // 2 + 1 if found else 1
    while lo <= hi:
        mid = (lo + hi) // 2
        cand = build(mid)
        c = cost(cand)
        if c <= cap:
            found, found_cost, lo = cand, c, mid + 1
        else:
            hi = mid - 1
    return found, found_cost


def cut_text(text: str, cap: int, count: Callable[[str], int], overhead: int = 0) -> tuple[str, int]:
    """The longest prefix of `text` (paragraphs, else lines, else characters) plus a `[truncated]` marker
    that costs at most `cap` tokens with `overhead`. Returns (text, tokens); ("", 0) if nothing fits."""

    def cost(s: str) -> int:
        return count(s) + overhead

    def best_prefix(pieces: Sequence[str], sep: str) -> tuple[str, int]:
        # never all pieces: that is the uncut text
        return _largest_fitting(len(pieces) - 1, lambda i: sep.join(pieces[:i]).rstrip() + sep + TRUNCATED, cost, cap)

    paras = _PARA_RE.split(text)
    if len(paras) > 1:
        got = best_prefix(paras, "\n\n")
        if got[0]:
            return got
    lines = paras[0].split("\n")
    if len(lines) > 1:
        got = best_prefix(lines, "\n")
        if got[0]:
            return got
    first = lines[0]

    # One giant line: cut between characters, preferring the last space in range
    def head(i: int) -> str:
        h = first[:i]
        space = h.rfind(" ")
        if space > i * 0.8:
            h = h[:space]
        return h.rstrip() + " " + TRUNCATED

    found, found_cost = _largest_fitting(len(first) - 1, head, cost, cap)
    if found:
        return found, found_cost
    if cost(TRUNCATED) <= cap:
        return TRUNCATED, cost(TRUNCATED)
    return "", 0


def section_cost(section: BudgetSection, count: Callable[[str], int]) -> int:
    """Tokens the whole section costs."""
    if section.mode in ("required", "text"):
        return count(section.text) + section.overhead if section.text else 0
    if not section.items:
        return 0
    return sum(i.tokens for i in section.items) + section.overhead


def allocate(sections: Sequence[BudgetSection], budget: int, count: Callable[[str], int]) -> Allocation:
    """Fit `sections` into `budget` tokens by priority (see the module docstring).

    Raises ConfigError when the `required` sections alone do not fit.
    """
    order = sorted(range(len(sections)), key=lambda i: (sections[i].priority, i))
    names = [s.name for s in sections]
    if len(set(names)) != len(names):
        raise ValueError(f"section names must be unique: {names}")
    required_prio = [s.priority for s in sections if s.mode == "required"]
    other_prio = [s.priority for s in sections if s.mode != "required"]
    if required_prio and other_prio and max(required_prio) > min(other_prio):
        raise ValueError("required sections must have the highest priority")
    need = sum(section_cost(s, count) for s in sections if s.mode == "required")
    if need > budget:
        raise ConfigError(
            f"context window too small: the identity and safety rules alone need {need} tokens but the budget "
            f"is {budget}; raise agent.context_window or lower context.reply_reserve"
        )

    remaining = budget
    cut_seen = False
    results: dict[str, SectionResult] = {}
    for i in order:
        s = sections[i]
        requested = section_cost(s, count)
        all_idx = list(range(len(s.items)))
        if s.yields_to and not cut_seen and s.mode == "text":
            reserve = sum(section_cost(x, count) for x in sections if x.name in s.yields_to)
            cap = max(remaining - reserve, remaining // 2)
            if requested > cap:
                res = _cut(s, requested, cap, count)
                remaining -= res.report.used
                results[s.name] = res
                continue
        if s.mode == "required" or (not cut_seen and requested <= remaining):
            remaining -= requested
            res = SectionResult(
                s, s.text, all_idx, SectionReport(s.name, s.priority, requested, requested, requested, "kept")
            )
        elif cut_seen or remaining <= 0:
            dropped = [it.key for it in s.items] if s.items else ["(whole section)"]
            res = SectionResult(s, "", [], SectionReport(s.name, s.priority, requested, 0, 0, "dropped", dropped))
            cut_seen = True
        else:
            res = _cut(s, requested, remaining, count)
            remaining -= res.report.used
            cut_seen = True
        results[s.name] = res
    return Allocation(budget=budget, used=budget - remaining, results=results)


def _cut(s: BudgetSection, requested: int, cap: int, count: Callable[[str], int]) -> SectionResult:
    if s.mode == "text":
        text, used = cut_text(s.text, cap, count, s.overhead)
        if not text:
            return SectionResult(
                s, "", [], SectionReport(s.name, s.priority, requested, cap, 0, "dropped", ["(whole section)"])
            )
        kept_chars = len(text) - len(TRUNCATED)
        dropped = [f"{max(0, len(s.text) - kept_chars)} of {len(s.text)} characters"]
        return SectionResult(s, text, [], SectionReport(s.name, s.priority, requested, cap, used, "truncated", dropped))
    # ranked: keep the best-ranked prefix; history: keep the newest suffix. Stop at the first misfit so a
    # lower-ranked (or older) item never survives while a better (or newer) one was dropped.
    order = range(len(s.items)) if s.mode == "ranked" else range(len(s.items) - 1, -1, -1)
    used, kept = s.overhead, []
    for j in order:
        t = s.items[j].tokens
        if used + t > cap:
            break
        used += t
        kept.append(j)
    if not kept:
        dropped = [it.key for it in s.items]
        return SectionResult(s, "", [], SectionReport(s.name, s.priority, requested, cap, 0, "dropped", dropped))
    kept.sort()
    keep = set(kept)
    dropped = [it.key for j, it in enumerate(s.items) if j not in keep]
    return SectionResult(s, "", kept, SectionReport(s.name, s.priority, requested, cap, used, "truncated", dropped))

"""memclaw.context._budget: priority-ordered allocation (pure logic) and its properties."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memclaw.context._budget import TRUNCATED, BudgetItem, BudgetSection, allocate, cut_text, section_cost
from memclaw.errors import ConfigError
from memclaw.llm.tokens import counter_for

count = counter_for("openai/gpt-4o-mini")  # the real offline counter (litellm's bundled encodings)


def words(n: int, tag: str = "w") -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


def paragraphs(sizes: list[int]) -> str:
    return "\n\n".join(words(n, f"p{i}x") for i, n in enumerate(sizes))


def test_everything_fits_is_kept_whole():
    secs = [
        BudgetSection("identity", 0, "required", text="You are memclaw."),
        BudgetSection("mem", 5, "ranked", items=(BudgetItem("a", 5), BudgetItem("b", 5)), overhead=3),
        BudgetSection("history", 9, "history", items=(BudgetItem("t1", 4), BudgetItem("t2", 4))),
    ]
    a = allocate(secs, 1000, count)
    assert [r.status for r in a.reports()] == ["kept", "kept", "kept"]
    assert a.used == sum(section_cost(s, count) for s in secs)
    assert a["mem"].kept == [0, 1] and a["history"].kept == [0, 1]


def test_ranked_drops_lowest_ranked_first_and_history_oldest_first():
    secs = [
        BudgetSection("identity", 0, "required", text="x"),
        BudgetSection("mem", 5, "ranked", items=tuple(BudgetItem(f"m{i}", 10) for i in range(5)), overhead=2),
    ]
    need = section_cost(secs[0], count)
    a = allocate(secs, need + 2 + 25, count)
    assert a["mem"].kept == [0, 1]
    assert a["mem"].report.dropped == ["m2", "m3", "m4"]
    assert a["mem"].report.status == "truncated"

    secs[1] = BudgetSection("history", 9, "history", items=tuple(BudgetItem(f"t{i}", 10) for i in range(5)))
    a = allocate(secs, need + 35, count)
    assert a["history"].kept == [2, 3, 4]
    assert a["history"].report.dropped == ["t0", "t1"]


def test_text_cut_at_paragraph_boundary_with_marker():
    text = paragraphs([30, 30, 30, 30])
    sec = BudgetSection("TOOLS.md", 8, "text", text=text, overhead=2)
    full = section_cost(sec, count)
    a = allocate([sec], full // 2, count)
    kept = a["TOOLS.md"].text
    assert kept.endswith("\n\n" + TRUNCATED)
    body = kept[: -len(TRUNCATED)].rstrip()
    assert text.startswith(body) and text[len(body) : len(body) + 2] == "\n\n"  # a paragraph boundary
    assert a["TOOLS.md"].report.used == count(kept) + 2 <= full // 2
    assert "characters" in a["TOOLS.md"].report.dropped[0]


def test_one_giant_line_is_cut_between_words():
    text = words(400)
    kept, used = cut_text(text, 50, count)
    assert kept.endswith(" " + TRUNCATED) and used <= 50 and used == count(kept)
    assert text.startswith(kept[: -len(TRUNCATED) - 1])


def test_required_sections_that_cannot_fit_raise_a_config_error():
    with pytest.raises(ConfigError, match="context window too small"):
        allocate([BudgetSection("identity", 0, "required", text=words(100))], 10, count)


def test_after_a_cut_lower_sections_are_dropped_even_if_they_would_fit():
    secs = [
        BudgetSection("identity", 0, "required", text="id"),
        BudgetSection("mem", 5, "ranked", items=(BudgetItem("a", 5), BudgetItem("huge", 500))),
        BudgetSection("tiny", 7, "text", text="ok"),
    ]
    a = allocate(secs, 100, count)
    assert a["mem"].kept == [0]
    assert a["tiny"].report.status == "dropped"


def test_a_section_that_yields_is_cut_to_leave_room_and_drops_nothing_after_it():
    mem = BudgetSection("mem", 5, "ranked", items=(BudgetItem("a", 30), BudgetItem("b", 30)))
    soul = BudgetSection("soul", 4, "text", text=words(40))
    msg = BudgetSection("message", 2, "text", text=paragraphs([300, 300]), yields_to=("mem", "soul"))
    history = BudgetSection("history", 9, "history", items=(BudgetItem("t1", 5),))
    secs = [BudgetSection("identity", 0, "required", text="id"), msg, soul, mem, history]
    a = allocate(secs, 400, count)
    assert a["message"].report.status == "truncated" and a["message"].text.endswith(TRUNCATED)
    assert a["soul"].report.status == "kept" and a["mem"].kept == [0, 1]
    assert a.used <= 400
    # without the yield, the message takes the room and everything after it is dropped
    plain = allocate([secs[0], BudgetSection("message", 2, "text", text=msg.text), soul, mem, history], 400, count)
    assert plain["soul"].report.status == "dropped" and plain["mem"].kept == []
    # a message that fits is never cut for them
    short = BudgetSection("message", 2, "text", text="hello", yields_to=("mem", "soul"))
    assert allocate([secs[0], short, soul, mem], 400, count)["message"].report.status == "kept"


# ----- properties --------------------------------------------------------------------------------------------
@st.composite
def section_lists(draw):
    n = draw(st.integers(1, 7))
    secs = [BudgetSection("identity", 0, "required", text=words(draw(st.integers(1, 20))), overhead=7)]
    for i in range(n):
        mode = draw(st.sampled_from(["text", "ranked", "history"]))
        prio = draw(st.integers(1, 9))
        overhead = draw(st.integers(0, 5))
        if mode == "text":
            sizes = draw(st.lists(st.integers(1, 40), min_size=1, max_size=6))
            secs.append(BudgetSection(f"s{i}", prio, "text", text=paragraphs(sizes), overhead=overhead))
        else:
            toks = draw(st.lists(st.integers(1, 60), min_size=1, max_size=12))
            items = tuple(BudgetItem(f"s{i}.{j}", t) for j, t in enumerate(toks))
            secs.append(BudgetSection(f"s{i}", prio, mode, items=items, overhead=overhead))
    total = sum(section_cost(s, count) for s in secs)
    required = section_cost(secs[0], count)
    budget = draw(st.integers(required, total + 20))
    return secs, budget


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(section_lists())
def test_allocation_properties(case):
    secs, budget = case
    a = allocate(secs, budget, count)
    reports = {r.name: r for r in a.reports()}

    # 1. the budget is never exceeded, and the per-section figures add up
    assert a.used == sum(r.used for r in reports.values()) <= budget
    for s in secs:
        r, res = reports[s.name], a[s.name]
        assert 0 <= r.used <= r.allotted <= max(r.requested, r.allotted)
        if s.mode == "text" and res.text:
            assert r.used == count(res.text) + s.overhead
        if s.mode in ("ranked", "history") and res.kept:
            assert r.used == sum(s.items[j].tokens for j in res.kept) + s.overhead

    # 2. a lower-priority section never survives while a higher-priority one was cut
    cut = [s for s in secs if reports[s.name].status != "kept" and section_cost(s, count) > 0]
    survivors = [s for s in secs if reports[s.name].used > 0]
    for c in cut:
        for s in survivors:
            assert s.priority <= c.priority, (s.name, c.name)

    # 3. ranked keeps a best-ranked prefix, history a newest suffix (order kept), text a marked prefix
    for s in secs:
        res = a[s.name]
        if s.mode == "ranked":
            assert res.kept == list(range(len(res.kept)))
        elif s.mode == "history":
            assert res.kept == list(range(len(s.items) - len(res.kept), len(s.items)))
        elif s.mode == "text" and res.report.status == "truncated":
            assert res.text.endswith(TRUNCATED)
            assert s.text.startswith(res.text[: -len(TRUNCATED)].rstrip())
        if res.report.status == "kept":
            assert res.report.used == section_cost(s, count)
    assert reports["identity"].status == "kept"


@given(
    st.lists(st.text(alphabet="ab \n", min_size=0, max_size=12), min_size=1, max_size=30).map("".join),
    st.integers(min_value=0, max_value=40),
)
def test_cut_text_finds_the_longest_fitting_prefix(text, cap):
    # galloping + bisection gives what trying every prefix would (cost: words + characters / 4)
    def count(s: str) -> int:
        return len(s.split()) + len(s) // 4

    got, cost = cut_text(text, cap, count)
    assert cost <= cap and (cost == count(got) if got else cost == 0)
    assert not got or got.endswith(TRUNCATED)
    paras = re.split(r"\n[ \t]*\n", text)
    if len(paras) > 1:
        fits = [i for i in range(1, len(paras)) if count("\n\n".join(paras[:i]).rstrip() + "\n\n" + TRUNCATED) <= cap]
        if fits:
            assert got == "\n\n".join(paras[: max(fits)]).rstrip() + "\n\n" + TRUNCATED

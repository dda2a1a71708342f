"""The ranking stage of recall (pure): the guarantee holds through the whole stage, over arbitrary signal lists."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from memclaw.recall.dates import DateRange
from memclaw.recall.ranking import RankInput, rank
from tests.recall.ranking_params import params, ranking


@dataclass(frozen=True)
class U:
    kind: str
    timestamp: datetime | None
    text: str


N = 30
DAY = [datetime(2026, 11, d, 12) for d in range(1, 29)]


@st.composite
def cases(draw):
    """Arbitrary units (some sharing a text, some dated), two arbitrary signal lists with arbitrary scores, links
    from facts to history entries, and maybe a named date range."""
    units = {}
    for i in range(N):
        kind = draw(st.sampled_from(["fact", "history", "archive"]))
        ts = draw(st.one_of(st.none(), st.sampled_from(DAY)))
        text = f"text {draw(st.integers(0, N + 5))}"  # some units share a text: one hit per text
        units[f"u{i}"] = U(kind, ts, text)
    ids = list(units)

    def signal(lo: float, hi: float) -> list[tuple[str, float]]:
        picked = draw(st.lists(st.sampled_from(ids), unique=True, max_size=N))
        scores = sorted(draw(st.lists(st.floats(lo, hi), min_size=len(picked), max_size=len(picked))), reverse=True)
        return list(zip(picked, scores, strict=True))

    hist = [i for i, u in units.items() if u.kind == "history"]
    links = {i: draw(st.lists(st.sampled_from(hist), max_size=2, unique=True)) for i in ids if hist and i < "u1"}
    ranges = draw(st.sampled_from([[], [DateRange(DAY[3], DAY[9], "that week")]]))
    turns = [i for i, u in units.items() if u.kind == "archive"]
    agent = frozenset(draw(st.lists(st.sampled_from(turns), unique=True))) if turns else frozenset()
    return RankInput(
        bm25=signal(0.01, 30.0),
        vector=signal(0.15, 1.0),
        units=units,
        links=links,
        ranges=ranges,
        now=DAY[-1],
        bm25_bound=40.0,
        agent_turns=agent.__contains__,
    )


def _distinct_ranks(inp: RankInput, sig, kind: str | None) -> list[tuple[str, str]]:
    """A signal's list as recall shows it alone: one unit per text, of the kind asked for (the raw systems)."""
    seen, out = set(), []
    for i, _s in sig:
        u = inp.units[i]
        if (kind is None or u.kind == kind) and u.text not in seen:
            seen.add(u.text)
            out.append((i, u.text))
    return out


@settings(max_examples=300, deadline=None)
@given(
    cases(),
    st.sampled_from([2, 3, 4]),
    st.integers(1, 40),
    st.sampled_from([None, "fact", "history"]),
    st.sampled_from(["adaptive", "weighted", "rrf"]),
    st.sampled_from([(1.0, True), (1.0, False), (0.4, True), (0.4, False)]),
)
def test_a_signals_top_k_stays_within_the_first_factor_k_for_every_k(inp, factor, k, kind, method, agent):
    """For every unit but, with `keep_agent_turns` off, the agent's own turns (weighed down by design)."""
    weight, keep_agent = agent
    s = ranking(fusion=params(method=method, min_similarity=0.15), keep_factor=factor,
                     agent_weight=weight, keep_agent_turns=keep_agent)  # fmt: skip
    out = rank(inp, s, k=k, n_cand=50, kind=kind)
    texts = [inp.units[h.id].text for h in out]
    assert len(texts) == len(set(texts))  # one hit per text
    assert all(kind is None or inp.units[h.id].kind == kind for h in out)
    placed = [h.id for h in out]
    for sig in (inp.bm25, inp.vector):
        for r, (own, text) in enumerate(_distinct_ranks(inp, sig, kind), 1):
            if factor * r > k:
                break
            head = placed[: factor * r]
            ids = [i for i, u in inp.units.items() if u.text == text]
            ts = inp.units[own].timestamp
            if inp.ranges and not (ts and any(ts in rg for rg in inp.ranges)):
                continue  # the query names dates and this unit is stamped outside them: the date outranks it
            if not keep_agent and weight < 1 and inp.agent_turns(own):
                continue  # the agent's own turn, not kept in place: its weight ranks it
            covered = {c for i in ids for c in inp.links.get(i, ())}
            assert any(inp.units[i].text == text for i in head) or covered & set(head), (text, r, factor)


def test_without_the_guarantee_a_weak_signal_top_can_be_buried_and_with_it_cannot():
    units = {f"b{i}": U("fact", None, f"bm25 {i}") for i in range(10)} | {"v": U("fact", None, "vector only")}
    bm25 = [(f"b{i}", 10.0 - i) for i in range(10)]
    vector = [("v", 0.5)] + [(f"b{i}", 0.49 - 0.01 * i) for i in range(10)]  # the vector's best, by a hair
    inp = RankInput(bm25=bm25, vector=vector, units=units)
    weighted = params(method="weighted", bm25_weight=0.7, min_similarity=0.15)
    off = [h.id for h in rank(inp, ranking(fusion=weighted), k=10, n_cand=50)]
    on = [h.id for h in rank(inp, ranking(fusion=weighted, keep_factor=2), k=10, n_cand=50)]
    assert off.index("v") == 9 and on.index("v") == 1  # vector rank 1: within the first 2, not one place more


def test_a_named_date_outranks_what_a_signal_found_outside_it():
    units = {
        "week": U("history", datetime(2026, 11, 10, 9), "planned the week"),
        "in": U("history", datetime(2026, 11, 17, 9), "dinner with Anna"),
    }
    last_week = DateRange(datetime(2026, 11, 16), datetime(2026, 11, 23), "last week")
    inp = RankInput(
        bm25=[], vector=[("week", 0.35), ("in", 0.16)], units=units, ranges=[last_week], dated_in=lambda rs, n: ["in"]
    )
    s = ranking(fusion=params(method="adaptive", min_similarity=0.15), date_scale="full", keep_factor=3)
    assert [h.id for h in rank(inp, s, k=2, n_cand=50)] == ["in", "week"]


def test_the_agents_own_turns_rank_by_their_weight_not_by_the_placement():
    """The agent's reply both signals rank first, weighed down: with `keep_agent_turns` it is placed within the first
    3 (its signal rank 1 times the factor); by default it ranks where the weight puts it, below the owner's turns,
    and the owner's turns keep their guarantee."""
    units = {"reply": U("archive", None, "the agent restates it")} | {
        f"o{i}": U("archive", None, f"the owner said {i}") for i in range(6)
    }
    bm25 = [("reply", 12.0)] + [(f"o{i}", 10.0 - i) for i in range(6)]
    vector = [("reply", 0.9)] + [(f"o{i}", 0.8 - 0.05 * i) for i in range(6)]
    inp = RankInput(bm25=bm25, vector=vector, units=units, agent_turns=lambda i: i == "reply")
    fusion = params(method="adaptive", min_similarity=0.15)

    def order(keep: bool, weight: float = 0.1) -> list[str]:
        s = ranking(fusion=fusion, keep_factor=3, agent_weight=weight, keep_agent_turns=keep)
        return [h.id for h in rank(inp, s, k=7, n_cand=50)]

    assert order(True).index("reply") == 2
    assert order(False) == ["o0", "o1", "o2", "o3", "o4", "o5", "reply"]
    assert order(False, weight=1.0)[0] == "reply"  # not weighed: as any unit


def test_the_config_is_the_one_source_of_the_ranking_defaults():
    """The ranking dataclasses hold no default of a setting RecallConfig has: recall, the lab and the tests all
    build their settings from the config (`rank_settings`) or spell every value out."""
    from dataclasses import MISSING, fields

    from memclaw.config import RecallConfig
    from memclaw.recall.fusion import FusionParams
    from memclaw.recall.ranking import RankSettings
    from memclaw.recall.search import rank_settings

    for cls in (FusionParams, RankSettings):
        defaulted = {f.name for f in fields(cls) if f.default is not MISSING or f.default_factory is not MISSING}
        assert defaulted <= {"vector_span_from", "date_only_max_days", "recency_weight"}, (cls, defaulted)
    s = rank_settings(RecallConfig())
    assert (s.fusion.method, s.fusion.min_similarity) == (RecallConfig().tuning.fusion, RecallConfig().min_similarity)

"""`bench longmemeval --one-memory`: every session of a hand-written LongMemEval-format file in one memory, and the
default protocol's candidate filter (the store as of the question's date, other questions' answer sessions masked)
against `--raw` (the real model, a real Chroma)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_bad_input import cli as memclaw_cli  # noqa: F401  (the fixture: memclaw's entry point in-process)


def _session(*turns: tuple[str, str, bool]) -> list[dict]:
    return [{"role": r, "content": c, **({"has_answer": True} if a else {})} for r, c, a in turns]


DOG_EARLY = _session(("user", "We adopted a golden retriever puppy called Biscuit today.", True),
                     ("assistant", "Congratulations on Biscuit!", False))  # fmt: skip
DOG_SHOW = _session(("user", "At the dog show I fell for the golden retriever breed all over again.", True),
                    ("assistant", "Golden retrievers are lovely dogs.", False))  # fmt: skip
DOG_LATE = _session(("user", "My golden retriever Biscuit learned to fetch the newspaper.", False),
                    ("assistant", "Clever dog!", False))  # fmt: skip
GARDEN = _session(("user", "I planted tomatoes and basil in the garden.", True),
                  ("assistant", "Basil grows well beside tomatoes.", False))  # fmt: skip
FILLER = _session(("user", "Can you recommend a thriller novel?", False), ("assistant", "Try Gone Girl.", False))


def _question(qid: str, qtype: str, question: str, date: str, ids: list[str], answers: list[str]) -> dict:
    sessions = {"dog-early": (DOG_EARLY, "2023/05/10 (Wed) 10:00"), "dog-show": (DOG_SHOW, "2023/06/20 (Tue) 09:00"),
                "dog-late": (DOG_LATE, "2023/07/15 (Sat) 18:00"), "garden": (GARDEN, "2023/04/02 (Sun) 08:00"),
                "filler": (FILLER, "2023/03/01 (Wed) 12:00")}  # fmt: skip
    return {"question_id": qid, "question_type": qtype, "question": question, "answer": "-", "question_date": date,
            "haystack_session_ids": ids, "haystack_dates": [sessions[i][1] for i in ids],
            "haystack_sessions": [sessions[i][0] for i in ids], "answer_session_ids": answers}  # fmt: skip


def tiny_file(tmp_path: Path) -> Path:
    """Four questions: two about the dog (each one's answer session on the other's theme), one about the garden,
    one abstention; `dog-late` is dated after every question."""
    data = [
        _question("q_dog_breed", "single-session-user", "What breed is my golden retriever puppy Biscuit?",
                  "2023/05/30 (Tue) 20:00", ["filler", "dog-early", "dog-late"], ["dog-early"]),
        _question("q_dog_show", "single-session-user", "Which golden retriever breed did I fall for at the dog show?",
                  "2023/06/30 (Fri) 20:00", ["garden", "dog-show", "filler"], ["dog-show"]),
        _question("q_garden", "single-session-user", "What did I plant in the garden?",
                  "2023/04/02 (Sun) 07:00", ["garden", "filler"], ["garden"]),
        _question("q_abs_abs", "single-session-user", "What is my cat called?",
                  "2023/06/30 (Fri) 20:00", ["filler"], []),
    ]  # fmt: skip
    path = tmp_path / "lme-tiny.json"
    path.write_text(json.dumps(data), "utf-8")
    return path


def test_the_default_protocol_never_offers_a_later_or_another_questions_answer_session(tmp_path, embedder):
    from memclaw.bench.longmemeval import convert_question, load_longmemeval
    from memclaw.bench.one_memory import build_one_memory, filler_sessions, lme_filler, lme_protocol
    from memclaw.bench.run_config import bench_config
    from memclaw.bench.systems import parse_systems

    raw = load_longmemeval(tiny_file(tmp_path))
    filler = lme_filler(raw)
    assert [s.session_id for s in filler.sessions] == ["filler", "garden", "dog-early", "dog-show", "dog-late"]
    sessions, entries = filler_sessions(filler)
    specs = parse_systems("bm25-raw,vector-raw,hybrid")
    mem = build_one_memory(tmp_path / "ws", sessions, entries, lambda i: i, specs, bench_config(), embedder)
    try:
        assert mem.build["archived_turns"] == 10 and set(mem.units_of) == {s.session_id for s in filler.sessions}
        group = {u: g for g, us in mem.units_of.items() for u in us}
        qs = {q.qid: q for q in map(convert_question, raw) if q is not None}
        assert set(qs) == {"q_dog_breed", "q_dog_show", "q_garden"}
        seen: dict[tuple[str, str], set[str]] = {}
        for protocol in ("default", "raw"):
            for q in qs.values():
                as_of, exclude = lme_protocol(mem, filler, q, protocol)
                for spec in specs:
                    ranked, _ms = mem.ask(spec, q.question, 50, now=q.question_date, as_of=as_of, exclude=exclude)
                    seen.setdefault((protocol, q.qid), set()).update(group[r[0]] for r in ranked)
        # default: q_dog_breed (May 30) sees neither the later dog sessions nor the other question's answer
        assert seen[("default", "q_dog_breed")] & {"dog-show", "dog-late"} == set()
        assert "dog-early" in seen[("default", "q_dog_breed")]
        # q_dog_show: dog-early is q_dog_breed's answer session (masked); dog-late is after June 30
        assert seen[("default", "q_dog_show")] & {"dog-early", "dog-late"} == set()
        assert "dog-show" in seen[("default", "q_dog_show")]
        # q_garden is asked at 07:00 and its answer session stamped 08:00 the same day: the day is the unit
        assert "garden" in seen[("default", "q_garden")]
        assert seen[("default", "q_garden")] & {"dog-early", "dog-show", "dog-late"} == set()
        # raw lets both through, for either question
        assert {"dog-show", "dog-late"} <= seen[("raw", "q_dog_breed")]
        assert {"dog-early", "dog-late"} <= seen[("raw", "q_dog_show")]
    finally:
        mem.prep.close()


def test_one_memory_through_the_cli_writes_the_per_question_report_with_its_cost(tmp_path, memclaw_cli):  # noqa: F811
    data = tiny_file(tmp_path)
    for protocol, flags in (("default", ()), ("raw", ("--raw",))):
        out = tmp_path / protocol
        r = memclaw_cli("bench", "longmemeval", "--data", str(data), "--one-memory", *flags, "--sessions", "4",
                        "--workdir", str(tmp_path / "work"), "--out", str(out), "--no-progress")  # fmt: skip
        assert r.code == 0, r.err
        res = json.loads((out / "longmemeval.json").read_text())
        assert res["one_memory"]["protocol"] == protocol and res["n_sessions"] == 4 and res["n_questions"] == 3
        assert set(res["systems"]) == {"bm25-raw", "vector-raw", "hybrid"}
        assert res["systems"]["hybrid"]["recall_any@1024t"] > 0
        cost = res["one_memory"]["cost"]
        assert cost["index_bytes"] > 0 and cost["cold_recall"]["peak_rss_mb"] > 0, cost
        md = (out / "longmemeval.md").read_text()
        assert "## One memory" in md and f"protocol `{protocol}`" in md and "cold `memclaw recall`" in md


@pytest.mark.parametrize(
    "args, says",
    [
        (("longmemeval", "--raw"), "--raw only apply with --one-memory"),
        (("longmemeval", "--sessions", "5"), "--sessions only apply with --one-memory"),
        (("longmemeval", "--questions", "2"), "--questions only apply with --one-memory"),
        (("longmemeval", "--one-memory", "--questions", "0"), "--questions must be at least 1"),
        (("longmemeval", "--one-memory", "--corpus", "history"), "drop --corpus"),
        (("longmemeval", "--one-memory", "--sessions", "0"), "--sessions must be at least 1"),
        (("longmemeval", "--one-memory", "--sessions", "2"), "below the 3 answer sessions"),
        (("longmemeval", "--one-memory", "--systems", "grep"), "drop grep from --systems"),
        (("longmemeval", "--one-memory", "--rankings"), "--rankings is not written by --one-memory"),
        (("locomo", "--one-memory"), "--one-memory needs --filler"),
        (("locomo", "--raw"), "--raw only apply with --one-memory"),
    ],
)
def test_a_bad_one_memory_flag_combination_is_a_usage_error(tmp_path, memclaw_cli, args, says):  # noqa: F811
    data = tiny_file(tmp_path)
    r = memclaw_cli("bench", args[0], "--data", str(data), *args[1:], "--out", str(tmp_path / "o"), "--no-progress")
    assert r.code == 2, (r.code, r.err)
    assert says in " ".join(r.err.split())
    assert not (tmp_path / "o").exists()


def test_the_sessions_cap_keeps_the_asked_answer_sessions_and_samples_the_rest_by_seed(tmp_path):
    from memclaw.bench.longmemeval import load_longmemeval
    from memclaw.bench.one_memory import lme_filler

    raw = load_longmemeval(tiny_file(tmp_path))
    ids = [{s.session_id for s in lme_filler(raw, 3, seed, {"q_garden"}).sessions} for seed in (1, 1, 2, 3, 4, 5)]
    assert ids[0] == ids[1] and all(len(i) == 3 and "garden" in i for i in ids)
    assert len({frozenset(i) for i in ids}) > 1  # the seed picks the filler
    assert {s.session_id for s in lme_filler(raw, 3).sessions} == {"dog-early", "dog-show", "garden"}


def test_cold_recall_reports_the_recall_process_peak_rss_not_the_benchmark_process(tmp_path):
    """A child's peak RSS started at its parent's (the high-water mark survives the fork and exec): a 1.7 GB
    benchmark process reported 1.7 GB for a recall that peaks at about 220 MB."""
    from memclaw.bench.perf_measure import cold_recall

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "MEMORY.md").write_text("# Facts\n\n- The dog is a golden retriever called Biscuit.\n", "utf-8")
    ballast = bytearray(1536 * 2**20)  # the benchmark's own memory: 1.5 GiB, every page touched
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1
    got = cold_recall(ws, tmp_path / "home", "golden retriever", runs=1)
    assert "error" not in got, got
    assert 0 < got["peak_rss_mb"] < 1024 and got["cpu_s"] > 0, got
    del ballast


def test_locomo_among_the_longmemeval_filler_masks_the_other_conversations(tmp_path, memclaw_cli):  # noqa: F811
    from tests.bench.test_bench_locomo import mini_conversation

    one, two = mini_conversation(), mini_conversation()
    two["sample_id"] = "conv-other"
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([one, two]), "utf-8")
    seen = {}
    for protocol, flags in (("default", ()), ("raw", ("--raw",))):
        out = tmp_path / protocol
        r = memclaw_cli("bench", "locomo", "--data", str(data), "--one-memory", *flags, "--filler",
                        str(tiny_file(tmp_path)), "--sessions", "3", "--workdir", str(tmp_path / "work"),
                        "--out", str(out), "--no-progress")  # fmt: skip
        assert r.code == 0, r.err
        res = json.loads((out / "locomo.json").read_text())
        assert res["one_memory"]["protocol"] == protocol and res["one_memory"]["filler_sessions"] == 3
        assert res["units"]["fact"] > 0 and res["units"]["history"] > 0 and res["units"]["archive"] > 6
        seen[protocol] = res["systems"]["hybrid"]["recall@5"]
        assert "## One memory" in (out / "locomo.md").read_text()
    # two identical conversations: unmasked, the other's copy takes top places that cover none of this one's evidence
    assert seen["default"] >= seen["raw"]


def test_the_store_build_reports_its_sync_to_the_progress_it_is_given(tmp_path, embedder):
    """A one-memory store takes hours to index at a year's size: its sync reports to the progress factory, as
    `memclaw memory sync` does, and every vector it embeds is counted once."""
    import contextlib

    from memclaw.bench.locomo import coverage_path
    from memclaw.bench.longmemeval import load_longmemeval
    from memclaw.bench.one_memory import filler_sessions, lme_filler
    from memclaw.bench.prepared import prepare_corpus
    from memclaw.bench.record import write_sessions
    from memclaw.bench.run_config import bench_config
    from memclaw.bench.systems import parse_systems

    sessions, entries = filler_sessions(lme_filler(load_longmemeval(tiny_file(tmp_path))))
    root = tmp_path / "ws"
    write_sessions(root, sorted(sessions, key=lambda s: s.when))
    coverage_path(root).write_text(json.dumps({"corpus": "one-memory", "units": entries}), "utf-8")
    said: list[tuple[str, int, list[int]]] = []

    @contextlib.contextmanager
    def recorder(total: int, what: str):
        said.append((what, total, []))
        yield said[-1][2].append

    prep = prepare_corpus(root, coverage_path(root), parse_systems("hybrid"), bench_config(), embedder,
                          progress=recorder)  # fmt: skip
    try:
        vectors = prep.services[0].store.count("owner")
    finally:
        prep.close()
    embedding = [(total, sum(done)) for what, total, done in said if what.startswith("embedding")]
    assert embedding and all(total == done for total, done in embedding)
    assert sum(total for total, _ in embedding) == vectors > 0


def test_a_bench_run_in_a_log_says_how_far_it_is_in_plain_lines(capsys, monkeypatch):
    import memclaw.util.progress as P
    from memclaw.bench.progress import Progress

    monkeypatch.setattr(P, "SHOW_AFTER_S", 0.0)
    monkeypatch.setattr(P, "LINE_EVERY_S", 0.0)
    with Progress(True) as prog:
        prog.log("LongMemEval one memory (default): 3 sessions")
        advance = prog.task("LongMemEval one memory", 3)
        for _ in range(3):
            advance()
    err = capsys.readouterr().err
    assert "LongMemEval one memory (default): 3 sessions" in err
    assert "LongMemEval one memory: 1/3 steps" in err and "LongMemEval one memory: 2/3 steps" in err
    assert "LongMemEval one memory: 3 steps in" in err
    with Progress(False) as quiet:
        quiet.task("nothing", 2)()
    assert capsys.readouterr().err == ""

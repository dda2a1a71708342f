"""MemoryService.record_consolidation on real parts (real Markdown, the real bundled model, embedded Chroma): one
consolidation, three linked records (archive chunk, facts with their learned-mark, history entry), each step
idempotent by the consolidation id; `memory.archive = false`; secrets masked in the archive."""

from __future__ import annotations

import json
from datetime import date, datetime, time
from pathlib import Path

import pytest

from memclaw.config import Config
from memclaw.markdown.archive import ArchivedTurn, consolidation_id, parse_day
from memclaw.markdown.fact_ops import FactOp
from memclaw.markdown.formats import fact_cid
from memclaw.markdown.units import sender_scope
from memclaw.service.consolidation_record import STEPS, ConsolidationRecord, Step
from memclaw.service.facade import MemoryService
from tests.service.test_memory_service import make_workspace

WHEN = datetime(2026, 11, 25, 14, 2)
CID = consolidation_id("c7f3a9b21d4e5f60")
OUTSIDER = sender_scope("discord:4242")


@pytest.fixture
def svc(tmp_path, embedder):
    ws = make_workspace(tmp_path / "ws")
    s = MemoryService(ws, Config(workspace=ws.root), embedder=embedder)
    yield s
    s.close()


def record(**kw) -> ConsolidationRecord:
    base = dict(
        cid=CID,
        when=WHEN,
        turns=(
            ArchivedTurn("Maya", "Did Lena say which restaurant?", time(14, 2)),
            ArchivedTurn("memclaw", "Taberna da Ribeira, on Rua dos Douradores.", time(14, 3)),
            ArchivedTurn("Maya", "Great. My dentist appointment is tomorrow, remind me.", time(14, 5)),
        ),
        history_entry="Maya asked which restaurant Lena chose: Taberna da Ribeira in Lisbon.",
        fact_ops=(
            FactOp("add", text="Lena's favourite restaurant is Taberna da Ribeira", section="Family"),
            FactOp("add", text="Maya's dentist appointment is tomorrow"),
        ),
    )
    base.update(kw)
    return ConsolidationRecord(**base)


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted((root / "memory").rglob("*.md"))}


def test_one_consolidation_three_linked_records(svc):
    res = svc.record_consolidation("owner", record())
    assert res.written == ["archive", "facts", "history"] and res.skipped == []
    ws = svc.workspace
    day = ws.archive_file("owner", date(2026, 11, 25))
    assert res.archive_file == day
    assert day.read_text("utf-8") == (
        "# 2026-11-25\n\n"
        f"## 14:02 #{CID}\n"
        "- 14:02 **Maya**: Did Lena say which restaurant?\n"
        "- 14:03 **memclaw**: Taberna da Ribeira, on Rua dos Douradores.\n"
        "- 14:05 **Maya**: Great. My dentist appointment is tomorrow, remind me.\n"
    )
    facts = {f.text: f for f in svc.facts()}
    restaurant = f"Lena's favourite restaurant is Taberna da Ribeira (2026-11-25 #{CID})"
    dentist = f"Maya's dentist appointment is tomorrow (2026-11-26) (2026-11-25 #{CID})"  # resolved when written
    assert restaurant in facts and dentist in facts
    assert facts[restaurant].section == "Family" and facts[restaurant].extra["cid"] == CID
    assert facts[dentist].timestamp == datetime(2026, 11, 25)  # learned that day: what recall's date lifts read
    hist = ws.history_file("owner").read_text("utf-8")
    assert hist.endswith(f"\n[2026-11-25 14:02 #{CID}] Maya asked which restaurant Lena chose: Taberna da Ribeira "
                         "in Lisbon.\n")  # fmt: skip
    # all three carry the id and are in the index (the reader links them by it)
    entry = svc.recall("which restaurant did Lena choose", kind="history", k=1)[0].unit
    assert entry.extra["cid"] == CID and entry.timestamp == WHEN
    assert svc.recall("when is the dentist", kind="fact", k=1)[0].unit.text == dentist


def test_repeating_a_record_writes_nothing_twice(svc):
    rec = record(fact_ops=(*record().fact_ops, FactOp("delete", id=svc.facts()[2].id)))
    first = svc.record_consolidation("owner", rec)
    assert first.written == ["archive", "facts", "history"]
    after = files(svc.workspace.root)
    again = svc.record_consolidation("owner", rec)  # e.g. the consolidation retried after a crash
    assert again.written == [] and again.skipped == ["archive", "facts", "history"]
    assert files(svc.workspace.root) == after
    # step by step, as the consolidator does it, each step alone is idempotent too
    for step in ("archive", "facts", "history"):
        assert svc.record_consolidation("owner", rec, steps=(step,)).skipped == [step]
    assert files(svc.workspace.root) == after


def test_a_crash_after_some_steps_is_finished_without_duplicates(svc):
    rec = record()
    svc.record_consolidation("owner", rec, steps=("archive", "facts"), sync=False)  # then killed
    res = svc.record_consolidation("owner", rec)  # the retry runs every step
    assert res.written == ["history"] and res.skipped == ["archive", "facts"]
    ws = svc.workspace
    assert len(parse_day(ws.archive_file("owner", WHEN.date()).read_text("utf-8")).chunks) == 1
    assert sum(fact_cid(f.text) == CID for f in svc.facts()) == 2
    assert ws.history_file("owner").read_text("utf-8").count(f"#{CID}]") == 1
    assert {u.id for u in svc.scopes.parse("owner")} == set(svc.store.ids("owner"))  # the index caught up


def test_facts_already_known_are_not_added_again_and_gone_ids_are_dropped(svc):
    svc.add_fact("Prefers the window seat", learned=date(2026, 11, 1))
    lilas = next(f for f in svc.facts() if "Rue des Lilas" in f.text)
    rec = record(
        fact_ops=(
            FactOp("add", text="Prefers the window seat"),  # known since 2026-11-01: not added again
            FactOp("update", id=lilas.id, text="Lives at 3 Rua Augusta, Lisbon"),
            FactOp("delete", id="f000000000000"),  # gone already
        )
    )
    res = svc.record_consolidation("owner", rec)
    texts = [f.text for f in svc.facts()]
    assert texts.count("Prefers the window seat (2026-11-01)") == 1 and not any("seat (2026-11-25" in t for t in texts)
    assert f"Lives at 3 Rua Augusta, Lisbon (2026-11-25 #{CID})" in texts and lilas.text not in texts
    assert res.facts is not None and list(res.facts.updated) == [lilas.id]


def test_an_update_that_copies_the_old_mark_gets_the_new_one(svc):
    first = record()
    svc.record_consolidation("owner", first)
    old = next(f for f in svc.facts() if "Taberna" in f.text)
    cid2 = consolidation_id("0123456789abcdef")
    rec = record(
        cid=cid2,
        when=datetime(2026, 12, 2, 10, 0),
        history_entry="",
        fact_ops=(FactOp("update", id=old.id, text=old.text.replace("Taberna da Ribeira", "Cervejaria Ramiro")),),
    )
    svc.record_consolidation("owner", rec)
    assert f"Lena's favourite restaurant is Cervejaria Ramiro (2026-12-02 #{cid2})" in [f.text for f in svc.facts()]


def test_secrets_are_masked_in_the_archive(svc):
    key = "sk-proj-" + "Zq3xT9bK2mW7vR4nY8pL1sD6fG0hJ5aC"
    rec = record(
        turns=(
            ArchivedTurn("Maya", f"Here is my OpenAI key {key} and my password is hunter2", time(14, 2)),
            ArchivedTurn("memclaw", "I will not store those.", time(14, 3)),
        )
    )
    svc.record_consolidation("owner", rec)
    text = svc.workspace.archive_file("owner", WHEN.date()).read_text("utf-8")
    assert key not in text and "hunter2" not in text
    assert "- 14:02 **Maya**: Here is my OpenAI key *** and my password is ***\n" in text


def test_archive_off_writes_facts_and_history_only(tmp_path, embedder):
    ws = make_workspace(tmp_path / "ws")
    cfg = Config(workspace=ws.root)
    cfg.memory.archive = False
    svc = MemoryService(ws, cfg, embedder=embedder)
    res = svc.record_consolidation("owner", record())
    assert res.written == ["facts", "history"] and res.skipped == ["archive"]
    assert not ws.archive_dir("owner").exists()
    assert any(f"#{CID})" in f.text for f in svc.facts())
    svc.close()


def test_an_outsiders_record_stays_in_their_scope(svc):
    svc.record_consolidation(OUTSIDER, record(history_entry="Mallory asked about a restaurant."))
    ws = svc.workspace
    assert ws.archive_file(OUTSIDER, WHEN.date()).is_file()
    assert str(ws.archive_file(OUTSIDER, WHEN.date()).relative_to(ws.root)).startswith("memory/people/")
    assert not ws.archive_dir("owner").exists()
    assert "Taberna" not in ws.memory_file("owner").read_text("utf-8")


def test_bulk_writes_without_sync_then_one_sync(svc):
    for n in range(5):
        rec = record(cid=consolidation_id(f"{n:08x}00000000"), when=datetime(2026, 11, 20 + n, 9, 0), fact_ops=())
        assert svc.record_consolidation("owner", rec, sync=False).written == ["archive", "history"]
    assert len(svc.workspace.archive_files("owner")) == 5
    assert not svc.is_fresh("owner")  # the caller syncs once
    svc.sync(["owner"])
    assert svc.is_fresh("owner")


def test_unknown_steps_are_refused(svc):
    with pytest.raises(ValueError, match="unknown consolidation step 'summary'"):
        svc.record_consolidation("owner", record(), steps=("summary",))


@pytest.mark.parametrize(
    ("model_text", "written"),
    [
        ("Dentist on 2026-12-01", f"Dentist on 2026-12-01 (2026-11-25 #{CID})"),
        ("Dentist (2026-12-01)", f"Dentist (2026-12-01) (2026-11-25 #{CID})"),  # the model's own date stays
        ("Dentist (2026-11-25)", f"Dentist (2026-11-25 #{CID})"),  # the learned day said twice
        ("Dentist (2026-11-02 #c0123abcd)", f"Dentist (2026-11-25 #{CID})"),  # a mark copied from the facts shown
        ("Dentist tomorrow", f"Dentist tomorrow (2026-11-26) (2026-11-25 #{CID})"),
    ],
)
def test_the_learned_mark_of_a_consolidation_fact(svc, model_text, written):
    svc.record_consolidation("owner", record(fact_ops=(FactOp("add", text=model_text),)), steps=("facts",))
    assert written in [f.text for f in svc.facts()]


def test_the_steps_run_in_their_table_order_whatever_order_they_are_asked_in(svc):
    res = svc.record_consolidation("owner", record(), steps=("history", "archive"))
    assert res.written == [Step.ARCHIVE, Step.HISTORY] and res.skipped == []
    assert all(fact_cid(f.text) != CID for f in svc.facts())


def test_a_step_is_spelled_as_a_session_notes_it_done():
    """A session's progress keeps `<scope>#<step>` strings in its JSON meta: a step's spelling is an on-disk format."""
    assert [f"owner#{s}" for s in STEPS] == ["owner#archive", "owner#facts", "owner#history"]
    assert json.loads(json.dumps([f"owner#{Step.FACTS}", Step.HISTORY])) == ["owner#facts", "history"]

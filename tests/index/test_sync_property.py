"""Property (issue 2): after any sequence of hand edits of MEMORY.md, HISTORY.md and the archive's day files (adding,
editing, moving and deleting units, long history entries and turns that become several passages, chunks appended
to a day file, days and files deleted) and a sync, the index holds
exactly the Markdown's units, ids and texts, in both stores: the Chroma collection (one vector per passage) and
the BM25 index (in memory and on disk). Real files, the real bundled model, real Chroma (embedded and server).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from datetime import date, datetime, time, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule, run_state_machine_as_test

import memclaw.index._scope_state as scope_state
from memclaw.config import Config
from memclaw.index._bm25 import InvertedBM25
from memclaw.index.passages import split_passages, unit_of, unit_vectors
from memclaw.index.scopes import index_text
from memclaw.markdown.archive import ArchiveChunk, ArchiveDay, ArchivedTurn, append_chunk, render_day
from memclaw.markdown.units import OWNER_SCOPE, sender_scope
from memclaw.service.facade import MemoryService
from memclaw.workspace import Workspace

# A small vocabulary, so that identical texts (occurrence-numbered ids) and shared BM25 terms are common.
VOCAB = [
    *("tea", "Porto", "sister", "cello", "garden", "Lena", "Henrik", "bike", "train", "Lyon", "basil", "oolong"),
    *("the", "of", "and", "blue", "green", "order", "teapot", "flight", "April", "Sunday", "music", "battery"),
    "engineer",
]
PROBES = sorted({w.lower() for w in VOCAB} | {"tea oolong", "sister Lena Porto", "garden basil"})

short_text = st.lists(st.sampled_from(VOCAB), min_size=1, max_size=6).map(" ".join)
sentence = st.lists(st.sampled_from(VOCAB), min_size=11, max_size=13).map(lambda ws: " ".join(ws) + ".")
# 66+ words over several lines or sentences: two passages or more (memclaw.index.passages.MAX_WORDS = 60). Kept near
# the limit: embedding long passages is most of this test's time.
long_text = st.tuples(st.lists(sentence, min_size=6, max_size=7), st.sampled_from([" ", "\n"])).map(
    lambda p: p[1].join(p[0])
)
history_text = st.one_of(short_text, short_text, short_text, long_text)
DAYS = (date(2026, 11, 24), date(2026, 11, 25))
turn_text = st.one_of(short_text, short_text, short_text, long_text)
stamp = st.integers(0, 60 * 24 * 30).map(lambda m: datetime(2026, 1, 1) + timedelta(minutes=m))
SCOPES = (OWNER_SCOPE, sender_scope("discord:1/../2"))
scope_st = st.sampled_from(SCOPES)


class SyncMachine(RuleBasedStateMachine):
    """Model: per scope, MEMORY.md as a list of headings and bullets, HISTORY.md as a list of (stamp, text).
    Every edit rewrites or appends to the real file as an editor would; `sync` checks both stores."""

    embedder = None  # set by the test function
    chroma_url: str | None = None

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="memclaw-sync-prop-"))
        self.ws = Workspace(self.tmp / "ws")
        self.ws.memory_root.mkdir(parents=True)
        cfg = Config(workspace=self.ws.root)
        cfg.memory.chroma_url = self.chroma_url
        self.svc = MemoryService(self.ws, cfg, embedder=self.embedder)
        # per scope: memory lines ("h", text) | ("b", text, nested); history entries (stamp, text)
        self.mem: dict[str, list[tuple]] = {s: [] for s in SCOPES}
        self.hist: dict[str, list[tuple[datetime, str]]] = {s: [] for s in SCOPES}
        # per scope and day: the archive's chunks (consolidation id, hour, turn texts)
        self.arch: dict[str, dict[date, list[tuple[str, int, list[str]]]]] = {s: {} for s in SCOPES}
        self.n_chunks = 0
        self.write_mode = 0

    @initialize(seed=st.lists(short_text, max_size=3), hist=st.lists(st.tuples(stamp, history_text), max_size=2))
    def start(self, seed, hist):
        self.mem[OWNER_SCOPE] = [("h", "About me")] + [("b", t, False) for t in seed]
        self.hist[OWNER_SCOPE] = list(hist)
        self._write_memory(OWNER_SCOPE)
        self._write_history(OWNER_SCOPE)

    # ----- writing the files as a user would ----------------------------------------------------------------
    def _write(self, path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.write_mode += 1
        if self.write_mode % 2:  # in place (same inode), like most editors' "save"
            path.write_text(text, "utf-8")
        else:  # a new file renamed over the old one, like vim's backupcopy=no or `sed -i`
            tmp = path.with_name(path.name + ".swp")
            tmp.write_text(text, "utf-8")
            os.replace(tmp, path)

    def _memory_text(self, scope: str) -> str:
        out = []
        for item in self.mem[scope]:
            if item[0] == "h":
                out += ["", f"# {item[1]}", ""]
            else:
                out.append(("  - " if item[2] else "- ") + item[1])
        return "\n".join(out).lstrip("\n") + "\n"

    def _history_text(self, scope: str) -> str:
        return "\n\n".join(f"[{ts:%Y-%m-%d %H:%M}] {t}" for ts, t in self.hist[scope]) + "\n"

    def _write_memory(self, scope: str) -> None:
        self._write(self.ws.memory_file(scope), self._memory_text(scope))

    def _write_history(self, scope: str) -> None:
        self._write(self.ws.history_file(scope), self._history_text(scope))

    def _bullets(self, scope: str) -> list[int]:
        return [i for i, item in enumerate(self.mem[scope]) if item[0] == "b"]

    # ----- MEMORY.md ------------------------------------------------------------------------------------------
    @rule(scope=scope_st, text=short_text, nested=st.booleans(), where=st.integers(0, 100))
    def add_fact(self, scope, text, nested, where):
        lines = self.mem[scope]
        pos = where % (len(lines) + 1)
        nested = nested and pos > 0 and lines[pos - 1][0] == "b"
        lines.insert(pos, ("b", text, nested))
        self._write_memory(scope)

    @rule(scope=scope_st, text=short_text)
    def append_fact(self, scope, text):
        """`echo "- text" >> MEMORY.md`: a true append."""
        path = self.ws.memory_file(scope)
        if not path.exists():
            self._write_memory(scope)
        self.mem[scope].append(("b", text, False))
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"- {text}\n")

    @rule(scope=scope_st, text=short_text)
    def add_heading(self, scope, text):
        self.mem[scope].append(("h", text))
        self._write_memory(scope)

    @precondition(lambda self: any(self._bullets(s) for s in SCOPES))
    @rule(scope=scope_st, pick=st.integers(0, 100), text=short_text)
    def edit_fact(self, scope, pick, text):
        b = self._bullets(scope)
        if not b:
            return
        i = b[pick % len(b)]
        self.mem[scope][i] = ("b", text, self.mem[scope][i][2])
        self._write_memory(scope)

    @precondition(lambda self: any(self._bullets(s) for s in SCOPES))
    @rule(scope=scope_st, pick=st.integers(0, 100))
    def duplicate_fact(self, scope, pick):
        """The same text twice in one file: the copies get occurrence-numbered ids."""
        b = self._bullets(scope)
        if not b:
            return
        self.mem[scope].append(("b", self.mem[scope][b[pick % len(b)]][1], False))
        self._write_memory(scope)

    @precondition(lambda self: any(self._bullets(s) for s in SCOPES))
    @rule(scope=scope_st, pick=st.integers(0, 100), to=st.integers(0, 100))
    def move_fact(self, scope, pick, to):
        """Same text elsewhere, maybe under another heading (same id, new section: re-embedded in place)."""
        b = self._bullets(scope)
        if not b:
            return
        item = self.mem[scope].pop(b[pick % len(b)])
        self.mem[scope].insert(to % (len(self.mem[scope]) + 1), ("b", item[1], False))
        self._write_memory(scope)

    @precondition(lambda self: any(self._bullets(s) for s in SCOPES))
    @rule(scope=scope_st, pick=st.integers(0, 100))
    def delete_fact(self, scope, pick):
        b = self._bullets(scope)
        if not b:
            return
        del self.mem[scope][b[pick % len(b)]]
        self._write_memory(scope)

    # ----- HISTORY.md -----------------------------------------------------------------------------------------
    @rule(scope=scope_st, ts=stamp, text=history_text)
    def add_history(self, scope, ts, text):
        self.hist[scope].append((ts, text))
        self._write_history(scope)

    @precondition(lambda self: any(self.hist[s] for s in SCOPES))
    @rule(scope=scope_st, pick=st.integers(0, 100), text=history_text)
    def edit_history_text(self, scope, pick, text):
        h = self.hist[scope]
        if h:
            i = pick % len(h)
            h[i] = (h[i][0], text)
            self._write_history(scope)

    @precondition(lambda self: any(self.hist[s] for s in SCOPES))
    @rule(scope=scope_st, pick=st.integers(0, 100), ts=stamp)
    def edit_history_stamp(self, scope, pick, ts):
        """Same text, new date: same unit id, new content hash."""
        h = self.hist[scope]
        if h:
            i = pick % len(h)
            h[i] = (ts, h[i][1])
            self._write_history(scope)

    @precondition(lambda self: any(self.hist[s] for s in SCOPES))
    @rule(scope=scope_st, pick=st.integers(0, 100))
    def rewrap_history(self, scope, pick):
        """Same words, other line breaks: same id; a long entry may split into other passages."""
        h = self.hist[scope]
        if h:
            i = pick % len(h)
            ts, t = h[i]
            h[i] = (ts, t.replace("\n", " ") if "\n" in t else t.replace(". ", ".\n"))
            self._write_history(scope)

    @precondition(lambda self: any(self.hist[s] for s in SCOPES))
    @rule(scope=scope_st, pick=st.integers(0, 100))
    def delete_history(self, scope, pick):
        h = self.hist[scope]
        if h:
            del h[pick % len(h)]
            self._write_history(scope)

    # ----- the archive ------------------------------------------------------------------------------------------
    def _chunk(self, cid: str, hour: int, said: list[str]) -> ArchiveChunk:
        turns = tuple(ArchivedTurn(("Maya", "memclaw")[i % 2], t, time(hour, i)) for i, t in enumerate(said))
        return ArchiveChunk(cid, datetime(2026, 1, 1, hour, 0), turns)

    def _write_day(self, scope: str, day: date) -> None:
        chunks = [self._chunk(*c) for c in self.arch[scope][day]]
        self._write(self.ws.archive_file(scope, day), render_day(ArchiveDay(day, chunks)))

    def _chunks(self, scope: str) -> list[tuple[date, int]]:
        return [(d, i) for d in sorted(self.arch[scope]) for i in range(len(self.arch[scope][d]))]

    @rule(scope=scope_st, day=st.sampled_from(DAYS), said=st.lists(turn_text, min_size=1, max_size=4),
          repeat=st.booleans())  # fmt: skip
    def append_chunk(self, scope, day, said, repeat):
        """Consolidation's write: a chunk appended to the day file (a new file for a new day). `repeat`: a chunk id
        already in the file (copied by hand: occurrence-numbered ids)."""
        chunks = self.arch[scope].setdefault(day, [])
        if repeat and chunks:
            cid = chunks[0][0]
            chunks.append((cid, 20, said))
            self._write_day(scope, day)
            return
        self.n_chunks += 1
        cid = f"c{self.n_chunks:08x}"
        chunks.append((cid, 8 + len(chunks), said))
        path = self.ws.archive_file(scope, day)
        path.parent.mkdir(parents=True, exist_ok=True)
        before = path.read_text("utf-8") if path.exists() else ""
        after = append_chunk(before, self._chunk(*chunks[-1]))
        with open(path, "a", encoding="utf-8") as f:  # a true append
            f.write(after[len(before) :])

    @precondition(lambda self: any(self._chunks(s) for s in SCOPES))
    @rule(scope=scope_st, pick=st.integers(0, 100), turn=st.integers(0, 3), text=turn_text)
    def edit_turn(self, scope, pick, turn, text):
        """A hand edit of one turn: same id, re-embedded alone."""
        chunks = self._chunks(scope)
        if chunks:
            day, i = chunks[pick % len(chunks)]
            said = self.arch[scope][day][i][2]
            said[turn % len(said)] = text
            self._write_day(scope, day)

    @precondition(lambda self: any(self._chunks(s) for s in SCOPES))
    @rule(scope=scope_st, pick=st.integers(0, 100))
    def delete_chunk(self, scope, pick):
        chunks = self._chunks(scope)
        if chunks:
            day, i = chunks[pick % len(chunks)]
            del self.arch[scope][day][i]
            self._write_day(scope, day)

    @precondition(lambda self: any(self.arch[s] for s in SCOPES))
    @rule(scope=scope_st, day=st.sampled_from(DAYS))
    def delete_day(self, scope, day):
        if self.arch[scope].pop(day, None) is not None:
            self.ws.archive_file(scope, day).unlink()

    # ----- whole files --------------------------------------------------------------------------------------
    @rule(scope=scope_st, which=st.sampled_from(["memory", "history", "folder"]))
    def delete_file(self, scope, which):
        if which in ("memory", "folder"):
            self.mem[scope] = []
            self.ws.memory_file(scope).unlink(missing_ok=True)
        if which in ("history", "folder"):
            self.hist[scope] = []
            self.ws.history_file(scope).unlink(missing_ok=True)
        if which == "folder" and scope != OWNER_SCOPE:
            self.arch[scope] = {}
            shutil.rmtree(self.ws.memory_dir(scope), ignore_errors=True)

    # ----- sync and the property ------------------------------------------------------------------------------
    @rule()
    def sync_all(self):
        self.svc.sync()
        self.check(SCOPES)

    @rule(scope=scope_st)
    def sync_scope(self, scope):
        self.svc.sync([scope])
        self.check([scope])

    @rule(scope=scope_st)
    def sync_by_recall(self, scope):
        """Recall auto-syncs a scope whose files changed."""
        self.svc.recall("tea garden sister", scope=scope, k=3)
        self.check([scope])

    @rule(scope=scope_st)
    def sync_in_another_service(self, scope):
        """Another process (e.g. the CLI) syncs; this service must pick up its state, not redo or undo it."""
        other = MemoryService(self.ws, self.svc.config, embedder=self.embedder)
        try:
            other.sync([scope])
        finally:
            other.close()
        self.svc.ensure_fresh(scope)
        self.check([scope])

    def check(self, scopes) -> None:
        for scope in scopes:
            units = self.svc.parse_scope(scope)
            # The test's own model and the parser agree (so the property below is about the files we wrote).
            assert [u.text for u in units if u.kind == "fact"] == [x[1] for x in self.mem[scope] if x[0] == "b"]
            assert [(u.timestamp, u.text) for u in units if u.kind == "history"] == [
                (ts, t) for ts, t in self.hist[scope]
            ]
            want_turns = [(c[0], t) for d in sorted(self.arch[scope]) for c in self.arch[scope][d] for t in c[2]]
            got_turns = [(u.extra["cid"], u.text.split(": ", 1)[1]) for u in units if u.kind == "archive"]
            assert got_turns == want_turns
            want = {u.id: u.text for u in units}
            assert len(want) == len(units), "unit ids must be unique within a scope"

            # Chroma: exactly the passages of exactly these units, with their texts.
            stored = self.svc.store.texts(scope)
            want_passages = {}
            for u in units:
                want_passages.update(unit_vectors(u.id, index_text(u)))
            assert {unit_of(p) for p in stored} == set(want)
            assert stored == want_passages

            # BM25: the live index and the saved one hold exactly these units, scored as a fresh index would.
            sc = self.svc.scopes.get(scope)
            if sc is None:  # never indexed: only possible for a scope that never had a file
                assert not want and not stored
                continue
            assert set(sc.state.units) == set(want)
            assert {i: u.text for i, u in sc.state.units.items()} == want
            # The saved state (snapshot + log, memclaw.index._scope_state) reads back as exactly the live one.
            loaded = scope_state.load(self.svc.layout.state_file(scope))
            assert loaded is not None and loaded.lexical is not None
            st = loaded.state
            assert [st.units.unit(r) for r in range(len(st.units))] == [
                sc.state.units.unit(r) for r in range(len(sc.state.units))
            ]
            assert st.units.hashes() == sc.state.units.hashes()
            assert (st.links, st.marks, st.signatures, st.pending) == (
                sc.state.links,
                sc.state.marks,
                sc.state.signatures,
                sc.state.pending,
            )
            saved = loaded.lexical
            ref = InvertedBM25()
            for u in units:
                ref.add(u.id, self.svc.tokenizer.tokenize(u.text))
            for lex in (sc.lexical, saved):
                assert lex.ids() == set(want)
                for q in PROBES:
                    toks = self.svc.tokenizer.tokenize(q)
                    got = [(i, round(s, 6)) for i, s in lex.search(toks, 100)]
                    exp = [(i, round(s, 6)) for i, s in ref.search(toks, 100)]
                    assert got == exp, q
            assert self.svc.is_fresh(scope)

    def teardown(self) -> None:
        try:
            self.svc.sync()
            self.check(SCOPES)
        finally:
            self.svc.close()
            if self.chroma_url is None:
                from memclaw.store.clients import release_embedded

                self.svc._store = None
                release_embedded(self.svc.layout.chroma_dir)
            shutil.rmtree(self.tmp, ignore_errors=True)


def test_index_holds_exactly_the_markdown_units(store_backend, embedder, request):
    machine = type(f"SyncMachine_{store_backend}", (SyncMachine,), {})
    machine.embedder = embedder
    machine.chroma_url = request.getfixturevalue("chroma_server").url if store_backend == "server" else None
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=15,
            stateful_step_count=10,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            print_blob=True,
        ),
    )


@pytest.mark.parametrize("n_sentences", [6, 7])
def test_long_entries_do_split(n_sentences):
    """The long-entry strategy really produces multi-passage units (else the property would not cover them)."""
    text = "\n".join(" ".join(["tea"] * 11) + "." for _ in range(n_sentences))
    assert len(split_passages(text)) >= 2

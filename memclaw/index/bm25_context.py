"""A short archived turn's second BM25 score, over its words and those of the turns beside it.

A short turn says little alone: "They were stoked!" answers a question whose words it never says.
Its vector is blended with its context's (memclaw.index.passages); this does the same for its words.
A short archived turn with a context gets a second score, over a context document.
That document holds its own words twice and those of its short neighbours once.
The context documents are scored as a collection of their own, where every other unit is its own document.
So the idf counts the context documents that hold a term, and lengths are normalised by their mean.
Recall takes the better of a turn's own score and `recall.bm25_context_weight` times its context score.
So a turn found by its neighbours' words ranks below one that says them, and no own score is lowered.
The context documents are not stored: their term frequencies are sums over the BM25 index's postings.
`TurnContexts` maps the index's slots once per synced scope state, and is saved with it (memclaw.index._scope_state).
A cold start reads it back instead of building it: 0.4 s of CPU at 100k turns.
Why: docs/decisions/0009-bm25-context-as-a-second-score.md.
"""

from __future__ import annotations

import hashlib
import json
import struct
import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from memclaw.index._bm25 import lucene_idf, top_k
from memclaw.index.passages import context_rows_all
from memclaw.markdown.archive import speaker_is

if TYPE_CHECKING:
    from memclaw.index._bm25 import InvertedBM25
    from memclaw.index.unittable import UnitTable

_NONE = -1
KEPT_SCORES = 2_000_000
"""How many (document, score) pairs of recent terms a scope's TurnContexts keeps between queries (32 MB)."""


def _or_none(slot: int | None) -> int:
    return _NONE if slot is None else slot


class TurnContexts:
    """The context documents of a scope's short archived turns, over one BM25 index's slots.

    For each slot: whether it is such a turn, and each context document's length.
    `as_before` and `as_after` give the slot of the turn whose context takes it as the turn before or after.
    Valid while the index's slots do not change (`fits(lexical)`).
    """

    def __init__(self, table: UnitTable, lexical: InvertedBM25, agent: str = "") -> None:
        n = lexical.n_slots
        ids = table.ids
        # row -> slot
        slot = np.fromiter((_or_none(lexical.slot_of(i)) for i in ids), np.int64, len(ids))
        before, after = context_rows_all(table)
        # Left out: units the index lacks (between a crash and the next sync), and the agent's own turns, which give
        # no words to the owner's turns beside them and take none (recall weighs them down: their words must not
        # come back at full weight through the owner's reply).
        missing = slot < 0
        near = np.flatnonzero((before >= 0) | (after >= 0))
        is_agent, extras, extra_ix = speaker_is(agent), table.columns["extras"], table.columns["extra_ix"]
        speakers = (next((v for k, v in extras[extra_ix[r]] if k == "speaker"), "") for r in near.tolist())
        missing[near[np.fromiter(map(is_agent, speakers), np.bool_, len(near))]] = True
        before[missing[np.maximum(before, 0)] & (before >= 0)] = _NONE
        after[missing[np.maximum(after, 0)] & (after >= 0)] = _NONE
        rows = np.flatnonzero(((before >= 0) | (after >= 0)) & ~missing)
        has_context = np.zeros(n, np.bool_)
        has_context[slot[rows]] = True
        own = lexical.doc_lengths()
        lengths = own.copy()
        lengths[slot[rows]] = 2 * own[slot[rows]]
        # slot -> the slot whose context takes it as the turn before
        as_before = np.full(n, _NONE, np.int64)
        as_after = np.full(n, _NONE, np.int64)
        for side, as_side in ((before, as_before), (after, as_after)):
            r = rows[side[rows] >= 0]
            as_side[slot[side[r]]] = slot[r]
            lengths[slot[r]] += own[slot[side[r]]]
        self._set(len(lexical), has_context, lengths, as_before, as_after)

    def _set(self, n_docs: int, has_context: np.ndarray, lengths: np.ndarray, as_before: np.ndarray,
             as_after: np.ndarray) -> None:  # fmt: skip
        self.n_slots = len(lengths)
        self.n_docs = n_docs
        self.has_context, self.lengths, self.as_before, self.as_after = has_context, lengths, as_before, as_after
        self.avgdl = float(self.lengths.sum() / self.n_docs) if self.n_docs else 0.0
        # k1 (1 - b + b dl / avgdl), per slot (the index's k1, b)
        self._norm: np.ndarray | None = None
        # scratch, zero between searches (made with _norm)
        self._tf = self._score = self._pos = np.zeros(0)
        self._lock = threading.Lock()
        self._terms: OrderedDict[str, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._kept = 0

    def to_bytes(self, key: str, lexical: InvertedBM25) -> bytes:
        """The arrays for the index state (memclaw.index._scope_state), with `key`, what they were built for, and a
        digest of `lexical`'s slots, the index they were built over."""
        slots = _slots_digest(lexical)
        head = json.dumps({"key": key, "n_slots": self.n_slots, "n_docs": self.n_docs, "slots": slots}).encode()
        arrays = [self.as_before.astype("<i8"), self.as_after.astype("<i8"), self.lengths.astype("<f8"),
                  self.has_context.astype(np.uint8)]  # fmt: skip
        return b"".join([struct.pack("<Q", len(head)), head, *(a.tobytes() for a in arrays)])

    @classmethod
    def from_bytes(cls, data: bytes, key: str, lexical: InvertedBM25) -> TurnContexts | None:
        """What `to_bytes` wrote, if it was written for `key` and fits `lexical`; None otherwise (build it anew).
        Raises ValueError if the bytes are not such arrays."""
        if len(data) < 8:
            raise ValueError("no header")
        (n_head,) = struct.unpack_from("<Q", data, 0)
        head = json.loads(data[8 : 8 + n_head])
        if not (isinstance(head, dict) and type(head.get("n_slots")) is int and type(head.get("n_docs")) is int):
            raise ValueError("unexpected header")
        n, off = head["n_slots"], 8 + n_head
        if head.get("key") != key or n != lexical.n_slots or head["n_docs"] != len(lexical):
            return None
        # the slots numbered as when they were built (a reader replays the log as the writer did)
        if head.get("slots") != _slots_digest(lexical):
            return None
        if len(data) != off + 25 * n:
            raise ValueError("the arrays do not match the slots")
        as_before = np.frombuffer(data, "<i8", n, off).astype(np.int64)
        as_after = np.frombuffer(data, "<i8", n, off + 8 * n).astype(np.int64)
        lengths = np.frombuffer(data, "<f8", n, off + 16 * n).astype(np.float64)
        flags = np.frombuffer(data, np.uint8, n, off + 24 * n)
        if n and (min(as_before.min(), as_after.min()) < _NONE or max(as_before.max(), as_after.max()) >= n):
            raise ValueError("a slot out of range")
        if (flags > 1).any() or not np.isfinite(lengths).all() or (lengths < 0).any():
            raise ValueError("unexpected values")
        out = cls.__new__(cls)
        out._set(head["n_docs"], flags.astype(np.bool_), lengths, as_before, as_after)
        return out

    def fits(self, lexical: InvertedBM25) -> bool:
        return lexical.n_slots == self.n_slots and len(lexical) == self.n_docs

    def search(self, lexical: InvertedBM25, query_tokens: Sequence[str], k: int) -> list[tuple[str, float]]:
        """Up to k (turn id, context score), best first (ties by id), for the short turns that have a context. A
        query costs O(the postings of its terms), not O(the scope); each term's scores are kept for the next query
        (up to KEPT_SCORES scores, for this state of the scope)."""
        if k <= 0 or not query_tokens or self.avgdl <= 0:
            return []
        with self._lock:
            if self._norm is None:
                self._norm = lexical.k1 * (1 - lexical.b + lexical.b * self.lengths / self.avgdl)
                self._tf, self._score, self._pos = (np.zeros(self.n_slots), np.zeros(self.n_slots),
                                                    np.zeros(self.n_slots, np.int64))  # fmt: skip
            found = []
            for term, qtf in Counter(query_tokens).items():
                docs, part = self._term(lexical, term)
                if len(docs):
                    self._score[docs] += qtf * part
                    found.append(docs)
            if not found:
                return []
            docs = _once(np.concatenate(found), self._pos)
            values = self._score[docs]
            self._score[docs] = 0.0
        return top_k(_Ids(lexical.slot_ids(), docs), values, k)

    def _term(self, lexical: InvertedBM25, term: str) -> tuple[np.ndarray, np.ndarray]:
        """The context documents that hold `term`, and the term's BM25 part of their scores (kept, LRU)."""
        kept = self._terms.get(term)
        if kept is not None:
            self._terms.move_to_end(term)
            return kept
        live = lexical.postings(term)
        if live is None:
            docs, part = np.zeros(0, np.int64), np.zeros(0)
        else:
            slots, tfs = live
            tfs = tfs.astype(np.float64)
            before, after = self.as_before[slots], self.as_after[slots]
            b, a = before != _NONE, after != _NONE
            tf_of = self._tf
            # within one statement the indices are distinct: a turn is one turn's before
            tf_of[slots] += 2 * tfs
            tf_of[before[b]] += tfs[b]
            tf_of[after[a]] += tfs[a]
            docs = _once(np.concatenate([slots, before[b], after[a]]), self._pos)
            tf = tf_of[docs]
            tf_of[docs] = 0.0
            # the documents of this collection that hold the term
            idf = lucene_idf(self.n_docs, len(docs))
            keep = self.has_context[docs]
            docs, tf = docs[keep], tf[keep]
            k1 = lexical.k1
            part = idf * (tf * (k1 + 1) / (tf + self._norm[docs]))  # type: ignore[index]
        self._terms[term] = (docs, part)
        self._kept += len(docs)
        while self._kept > KEPT_SCORES and len(self._terms) > 1:
            self._kept -= len(self._terms.popitem(last=False)[1][0])
        return docs, part


def _slots_digest(lexical: InvertedBM25) -> str:
    """Which document each slot of the index holds (5 ms at 100k memories)."""
    ids = "\x00".join(i if i is not None else "\x01" for i in lexical.slot_ids())
    return hashlib.sha1(ids.encode("utf-8", "surrogatepass")).hexdigest()


def contexts_key(agent: str, state: str) -> str:
    """What saved turn contexts were built for: the agent whose turns they leave out, and the state's digest."""
    return json.dumps([agent, state])


class _Ids:
    """The ids of some slots, by position (what top_k reads)."""

    def __init__(self, ids: list[str | None], slots: np.ndarray) -> None:
        self.ids, self.slots = ids, slots

    def __getitem__(self, i: int) -> str | None:
        return self.ids[self.slots[i]]


def _once(slots: np.ndarray, scratch: np.ndarray) -> np.ndarray:
    """Each slot once (first seen order not kept); `scratch` is any int64 array as long as the index's slots."""
    order = np.arange(len(slots))
    scratch[slots] = order
    # whichever write won, exactly one position per slot matches it
    return slots[scratch[slots] == order]


def with_context(own: list[tuple[str, float]], context: list[tuple[str, float]], weight: float,
                 k: int) -> tuple[list[tuple[str, float]], set[str]]:  # fmt: skip
    """BM25 hits with context: a turn's score is the better of its own and `weight` times its context's; the best k,
    and the ids whose score is their context's."""
    best = dict(own)
    from_context: set[str] = set()
    for i, s in context:
        if weight * s > best.get(i, 0.0):
            best[i] = weight * s
            from_context.add(i)
    hits = sorted(best.items(), key=lambda h: (-h[1], h[0]))[:k]
    kept = {i for i, _s in hits}
    return hits, from_context & kept

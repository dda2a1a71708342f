"""The BM25 index of one scope: the score, the inverted index that computes it, and its on-disk form.

A document's score sums one term per query token t, repeats included:
`idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * |d| / avgdl))`, where `idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))`.
This idf is Lucene's: it is positive for every df <= N, so BM25 ranks sensibly from the first memory.
N, df and avgdl count live documents only, so removals are exact.

`InvertedBM25` keeps numpy postings per term: `add` costs the document's length, `remove` is a tombstone.
The index compacts itself when more than a quarter of its slots are dead; a query reads only its own terms' postings.
The on-disk form is `MAGIC | sha256(body) | body`, the body a JSON header and raw little-endian int32 arrays.
Nothing read back can run code; missing, damaged or foreign bytes raise `DerivedIndexError`, and the caller rebuilds.
Writers are not thread-safe: `add`, `remove` and `save` must be serialised against `search`.
The reference the tests compare it with is `tests/index/bm25_reference.py`.
See docs/decisions/0032-bm25-as-one-module.md.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from memclaw.errors import DerivedIndexError, UsageError
from memclaw.util.files import replace_atomically
from memclaw.util.safepath import read_regular

# ---- the on-disk form

FORMAT_VERSION = 1
I4 = np.dtype("<i4")
"""The dtype of every array in the file (little-endian int32)."""

_MAGIC = b"MEMCLAW-BM25\n"
_DIGEST = 32


def encode_index(meta: dict[str, Any], arrays: Sequence[np.ndarray] = ()) -> bytes:
    head = json.dumps(meta, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    parts = [struct.pack("<Q", len(head)), head]
    parts += [np.ascontiguousarray(a, dtype=I4).tobytes() for a in arrays]
    body = b"".join(parts)
    return _MAGIC + hashlib.sha256(body).digest() + body


def corrupt(where: str | Path, why: str) -> DerivedIndexError:
    return DerivedIndexError(f"BM25 index {where} is unusable ({why}); rebuild it with `memclaw memory reindex`")


def read_index_file(path: Path) -> bytes:
    path = Path(path)
    try:
        return read_regular(path, follow=True)
    except FileNotFoundError as e:
        raise corrupt(path, "missing") from e
    except OSError as e:
        raise corrupt(path, f"cannot read: {e.strerror}") from e


def decode_index(raw: bytes, where: str | Path) -> tuple[dict[str, Any], memoryview]:
    """The JSON header and the raw array bytes after it. Raises DerivedIndexError on any damage."""
    n = len(_MAGIC)
    if not raw.startswith(_MAGIC):
        raise corrupt(where, "not a memclaw BM25 index")
    if len(raw) < n + _DIGEST + 8:
        raise corrupt(where, "truncated")
    body = memoryview(raw)[n + _DIGEST :]
    if hashlib.sha256(body).digest() != raw[n : n + _DIGEST]:
        raise corrupt(where, "checksum mismatch: truncated or corrupted")
    (hlen,) = struct.unpack_from("<Q", body, 0)
    try:
        meta = json.loads(bytes(body[8 : 8 + hlen]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise corrupt(where, "bad header") from e
    if not isinstance(meta, dict):
        raise corrupt(where, "bad header")
    if meta.get("format") != FORMAT_VERSION:
        raise corrupt(where, f"format {meta.get('format')!r}, this memclaw reads {FORMAT_VERSION}")
    return meta, body[8 + hlen :]


def check_params(where: str | Path, meta: dict[str, Any], kind: str) -> tuple[float, float]:
    if meta.get("kind") != kind:
        raise corrupt(where, f"holds a {meta.get('kind')!r} index, expected {kind!r}")
    k1, b = meta.get("k1"), meta.get("b")
    if not isinstance(k1, int | float) or not isinstance(b, int | float) or k1 < 0 or not 0 <= b <= 1:
        raise corrupt(where, "bad parameters")
    return float(k1), float(b)


# ---- the score

DEFAULT_K1 = 1.2
DEFAULT_B = 0.75


def lucene_idf(n_docs: int, df: int) -> float:
    """Lucene's BM25 idf: positive for every 0 < df <= n_docs."""
    return math.log1p((n_docs - df + 0.5) / (df + 0.5))


@runtime_checkable
class LexicalIndex(Protocol):
    """A BM25 index of one scope. Tokens come from memclaw.index.tokenizer.Tokenizer (same for docs and queries)."""

    kind: ClassVar[str]
    k1: float
    b: float

    @property
    def fingerprint(self) -> str:
        """Implementation, on-disk format version and parameters; a change means a rebuild."""
        ...

    def add(self, doc_id: str, tokens: Sequence[str]) -> None:
        """Index a document; an existing `doc_id` is replaced. Empty token lists are kept (they match nothing)."""
        ...

    def remove(self, doc_id: str) -> bool:
        """Forget a document; False if it was not there."""
        ...

    def search(self, query_tokens: Sequence[str], k: int) -> list[tuple[str, float]]:
        """Up to k (doc_id, score), best first (ties by id), only score > 0."""
        ...

    def max_score(self, query_tokens: Sequence[str]) -> float:
        """Upper bound of `search` scores for this query (every term matched with saturated tf)."""
        ...

    def doc_freq(self, term: str) -> int:
        """How many documents hold `term`."""
        ...

    def __len__(self) -> int: ...

    def __contains__(self, doc_id: object) -> bool: ...

    def ids(self) -> set[str]: ...

    def to_bytes(self) -> bytes: ...

    def save(self, path: Path) -> None: ...

    @classmethod
    def load(cls, path: Path) -> LexicalIndex: ...


def top_k(ids: Sequence[str | None], scores: np.ndarray, k: int) -> list[tuple[str, float]]:
    """Best k of the positive scores, ties broken by id (deterministic across implementations)."""
    cand = np.flatnonzero(scores > 0)
    if len(cand) > k:
        kth = -np.partition(-scores[cand], k - 1)[k - 1]
        # keep every tie at the boundary, then order by id
        cand = cand[scores[cand] >= kth]
    hits = [(ids[i], float(scores[i])) for i in cand.tolist()]
    hits.sort(key=lambda h: (-h[1], h[0]))
    return hits[:k]  # type: ignore[return-value]


# ---- the index

_COMPACT_DEAD_SHARE = 0.25


class _Postings:
    """One term's postings: doc slots and term frequencies in growable int32 arrays (first n valid)."""

    __slots__ = ("slots", "tfs", "n")

    def __init__(self, slots: np.ndarray, tfs: np.ndarray, n: int) -> None:
        self.slots = slots
        self.tfs = tfs
        self.n = n

    def append(self, slot: int, tf: int) -> None:
        n = self.n
        if n == len(self.slots):
            cap = max(4, 2 * n)
            slots = np.empty(cap, I4)
            tfs = np.empty(cap, I4)
            slots[:n] = self.slots[:n]
            tfs[:n] = self.tfs[:n]
            self.slots, self.tfs = slots, tfs
        self.slots[n] = slot
        self.tfs[n] = tf
        self.n = n + 1


class InvertedBM25:
    """Incremental BM25 over numpy postings; the module docstring has the formula and the costs.

    A term touched since the last load or compaction keeps its postings in `_postings`, as growable arrays.
    All other terms share one read-mostly CSR block: `_frozen` maps a term to its row of `_f_off`.
    So loading a 100k-memory scope costs a few array reads instead of one Python object per term.
    """

    kind: ClassVar[str] = "inverted"

    def __init__(self, k1: float = DEFAULT_K1, b: float = DEFAULT_B) -> None:
        if k1 < 0 or not 0 <= b <= 1:
            raise UsageError(f"invalid BM25 parameters k1={k1}, b={b}: use k1 >= 0 and 0 <= b <= 1")
        self.k1 = float(k1)
        self.b = float(b)
        self._postings: dict[str, _Postings] = {}
        self._frozen: dict[str, int] = {}
        self._f_off = np.zeros(1, np.int64)
        self._f_slots = np.zeros(0, I4)
        self._f_tfs = np.zeros(0, I4)
        # slot -> id, None when removed
        self._ids: list[str | None] = []
        self._slot: dict[str, int] = {}
        # slot -> document length (0 for removed slots)
        self._lens = np.zeros(16, np.float64)
        self._alive = np.zeros(16, np.bool_)
        self._total_len = 0
        self._n_dead = 0

    @property
    def fingerprint(self) -> str:
        return f"{self.kind}-f{FORMAT_VERSION}-k1={self.k1:g}-b={self.b:g}"

    def __len__(self) -> int:
        return len(self._slot)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._slot

    def __repr__(self) -> str:
        return f"InvertedBM25(docs={len(self)}, terms={self.n_terms}, dead={self._n_dead})"

    def ids(self) -> set[str]:
        return set(self._slot)

    @property
    def n_terms(self) -> int:
        """Distinct terms in the postings (a term whose documents were all removed may linger until compaction)."""
        return len(self._postings) + len(self._frozen)

    def _raw(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        p = self._postings.get(term)
        if p is not None:
            return p.slots[: p.n], p.tfs[: p.n]
        j = self._frozen.get(term)
        if j is None:
            return None
        a, z = self._f_off[j], self._f_off[j + 1]
        return self._f_slots[a:z], self._f_tfs[a:z]

    def add(self, doc_id: str, tokens: Sequence[str]) -> None:
        if doc_id in self._slot:
            self.remove(doc_id)
        slot = len(self._ids)
        if slot == len(self._lens):
            cap = 2 * slot
            self._lens = np.concatenate([self._lens, np.zeros(cap - slot, np.float64)])
            self._alive = np.concatenate([self._alive, np.zeros(cap - slot, np.bool_)])
        self._ids.append(doc_id)
        self._slot[doc_id] = slot
        self._lens[slot] = len(tokens)
        self._alive[slot] = True
        self._total_len += len(tokens)
        postings, frozen = self._postings, self._frozen
        for term, tf in Counter(tokens).items():
            p = postings.get(term)
            if p is None:
                j = frozen.pop(term, None) if frozen else None
                if j is None:
                    postings[term] = _Postings(np.array([slot, 0, 0, 0], I4), np.array([tf, 0, 0, 0], I4), 1)
                    continue
                a, z = int(self._f_off[j]), int(self._f_off[j + 1])
                # A view of the frozen block with n == capacity: the append below copies it out first.
                p = postings[term] = _Postings(self._f_slots[a:z], self._f_tfs[a:z], z - a)
            p.append(slot, tf)

    def remove(self, doc_id: str) -> bool:
        slot = self._slot.pop(doc_id, None)
        if slot is None:
            return False
        self._ids[slot] = None
        self._alive[slot] = False
        self._total_len -= int(self._lens[slot])
        self._lens[slot] = 0
        self._n_dead += 1
        if self._n_dead > _COMPACT_DEAD_SHARE * len(self._ids):
            self.compact()
        return True

    def _csr(self) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
        """All postings as (terms, counts, slots, tfs), dead documents included."""
        terms = list(self._frozen)
        rows = np.fromiter(self._frozen.values(), np.int64, len(terms))
        all_counts = np.diff(self._f_off)
        # no frozen row was taken over by _postings
        if len(rows) == len(all_counts):
            counts, slots, tfs = all_counts.astype(I4), self._f_slots, self._f_tfs
        else:
            keep_row = np.zeros(len(all_counts), np.bool_)
            keep_row[rows] = True
            keep = np.repeat(keep_row, all_counts)
            counts, slots, tfs = all_counts[rows].astype(I4), self._f_slots[keep], self._f_tfs[keep]
        if self._postings:
            ps = list(self._postings.values())
            terms += list(self._postings)
            counts = np.concatenate([counts, np.fromiter((p.n for p in ps), I4, len(ps))])
            slots = np.concatenate([slots] + [p.slots[: p.n] for p in ps])
            tfs = np.concatenate([tfs] + [p.tfs[: p.n] for p in ps])
        return terms, counts, slots, tfs

    def _set_frozen(self, terms: list[str], counts: np.ndarray, slots: np.ndarray, tfs: np.ndarray) -> None:
        self._postings = {}
        self._frozen = dict(zip(terms, range(len(terms)), strict=True))
        self._f_off = np.zeros(len(terms) + 1, np.int64)
        np.cumsum(counts, out=self._f_off[1:])
        self._f_slots, self._f_tfs = slots, tfs

    def compact(self) -> None:
        """Drop removed documents, renumber the slots and freeze all postings into one block. O(postings)."""
        if not self._n_dead and not self._postings:
            return
        terms, counts, slots, tfs = self._csr()
        n_slots = len(self._ids)
        if self._n_dead:
            alive = self._alive[:n_slots]
            remap = (np.cumsum(alive, dtype=np.int64) - 1).astype(I4)
            keep = alive[slots]
            row = np.repeat(np.arange(len(terms)), counts)
            counts = np.bincount(row[keep], minlength=len(terms)).astype(I4)
            slots, tfs = remap[slots[keep]], tfs[keep]
            if (counts == 0).any():
                terms = [t for t, c in zip(terms, counts.tolist(), strict=True) if c]
                counts = counts[counts > 0]
            self._ids = [i for i in self._ids if i is not None]
            self._slot = dict(zip(self._ids, range(len(self._ids)), strict=True))  # type: ignore[arg-type]
            n = len(self._ids)
            lens = np.zeros(max(16, 2 * n), np.float64)
            lens[:n] = self._lens[:n_slots][alive]
            self._lens = lens
            self._alive = np.zeros(len(lens), np.bool_)
            self._alive[:n] = True
            self._n_dead = 0
        self._set_frozen(terms, counts, np.ascontiguousarray(slots, I4), np.ascontiguousarray(tfs, I4))

    def _live_postings(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        raw = self._raw(term)
        if raw is None:
            return None
        slots, tfs = raw
        if self._n_dead:
            keep = self._alive[slots]
            slots, tfs = slots[keep], tfs[keep]
        return (slots, tfs) if len(slots) else None

    # ---- read access for scoring over the same postings (memclaw.index.bm25_context)

    @property
    def n_slots(self) -> int:
        """Document slots, removed ones included (a slot's number changes when the index adds or compacts)."""
        return len(self._ids)

    def slot_of(self, doc_id: str) -> int | None:
        return self._slot.get(doc_id)

    def slot_ids(self) -> list[str | None]:
        """Slot -> document id (None for a removed slot)."""
        return self._ids

    def doc_lengths(self) -> np.ndarray:
        """Slot -> document length in tokens (0 for a removed slot)."""
        return self._lens[: len(self._ids)]

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        """The live documents that hold `term`: (slots, term frequencies), or None."""
        return self._live_postings(term)

    def doc_freq(self, term: str) -> int:
        live = self._live_postings(term)
        return len(live[0]) if live else 0

    def idf(self, term: str) -> float:
        """The term's idf now (0.0 if no live document has it)."""
        live = self._live_postings(term)
        return lucene_idf(len(self._slot), len(live[0])) if live else 0.0

    def max_score(self, query_tokens: Sequence[str]) -> float:
        return sum(qtf * self.idf(t) * (self.k1 + 1) for t, qtf in Counter(query_tokens).items())

    def search(self, query_tokens: Sequence[str], k: int) -> list[tuple[str, float]]:
        n_docs = len(self._slot)
        if k <= 0 or not n_docs or not query_tokens or self._total_len <= 0:
            return []
        avgdl = self._total_len / n_docs
        k1, b = self.k1, self.b
        scores: np.ndarray | None = None
        for term, qtf in Counter(query_tokens).items():
            live = self._live_postings(term)
            if live is None:
                continue
            slots, tfs = live
            idf = lucene_idf(n_docs, len(slots))
            tf = tfs.astype(np.float64)
            dl = self._lens[slots]
            contrib = idf * (tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)))
            if qtf != 1:
                contrib *= qtf
            if scores is None:
                scores = np.zeros(len(self._ids), np.float64)
            # a term's slots are distinct, so plain fancy-index add is exact
            scores[slots] += contrib
        if scores is None:
            return []
        return top_k(self._ids, scores, k)

    # ---- persistence

    def to_bytes(self) -> bytes:
        """The whole index (compacted first: removed documents are dropped, postings frozen)."""
        self.compact()
        n = len(self._ids)
        meta = {
            "kind": self.kind,
            "format": FORMAT_VERSION,
            "k1": self.k1,
            "b": self.b,
            "ids": self._ids,
            "terms": list(self._frozen),
            "n_postings": int(len(self._f_slots)),
        }
        counts = np.diff(self._f_off)
        return encode_index(meta, [self._lens[:n], counts, self._f_slots, self._f_tfs])

    def save(self, path: Path) -> None:
        """Write to a file of its own, atomically."""
        replace_atomically(path, self.to_bytes())

    @classmethod
    def load(cls, path: Path) -> InvertedBM25:
        return cls.from_bytes(read_index_file(path), path)

    @classmethod
    def from_bytes(cls, raw: bytes, where: str | Path) -> InvertedBM25:
        """The index `to_bytes` wrote; `where` names it in errors. Raises DerivedIndexError on any damage."""
        meta, rest = decode_index(raw, where)
        k1, b = check_params(where, meta, cls.kind)
        ids, terms, n_post = meta.get("ids"), meta.get("terms"), meta.get("n_postings")
        if not isinstance(ids, list) or not isinstance(terms, list) or not isinstance(n_post, int):
            raise corrupt(where, "bad header")
        if not set(map(type, ids)) <= {str} or not set(map(type, terms)) <= {str}:
            raise corrupt(where, "bad ids or terms")
        n_docs, n_terms = len(ids), len(terms)
        sizes = [n_docs, n_terms, n_post, n_post]
        if len(rest) != 4 * sum(sizes):
            raise corrupt(where, "array sizes do not match the header")
        arrays, off = [], 0
        for size in sizes:
            # read-only views of `raw`: nothing writes into the frozen block (an append copies a term out first)
            arrays.append(np.frombuffer(rest, I4, size, off))
            off += 4 * size
        lens, counts, slots, tfs = arrays
        if (
            (n_docs and lens.min() < 0)
            or (n_terms and counts.min() < 1)
            or int(counts.sum()) != n_post
            or (n_post and (slots.min() < 0 or slots.max() >= n_docs or tfs.min() < 1))
        ):
            raise corrupt(where, "inconsistent arrays")
        self = cls(k1, b)
        self._ids = list(ids)
        self._slot = dict(zip(ids, range(n_docs), strict=True))
        if len(self._slot) != n_docs:
            raise corrupt(where, "duplicate document ids")
        cap = max(16, n_docs)
        self._lens = np.zeros(cap, np.float64)
        self._lens[:n_docs] = lens
        self._alive = np.zeros(cap, np.bool_)
        self._alive[:n_docs] = True
        self._total_len = int(lens.sum())
        self._set_frozen(terms, counts, slots, tfs)
        if len(self._frozen) != n_terms:
            raise corrupt(where, "duplicate terms")
        return self

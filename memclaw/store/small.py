"""Small scopes without a Chroma collection: an outsider's few vectors in one SQLite file, searched exactly.

Why: each Chroma collection that embedded Chroma has read keeps 4 segment files open and ~2.6 MiB of memory for
the life of the process, and chromadb 1.5's own cache eviction loses indexes ("Nothing found on disk"). A gateway
meeting thousands of senders ran out of file handles. A scope here costs no open file between operations (each
opens and closes its connection) and about 10 KiB of disk for a few facts. Its vectors are read into memory on
first search, in a cache bounded in bytes (`MATRIX_CACHE_BYTES`), and read again after any write to it.

A scope outgrows this store past `limit` vectors: `SmallVectors.upsert` says so, and the caller moves the scope
into Chroma (memclaw.store.chroma).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memclaw.errors import VectorStoreCorrupted
from memclaw.store.base import VectorHit

MATRIX_CACHE_BYTES = 64 * 1024 * 1024
"""At most this many bytes of small scopes' vectors stay in memory between searches (least recently used first
out)."""

FOLDER = "memclaw-small"
"""The folder of the small scopes' files, inside the embedded store's folder (wiped with it)."""

_SCHEMA = "CREATE TABLE IF NOT EXISTS v (id TEXT PRIMARY KEY, emb BLOB NOT NULL, meta TEXT, doc TEXT)"


class SmallVectors:
    """Per-scope vector files under `folder`, one per collection name (memclaw.store.base.collection_name)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, tuple[int, list[str], np.ndarray]] = OrderedDict()
        self._cached_bytes = 0

    def path(self, name: str) -> Path:
        return self.folder / f"{name}.sqlite3"

    def exists(self, name: str) -> bool:
        return self.path(name).is_file()

    @contextlib.contextmanager
    def _connect(self, name: str, *, create: bool) -> Iterator[sqlite3.Connection | None]:
        p = self.path(name)
        if not create and not p.is_file():
            yield None
            return
        if create:
            self.folder.mkdir(parents=True, exist_ok=True)
        con = sqlite3.connect(p, timeout=30.0, isolation_level=None)
        try:
            con.execute(_SCHEMA)
            yield con
        except sqlite3.DatabaseError as e:
            if isinstance(e, sqlite3.OperationalError) and "locked" in str(e):
                raise
            raise VectorStoreCorrupted(
                f"the vector file {p} is damaged ({e}); run `memclaw memory reindex` to rebuild it from the Markdown"
            ) from e
        finally:
            con.close()

    def count(self, name: str) -> int:
        with self._connect(name, create=False) as con:
            return 0 if con is None else int(con.execute("SELECT count(*) FROM v").fetchone()[0])

    def upsert(
        self,
        name: str,
        ids: Sequence[str],
        embeddings: np.ndarray,
        metadatas: Sequence[Mapping[str, Any]],
        documents: Sequence[str] | None,
    ) -> int:
        """Write these vectors in one transaction; the scope's vector count after it."""
        embs = np.asarray(embeddings, dtype=np.float32)
        rows = [
            (i, embs[n].tobytes(), json.dumps(dict(metadatas[n])) if metadatas[n] else None,
             documents[n] if documents is not None else None)
            for n, i in enumerate(ids)
        ]  # fmt: skip
        with self._connect(name, create=True) as con:
            assert con is not None
            con.execute("BEGIN IMMEDIATE")
            try:
                con.executemany("INSERT OR REPLACE INTO v (id, emb, meta, doc) VALUES (?, ?, ?, ?)", rows)
                n = int(con.execute("SELECT count(*) FROM v").fetchone()[0])
                _bump(con)
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
        return n

    def delete(self, name: str, ids: Sequence[str]) -> None:
        with self._connect(name, create=False) as con:
            if con is not None:
                con.execute("BEGIN IMMEDIATE")
                try:
                    con.executemany("DELETE FROM v WHERE id = ?", [(i,) for i in ids])
                    _bump(con)
                    con.execute("COMMIT")
                except BaseException:
                    con.execute("ROLLBACK")
                    raise

    def texts(self, name: str) -> dict[str, str]:
        with self._connect(name, create=False) as con:
            return {} if con is None else {i: d or "" for i, d in con.execute("SELECT id, doc FROM v")}

    def entries(self, name: str) -> tuple[list[str], np.ndarray, list[dict[str, Any] | None], list[str | None]]:
        """Every vector of the scope: ids, embeddings, metadatas, documents."""
        with self._connect(name, create=False) as con:
            rows = [] if con is None else con.execute("SELECT id, emb, meta, doc FROM v ORDER BY rowid").fetchall()
        embs = np.stack([np.frombuffer(r[1], dtype=np.float32) for r in rows]) if rows else np.zeros((0, 0))
        return [r[0] for r in rows], embs, [json.loads(r[2]) if r[2] else None for r in rows], [r[3] for r in rows]

    def drop(self, name: str) -> None:
        with self._lock:
            self._forget(name)
        with contextlib.suppress(FileNotFoundError):
            self.path(name).unlink()

    def query(self, name: str, embedding: np.ndarray, k: int) -> list[VectorHit]:
        """The `k` nearest by cosine similarity, exactly."""
        ids, mat = self._matrix(name)
        if not ids or k <= 0:
            return []
        q = np.asarray(embedding, dtype=np.float32).reshape(-1)
        qn = float(np.linalg.norm(q)) or 1.0
        sims = mat @ (q / qn)
        k = min(k, len(ids))
        top = np.argpartition(-sims, k - 1)[:k]
        top = top[np.argsort(-sims[top], kind="stable")]
        return [VectorHit(ids[i], float(sims[i])) for i in top]

    def _matrix(self, name: str) -> tuple[list[str], np.ndarray]:
        """The scope's ids and unit-length vectors, from the cache while its file's write count is unchanged."""
        with self._connect(name, create=False) as con:
            if con is None:
                return [], np.zeros((0, 0), dtype=np.float32)
            version = int(con.execute("PRAGMA user_version").fetchone()[0])
            with self._lock:
                hit = self._cache.get(name)
                if hit is not None and hit[0] == version:
                    self._cache.move_to_end(name)
                    return hit[1], hit[2]
            rows = con.execute("SELECT id, emb FROM v").fetchall()
        ids = [r[0] for r in rows]
        mat = np.stack([np.frombuffer(r[1], dtype=np.float32) for r in rows]) if rows else np.zeros((0, 0))
        mat = np.asarray(mat, dtype=np.float32)
        if ids:
            norms = np.linalg.norm(mat, axis=1, keepdims=True)
            mat = mat / np.where(norms == 0, 1.0, norms)
        with self._lock:
            self._forget(name)
            if mat.nbytes <= MATRIX_CACHE_BYTES:
                self._cache[name] = (version, ids, mat)
                self._cached_bytes += mat.nbytes
                while self._cached_bytes > MATRIX_CACHE_BYTES:
                    self._forget(next(iter(self._cache)))
        return ids, mat

    def _forget(self, name: str) -> None:
        old = self._cache.pop(name, None)
        if old is not None:
            self._cached_bytes -= old[2].nbytes


def _bump(con: sqlite3.Connection) -> None:
    """Count a write in the file itself (PRAGMA user_version), so every process's cache sees it."""
    v = int(con.execute("PRAGMA user_version").fetchone()[0])
    con.execute(f"PRAGMA user_version = {(v + 1) % 2**31}")

"""The provider embeddings' on-disk query cache: a query asked before is answered without a request.

One SQLite file (`$MEMCLAW_HOME/cache/query-embeddings.sqlite3`, or `embeddings.cache_dir`): vectors keyed by
(model fingerprint, sha256 of the query text), stored as raw float32 bytes (nothing in it is ever executed or
unpickled), and each model's dimensions. A cache only: any SQLite error is logged and read as a miss.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from memclaw.config import EmbeddingsConfig

log = logging.getLogger(__name__)

CACHE_FILE = "query-embeddings.sqlite3"


class QueryCache:
    """Query vectors on disk (SQLite) by (model fingerprint, text digest), and each model's dimensions. One
    connection per instance, shared by threads under a lock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=10, check_same_thread=False)
            with db:
                db.execute(
                    "CREATE TABLE IF NOT EXISTS vectors "
                    "(model TEXT, digest BLOB, vector BLOB, PRIMARY KEY (model, digest))"
                )
                db.execute("CREATE TABLE IF NOT EXISTS dims (model TEXT PRIMARY KEY, dim INTEGER)")
            self._db = db
        return self._db

    def _read(self, sql: str, args: tuple) -> tuple | None:
        with self._lock:
            try:
                return self._connect().execute(sql, args).fetchone()
            # a cache: never fatal
            except (sqlite3.Error, OSError) as e:
                log.info("query embedding cache %s unusable (%s)", self.path, e)
                return None

    def _write(self, sql: str, args: tuple) -> None:
        with self._lock:
            try:
                db = self._connect()
                with db:
                    db.execute(sql, args)
            except (sqlite3.Error, OSError) as e:
                log.info("query embedding cache %s unusable (%s)", self.path, e)

    def get(self, model: str, text: str) -> np.ndarray | None:
        row = self._read("SELECT vector FROM vectors WHERE model = ? AND digest = ?", (model, digest(text)))
        if not row or not isinstance(row[0], bytes) or len(row[0]) % 4:
            return None
        return np.frombuffer(row[0], dtype=np.float32).copy()

    def put(self, model: str, text: str, vector: np.ndarray) -> None:
        data = np.asarray(vector, dtype=np.float32).tobytes()
        self._write("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)", (model, digest(text), data))

    def dim(self, model: str) -> int | None:
        row = self._read("SELECT dim FROM dims WHERE model = ?", (model,))
        return int(row[0]) if row and isinstance(row[0], int) else None

    def set_dim(self, model: str, dim: int) -> None:
        self._write("INSERT OR REPLACE INTO dims VALUES (?, ?)", (model, dim))

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


def digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def default_cache_path(cfg: EmbeddingsConfig) -> Path:
    from memclaw.config import memclaw_home

    return (Path(cfg.cache_dir).expanduser() if cfg.cache_dir else memclaw_home() / "cache") / CACHE_FILE

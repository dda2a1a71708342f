"""Reading a store without the chromadb package: a cold `memclaw recall` queries Chroma's engine directly
(`EngineReader`) or a server's REST API (`HttpReader`), so the chromadb import (~1.3 s here) is paid only once
something writes. One engine reader per store directory and process (`engine_reader`), retired as soon as the
chromadb client opens that directory."""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from memclaw.store._failures import is_not_found, translate
from memclaw.store.base import SPACE, VectorHit, first_hits

log = logging.getLogger(__name__)

_TENANT = "default_tenant"
_DATABASE = "default_database"
_READERS: dict[str, EngineReader] = {}
_READERS_LOCK = threading.Lock()


class Reader(Protocol):
    """Read-only access to a store's collections without the chromadb package (see EngineReader, HttpReader)."""

    live: bool

    def dimension(self, name: str) -> int | None: ...
    def query(self, name: str, embedding: np.ndarray, k: int) -> list[VectorHit]: ...
    def close(self) -> None: ...


def warm_through(r: Reader, name: str) -> bool:
    """Make the reader load the collection `name` (a 1-NN query); nothing to load if there is none yet."""
    dim = r.dimension(name)
    if dim:
        r.query(name, np.ones(dim, dtype=np.float32), 1)
    return True


class EngineReader:
    """Read-only queries straight through chromadb's Rust engine (`chromadb_rust_bindings`, which chromadb's own
    PersistentClient drives), for an embedded store that this process has not opened with the client.

    Why: importing the `chromadb` package costs ~1.3 s here (its API layer, telemetry, jsonschema, httpx...),
    the engine ~20 ms, and a cold `memclaw recall` needs nothing else from it. The engine opens the same files
    with migrations only validated, never applied, so it writes nothing. Anything it does not expect (another
    chromadb version's bindings, an unmigrated or damaged store) is an exception, on which ChromaStore drops it
    and goes through the client, which reports the problem the usual way.

    One engine per store directory and process: opening the client for that directory (`forget_readers`)
    retires the readers, since the client's engine keeps its own copy of the index and writes through it."""

    def __init__(self, path: Path) -> None:
        import chromadb_rust_bindings as rb

        cfg = rb.SqliteDBConfig(
            # chromadb's default migrations_hash_algorithm
            hash_type=rb.MigrationHash.MD5,
            migration_mode=rb.MigrationMode.Validate,
            url=str(path / "chroma.sqlite3"),
        )
        self._bindings: Any = rb.Bindings(
            allow_reset=False, sqlite_db_config=cfg, persist_path=str(path), hnsw_cache_size=_hnsw_cache_size()
        )
        self._collections: dict[str, Any] = {}
        self.path = path
        self.live = True

    def _collection(self, name: str) -> Any | None:
        col = self._collections.get(name)
        if col is None:
            try:
                col = self._bindings.get_collection(name, _TENANT, _DATABASE)
            except Exception as e:
                if is_not_found(e):
                    return None
                raise
            self._collections[name] = col
        return col

    def dimension(self, name: str) -> int | None:
        """The collection's dimension (0 if it has no vectors yet), or None if there is no such collection."""
        col = self._collection(name)
        return None if col is None else int(col.dimension or 0)

    def query(self, name: str, embedding: np.ndarray, k: int) -> list[VectorHit]:
        col = self._collection(name)
        if col is None:
            return []
        space = ((col.configuration or {}).get("hnsw") or {}).get("space", SPACE)
        q = np.asarray(embedding, dtype=np.float32).reshape(1, -1)
        res = self._bindings.query(str(col.id), None, q, k, None, None, ["distances"], _TENANT, _DATABASE)
        return first_hits(res.ids, res.distances, space)

    def close(self) -> None:
        """Retire this reader: stores holding it stop using it, and the next one for its path is a new one."""
        self.live = False
        with _READERS_LOCK:
            if _READERS.get(_path_key(self.path)) is self:
                del _READERS[_path_key(self.path)]


class HttpReader:
    """Read-only queries to a Chroma server over its REST API (v2) with httpx, for the same reason as
    EngineReader: a cold recall against a server need not import the chromadb package. Two requests: the
    collection by name (once), then its query. A server that does not answer in time is VectorStoreUnavailable
    (said once); anything else unexpected is an exception on which ChromaStore falls back to the client."""

    def __init__(self, url: str, headers: Mapping[str, str] | None, timeout: Any) -> None:
        import httpx

        base = f"{url.rstrip('/')}/api/v2/tenants/{_TENANT}/databases/{_DATABASE}/collections"
        self._http = httpx.Client(base_url=base, headers=dict(headers or {}), timeout=timeout)
        self._url = url
        self._collections: dict[str, dict[str, Any]] = {}
        self.live = True

    def _request(self, method: str, path: str, **kw: Any) -> Any:
        import httpx

        try:
            resp = self._http.request(method, path, **kw)
        except httpx.TransportError as e:
            raise translate(e, self._url) from e
        if resp.status_code == 404:
            return None
        resp.raise_for_status()
        return resp.json()

    def _collection(self, name: str) -> dict[str, Any] | None:
        col = self._collections.get(name)
        if col is None:
            col = self._request("GET", f"/{name}")
            if col is None:
                return None
            self._collections[name] = col
        return col

    def dimension(self, name: str) -> int | None:
        col = self._collection(name)
        return None if col is None else int(col.get("dimension") or 0)

    def query(self, name: str, embedding: np.ndarray, k: int) -> list[VectorHit]:
        col = self._collection(name)
        if col is None:
            return []
        space = (((col.get("configuration_json") or {}).get("hnsw")) or {}).get("space", SPACE)
        body = {
            "query_embeddings": np.asarray(embedding, dtype=np.float32).reshape(1, -1).tolist(),
            "n_results": k,
            "include": ["distances"],
        }
        res = self._request("POST", f"/{col['id']}/query", json=body)
        # the collection was dropped since: the client finds out for itself
        if res is None:
            raise LookupError(f"collection {name} vanished")
        return first_hits(res["ids"], res["distances"], space)

    def close(self) -> None:
        self.live = False
        self._http.close()


def _path_key(path: Path) -> str:
    return str(path.resolve())


def _hnsw_cache_size() -> int:
    """What chromadb's RustBindingsAPI gives its engine: open file handles / 5 (4 data + 1 metadata per index)."""
    try:
        import resource

        return max(1, resource.getrlimit(resource.RLIMIT_NOFILE)[0] // 5)
    except (ImportError, OSError, ValueError):
        return 100


def engine_reader(path: Path) -> EngineReader | None:
    """This process's engine reader for the store at `path`, made on first use; None when the chromadb client
    already runs on it here, or the engine cannot open it (then the client will say why)."""
    key = _path_key(path)
    with _READERS_LOCK:
        r = _READERS.get(key)
        if r is not None:
            return r
        if client_running(path):
            return None
        try:
            r = EngineReader(path)
        except Exception as e:
            log.debug("no engine reader for %s (%s: %s); using the chromadb client", path, type(e).__name__, e)
            return None
        _READERS[key] = r
        return r


def forget_readers(path: Path) -> None:
    r = _READERS.get(_path_key(path))
    if r is not None:
        r.close()


def client_running(path: Path) -> bool:
    if "chromadb" not in sys.modules:
        return False
    from chromadb.api.shared_system_client import SharedSystemClient

    return any(i in SharedSystemClient._identifier_to_system for i in system_idents(path))


def system_idents(path: Path) -> set[str]:
    """The keys chromadb may have registered the embedded store at `path` under (as given, and resolved)."""
    return {str(path), _path_key(path)}


def reader_keys() -> list[str]:
    """The store directories (resolved) this process has an engine reader for."""
    return list(_READERS)

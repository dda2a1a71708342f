"""The vector store seam: Chroma, embedded (PersistentClient) or client/server (HttpClient).

memclaw always supplies its own embeddings: collections are created with `embedding_function=None`, so Chroma
never loads (or downloads) its default ONNX model. One collection per scope keeps scopes structurally apart
(a metadata `where` filter costs ~177 ms at 100k vectors against ~4 ms unfiltered).

A store that this process only reads (a cold `memclaw recall`) is queried through Chroma's engine directly
(`EngineReader`) or a server's REST API (`HttpReader`): the chromadb package's import (~1.3 s here) is paid only
once something writes.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np

from memclaw.errors import IndexError_, MemclawError, UsageError, VectorStoreCorrupted, VectorStoreUnavailable

log = logging.getLogger(__name__)
_T = TypeVar("_T")

SPACE = "cosine"
_GET_PAGE = 5000
# chromadb's HttpClient has no timeout at all (httpx timeout=None), and its constructor already talks to the
# server: an unreachable host or a frozen server would hang recall for ever. A heartbeat with timeouts goes first,
# then the client's session gets them. Connecting must be quick; a request may take longer (a 5000-vector upsert):
# memory.chroma_timeout_s, default HTTP_TIMEOUT_S.
HTTP_CONNECT_TIMEOUT_S = 3.0
HTTP_TIMEOUT_S = 30.0
# What chromadb / SQLite / the HNSW reader say about damaged files (versions differ in the wording).
_CORRUPTION_MARKERS = (
    "not a database",
    "malformed",
    "corrupt",
    "no such table",
    "error deserializing",
    "hnsw segment",
    "error finding id",
    "eof while parsing",
    "unexpected end of file",
    "failed to fill whole buffer",
)


@dataclass(frozen=True)
class VectorHit:
    id: str
    similarity: float  # cosine similarity in [-1, 1]


class VectorStore(Protocol):
    """What the index needs from a vector store. `scope` is a memclaw scope name."""

    def upsert(
        self,
        scope: str,
        ids: Sequence[str],
        embeddings: np.ndarray,
        metadatas: Sequence[Mapping[str, Any]],
        documents: Sequence[str] | None = None,
    ) -> None: ...
    def texts(self, scope: str) -> dict[str, str]: ...
    def delete(self, scope: str, ids: Sequence[str]) -> None: ...
    def query(self, scope: str, embedding: np.ndarray, k: int) -> list[VectorHit]: ...
    def warm(self, scope: str) -> None: ...
    def ids(self, scope: str) -> set[str]: ...
    def count(self, scope: str) -> int: ...
    def drop(self, scope: str) -> None: ...
    def describe(self) -> str: ...


def distance_to_similarity(distance: float, space: str) -> float:
    """Chroma returns distances, not similarities. For unit vectors: cosine and ip give 1 - d,
    squared L2 gives 1 - d/2."""
    if space in ("cosine", "ip"):
        return 1.0 - distance
    if space == "l2":
        return 1.0 - distance / 2.0
    raise ValueError(f"unknown Chroma space {space!r}")


def _first_hits(
    ids: Sequence[Sequence[str]] | None, dists: Sequence[Sequence[float]] | None, space: str
) -> list[VectorHit]:
    """A Chroma query result's first (only) query, as hits with similarities."""
    first_ids = ids[0] if ids else []
    first_d = dists[0] if dists else []
    return [VectorHit(i, distance_to_similarity(float(d), space)) for i, d in zip(first_ids, first_d, strict=True)]


def collection_name(namespace: str, scope: str) -> str:
    """A valid Chroma collection name (3-512 chars of [a-zA-Z0-9._-]) unique per workspace and scope."""
    digest = hashlib.sha256(f"{namespace}\x00{scope}".encode()).hexdigest()[:20]
    return f"memclaw-{digest}"


class ChromaStore:
    """VectorStore over a chromadb client. Build it with `open_chroma_store`."""

    def __init__(
        self,
        client: Any,
        namespace: str,
        *,
        where: str,
        connect: Callable[[], Any] | None = None,
        reader: Callable[[], Reader | None] | None = None,
    ) -> None:
        """`client`: a chromadb client, or None with `connect` to make one at first need. `reader`: makes the
        read-only `Reader` that serves `query` and `warm` until the client is needed."""
        self._client_obj = client
        self._connect = connect
        self._make_reader = reader
        self._reader: Reader | None = None
        self._connect_lock = threading.Lock()
        self._namespace = namespace
        self._where = where
        self._collections: dict[str, Any] = {}

    @property
    def _client(self) -> Any:
        if self._client_obj is None:
            with self._connect_lock:
                if self._client_obj is None:
                    assert self._connect is not None
                    self._make_reader = None  # from now on this process reads through the client
                    self._reader = None
                    self._client_obj = self._connect()
        return self._client_obj

    def _live_reader(self) -> Reader | None:
        """The reader while it may serve reads: never after this store opened the chromadb client, nor (an
        engine reader) after another store of this process opened it on the same files, since the client's
        engine keeps its own copy of the index."""
        r = self._reader
        if r is None and self._make_reader is not None and self._client_obj is None:
            with self._connect_lock:
                if self._reader is None and self._make_reader is not None and self._client_obj is None:
                    self._reader = self._make_reader()
                    self._make_reader = None
                r = self._reader
        if r is not None and not r.live:
            self._reader = r = None
        return r

    def _via_reader(self, scope: str, op: Callable[[Reader, str], _T]) -> _T | None:
        """`op(reader, collection name)`, or None when there is no reader or it failed: then the caller goes
        through the client, which reports (and lets sync repair) whatever went wrong the usual way."""
        r = self._live_reader()
        if r is None:
            return None
        try:
            return op(r, collection_name(self._namespace, scope))
        except VectorStoreUnavailable:
            raise  # a server that does not answer would not answer the client either: one timeout, not two
        except Exception as e:
            log.debug(
                "read-only reader for %s gave up (%s: %s); using the chromadb client", self._where, type(e).__name__, e
            )
            r.close()
            self._reader = None
            return None

    def describe(self) -> str:
        return self._where

    def _collection(self, scope: str, *, create: bool) -> Any | None:
        col = self._collections.get(scope)
        if col is not None:
            return col
        name = collection_name(self._namespace, scope)
        try:
            if create:
                col = self._client.get_or_create_collection(
                    name,
                    embedding_function=None,
                    configuration={"hnsw": {"space": SPACE}},
                    metadata={"memclaw_scope": scope, "memclaw_namespace": self._namespace},
                )
            else:
                col = self._client.get_collection(name, embedding_function=None)
        except Exception as e:  # chromadb raises NotFoundError / ValueError variants across versions
            if not create and _is_not_found(e):
                return None
            raise _translate(e, self._where) from e
        self._collections[scope] = col
        return col

    def upsert(
        self,
        scope: str,
        ids: Sequence[str],
        embeddings: np.ndarray,
        metadatas: Sequence[Mapping[str, Any]],
        documents: Sequence[str] | None = None,
    ) -> None:
        if not ids:
            return
        from memclaw.util.batches import even_chunk

        col = self._collection(scope, create=True)
        batch = even_chunk(len(ids), _max_batch(self._client))  # (equal batches: see memclaw.index.vector_writer)
        try:
            for start in range(0, len(ids), batch):
                end = start + batch
                col.upsert(
                    ids=list(ids[start:end]),
                    embeddings=np.asarray(embeddings[start:end], dtype=np.float32),
                    metadatas=[dict(m) or None for m in metadatas[start:end]],
                    documents=list(documents[start:end]) if documents is not None else None,
                )
        except Exception as e:
            raise _translate(e, self._where) from e

    def delete(self, scope: str, ids: Sequence[str]) -> None:
        if not ids:
            return
        col = self._collection(scope, create=False)
        if col is None:
            return
        try:
            for start in range(0, len(ids), _GET_PAGE):
                col.delete(ids=list(ids[start : start + _GET_PAGE]))
        except Exception as e:
            raise _translate(e, self._where) from e

    def warm(self, scope: str) -> None:
        """Make Chroma read the scope's vectors now (its first query on a 100k collection takes ~0.5 s)."""
        if self._via_reader(scope, _warm_through) is not None:
            return
        col = self._collection(scope, create=False)
        if col is None:
            return
        dim = getattr(getattr(col, "_model", None), "dimension", None)
        try:
            if dim:
                col.query(query_embeddings=[[1.0] * int(dim)], n_results=1, include=["distances"])
            else:
                col.count()
        except Exception as e:
            raise _translate(e, self._where) from e

    def query(self, scope: str, embedding: np.ndarray, k: int) -> list[VectorHit]:
        if k <= 0:
            return []
        fast = self._via_reader(scope, lambda r, name: r.query(name, embedding, k))
        if fast is not None:
            return fast
        col = self._collection(scope, create=False)
        if col is None:
            return []
        try:
            res = col.query(
                query_embeddings=np.asarray(embedding, dtype=np.float32).reshape(1, -1),
                n_results=k,
                include=["distances"],
            )
        except Exception as e:
            if _is_not_found(e):
                self._collections.pop(scope, None)
                return []
            raise _translate(e, self._where) from e
        return _first_hits(res["ids"], res["distances"], SPACE)

    def ids(self, scope: str) -> set[str]:
        return set(self._get_all(scope, with_documents=False))

    def texts(self, scope: str) -> dict[str, str]:
        """Every id in the scope with its stored document text."""
        return self._get_all(scope, with_documents=True)

    def _get_all(self, scope: str, *, with_documents: bool) -> dict[str, str]:
        col = self._collection(scope, create=False)
        if col is None:
            return {}
        out: dict[str, str] = {}
        include = ["documents"] if with_documents else []
        try:
            offset = 0
            while True:
                page = col.get(include=include, limit=_GET_PAGE, offset=offset)
                docs = page.get("documents") or [""] * len(page["ids"])
                out.update(zip(page["ids"], (d or "" for d in docs), strict=True))
                if len(page["ids"]) < _GET_PAGE:
                    return out
                offset += _GET_PAGE
        except Exception as e:
            if _is_not_found(e):
                self._collections.pop(scope, None)
                return {}
            raise _translate(e, self._where) from e

    def count(self, scope: str) -> int:
        col = self._collection(scope, create=False)
        if col is None:
            return 0
        try:
            return int(col.count())
        except Exception as e:
            raise _translate(e, self._where) from e

    def drop(self, scope: str) -> None:
        self._collections.pop(scope, None)
        try:
            self._client.delete_collection(collection_name(self._namespace, scope))
        except Exception as e:
            if not _is_not_found(e):
                raise _translate(e, self._where) from e


class Reader(Protocol):
    """Read-only access to a store's collections without the chromadb package (see EngineReader, HttpReader)."""

    live: bool

    def dimension(self, name: str) -> int | None: ...
    def query(self, name: str, embedding: np.ndarray, k: int) -> list[VectorHit]: ...
    def close(self) -> None: ...


def _warm_through(r: Reader, name: str) -> bool:
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

    One engine per store directory and process: opening the client for that directory (`_forget_readers`)
    retires the readers, since the client's engine keeps its own copy of the index and writes through it."""

    def __init__(self, path: Path) -> None:
        import chromadb_rust_bindings as rb

        cfg = rb.SqliteDBConfig(
            hash_type=rb.MigrationHash.MD5,  # chromadb's default migrations_hash_algorithm
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
                if _is_not_found(e):
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
        return _first_hits(res.ids, res.distances, space)

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
            raise _translate(e, self._url) from e
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
        if res is None:  # the collection was dropped since: the client finds out for itself
            raise LookupError(f"collection {name} vanished")
        return _first_hits(res["ids"], res["distances"], space)

    def close(self) -> None:
        self.live = False
        self._http.close()


_TENANT = "default_tenant"
_DATABASE = "default_database"
_READERS: dict[str, EngineReader] = {}
_READERS_LOCK = threading.Lock()


def _path_key(path: Path) -> str:
    return str(path.resolve())


def _hnsw_cache_size() -> int:
    """What chromadb's RustBindingsAPI gives its engine: open file handles / 5 (4 data + 1 metadata per index)."""
    try:
        import resource

        return max(1, resource.getrlimit(resource.RLIMIT_NOFILE)[0] // 5)
    except (ImportError, OSError, ValueError):
        return 100


def _engine_reader(path: Path) -> EngineReader | None:
    """This process's engine reader for the store at `path`, made on first use; None when the chromadb client
    already runs on it here, or the engine cannot open it (then the client will say why)."""
    key = _path_key(path)
    with _READERS_LOCK:
        r = _READERS.get(key)
        if r is not None:
            return r
        if _client_running(path):
            return None
        try:
            r = EngineReader(path)
        except Exception as e:
            log.debug("no engine reader for %s (%s: %s); using the chromadb client", path, type(e).__name__, e)
            return None
        _READERS[key] = r
        return r


def _forget_readers(path: Path) -> None:
    r = _READERS.get(_path_key(path))
    if r is not None:
        r.close()


def _client_running(path: Path) -> bool:
    if "chromadb" not in sys.modules:
        return False
    from chromadb.api.shared_system_client import SharedSystemClient

    return any(i in SharedSystemClient._identifier_to_system for i in _system_idents(path))


def _system_idents(path: Path) -> set[str]:
    """The keys chromadb may have registered the embedded store at `path` under (as given, and resolved)."""
    return {str(path), _path_key(path)}


def _max_batch(client: Any) -> int:
    try:
        return max(1, min(int(client.get_max_batch_size()), 5000))
    except Exception:
        return 1000


def _is_not_found(e: Exception) -> bool:
    name = type(e).__name__
    text = str(e).lower()
    return "NotFound" in name or "does not exist" in text or "not found" in text


def _is_corruption(e: Exception) -> bool:
    text = str(e).lower()
    return not isinstance(e, OSError) and any(m in text for m in _CORRUPTION_MARKERS)


def _is_permission(e: Exception) -> bool:
    """Chroma's files cannot be read or written (permissions, a read-only folder): not damage, a rebuild fails too."""
    text = str(e).lower()
    return isinstance(e, PermissionError) or "readonly database" in text or "permission denied" in text


def _permission_error(e: Exception, where: str | Path) -> IndexError_:
    first = str(e).splitlines()[0] if str(e) else type(e).__name__
    return IndexError_(f"Chroma cannot use its files at {where} ({first}): fix the folder's permissions")


def _translate(e: Exception, where: str) -> Exception:
    from memclaw.util.redact import redact_text

    name = type(e).__name__
    text, where = redact_text(str(e)), redact_text(where)  # a server's URL may carry credentials
    if isinstance(e, MemclawError):
        return e  # already said in memclaw's words
    if _is_permission(e):
        return _permission_error(e, where)
    if _is_corruption(e):
        return VectorStoreCorrupted(
            f"Chroma at {where} is damaged ({name}: {text.splitlines()[0]}); "
            "run `memclaw memory reindex` to rebuild it from the Markdown"
        )
    if "Timeout" in name and "Connect" not in name:
        return VectorStoreUnavailable(
            f"Chroma at {where} did not answer in time ({name}); check the server, or raise memory.chroma_timeout_s"
        )
    if any(s in name for s in ("ConnectError", "ConnectionError", "Timeout", "RemoteProtocolError")) or any(
        s in text for s in ("Could not connect", "Connection refused", "connect to tenant")
    ):
        return VectorStoreUnavailable(f"Chroma at {where} is unreachable ({name}); start it or unset memory.chroma_url")
    return IndexError_(
        f"Chroma at {where} failed: {name}: {text.splitlines()[0] if text else ''}; "
        "run `memclaw memory reindex` to rebuild it from the Markdown"
    )


def _chroma_settings() -> Any:
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    from chromadb.config import Settings

    return Settings(anonymized_telemetry=False, allow_reset=True)


def import_client() -> None:
    """Import chromadb now (about a second): a benchmark pays it before its clock starts."""
    import chromadb  # noqa: F401


def release_embedded_below(root: Path) -> None:
    """`release_embedded` for every embedded store under `root` (e.g. a temp workspace about to be removed);
    stores elsewhere are left alone."""
    base = str(root.resolve())
    idents = list(_READERS)
    if "chromadb" in sys.modules:
        from chromadb.api.shared_system_client import SharedSystemClient

        idents += list(SharedSystemClient._identifier_to_system)
    for ident in idents:
        if ident == base or ident.startswith(base + os.sep):
            release_embedded(Path(ident))


def release_embedded(path: Path) -> None:
    """Stop and forget chromadb's process-wide system for the embedded store at `path`.

    chromadb keeps one system per persist directory for the whole process; removing the directory under a live
    system leaves it writing to deleted files or failing with "no such table". Call this before removing or
    replacing the directory, so the next PersistentClient starts from what is on disk. Engine readers of `path`
    are retired too."""
    _forget_readers(path)
    if "chromadb" not in sys.modules:
        return
    from chromadb.api.shared_system_client import SharedSystemClient

    for ident in _system_idents(path):
        system = SharedSystemClient._identifier_to_system.pop(ident, None)
        SharedSystemClient._identifier_to_refcount.pop(ident, None)
        if system is not None:
            try:
                system.stop()
            except Exception as e:  # a broken system is what we are discarding
                log.debug("stopping the Chroma system at %s: %s", ident, e)


def embedded_files_lost(path: Path) -> bool:
    """The embedded store at `path` has no database file (its folder was removed or emptied)."""
    return not (path / "chroma.sqlite3").exists()


def wipe_vectors(
    *, url: str | None, path: Path, scopes: Callable[[], Sequence[str]], store: Callable[[], VectorStore]
) -> bool:
    """Remove the index's vectors: on a Chroma server, the collections of `scopes()` (the server is shared); an
    embedded store is released and its folder at `path` removed. True when the opened store is gone with it (the
    caller opens a new one)."""
    if url:
        for scope in scopes():
            store().drop(scope)
        return False
    release_embedded(path)
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)
    return True


def probe_damage(
    *,
    url: str | None,
    store: Callable[[], VectorStore],
    scopes: Sequence[str],
    dimensions: Callable[[], int],
    probed: set[tuple[int, str]],
) -> None:
    """Read each scope's collection of the embedded store (a count and a 1-NN query, which loads the HNSW segment),
    so that damaged Chroma files raise VectorStoreCorrupted now. A Chroma server's files are the server's business:
    no probe. `probed` holds the (store, scope) pairs already read: once per opening."""
    if url:
        return
    probe = None
    opened = store()
    for scope in scopes:
        if (id(opened), scope) in probed:  # once per opening: later damage fails the write that meets it
            continue
        if opened.count(scope):
            if probe is None:
                probe = np.zeros(int(dimensions()), dtype=np.float32)
                probe[0] = 1.0
            opened.query(scope, probe, 1)
        probed.add((id(opened), scope))


def open_chroma_store(
    *,
    path: Path | None = None,
    url: str | None = None,
    headers: Mapping[str, str] | None = None,
    namespace: str,
    timeout_s: float = HTTP_TIMEOUT_S,
) -> ChromaStore:
    """Open the embedded store at `path`, or the Chroma server at `url` (one of the two; a server's requests are
    bounded by `timeout_s`).

    The chromadb client is made at first need: until then `query` and `warm` go through a `Reader` (an
    `HttpReader` for a server, an `EngineReader` for an embedded store that exists already), so a cold recall
    never imports the chromadb package."""
    if url:
        from urllib.parse import urlparse

        from memclaw.config import http_url_problem
        from memclaw.util.redact import redact_url

        problem = http_url_problem(url)
        if problem:
            raise UsageError(f"the Chroma server's URL {redact_url(url)!r} {problem}")
        parsed = urlparse(url)
        timeout = _http_timeout(timeout_s)
        _heartbeat(url, headers, timeout)
        return ChromaStore(
            None,
            namespace,
            where=redact_url(url),
            connect=lambda: _http_client(parsed, headers, timeout),
            reader=lambda: HttpReader(url, headers, timeout),
        )
    assert path is not None
    store_path = path
    if (path / "chroma.sqlite3").is_file() and not _client_running(path):
        return ChromaStore(
            None,
            namespace,
            where=str(path),
            connect=lambda: _persistent_client(store_path),
            reader=lambda: _engine_reader(store_path),
        )
    return ChromaStore(_persistent_client(path), namespace, where=str(path))


def _http_client(parsed: Any, headers: Mapping[str, str] | None, timeout: Any) -> Any:
    """chromadb's HttpClient for the server at `parsed` (a urlparse result), with bounded timeouts."""
    import chromadb

    url = parsed.geturl()
    try:
        client = chromadb.HttpClient(
            host=parsed.hostname,
            port=parsed.port or (443 if parsed.scheme == "https" else 8000),
            ssl=parsed.scheme == "https",
            headers=dict(headers or {}),
            settings=_chroma_settings(),
        )
    except Exception as e:
        raise _translate(e, url) from e
    _bound_http_timeouts(client, timeout)
    return client


def _persistent_client(path: Path) -> Any:
    """chromadb's PersistentClient for `path` (created if missing), its errors said as memclaw's."""
    import chromadb

    _forget_readers(path)  # the client's engine keeps its own copy of the index from now on
    if path.exists() and not path.is_dir():
        from memclaw.util.pathkind import odd_path_error

        raise odd_path_error(path, "folder", path.parent)
    try:
        path.mkdir(parents=True, exist_ok=True)
        return chromadb.PersistentClient(path=str(path), settings=_chroma_settings())
    except Exception as e:
        # chromadb registers the system for `path` before starting it: a failed start stays cached and every later
        # PersistentClient for `path` in this process would get the broken one. Forget it.
        release_embedded(path)
        if _is_permission(e):
            raise _permission_error(e, path) from e
        if _is_corruption(e):
            raise VectorStoreCorrupted(
                f"the Chroma store at {path} is damaged ({type(e).__name__}: {str(e).splitlines()[0]}); "
                "run `memclaw memory reindex` to rebuild it from the Markdown"
            ) from e
        raise IndexError_(f"cannot open the Chroma store at {path}: {type(e).__name__}: {e}") from e


def _http_timeout(timeout_s: float) -> Any:
    import httpx

    return httpx.Timeout(timeout_s, connect=min(HTTP_CONNECT_TIMEOUT_S, timeout_s))


def _heartbeat(url: str, headers: Mapping[str, str] | None, timeout: Any) -> None:
    """One bounded request before chromadb's client (whose constructor has no timeout) talks to the server."""
    import httpx

    try:
        httpx.get(url.rstrip("/") + "/api/v2/heartbeat", headers=dict(headers or {}), timeout=timeout)
    except httpx.HTTPError as e:
        raise _translate(e, url) from e


def _bound_http_timeouts(client: Any, timeout: Any) -> None:
    """Give chromadb's httpx session the timeouts it lacks."""
    import httpx

    session = getattr(getattr(client, "_server", None), "_session", None)
    if isinstance(session, httpx.Client):
        session.timeout = timeout
    else:  # another chromadb version: keep working, just without the bound
        log.debug("cannot bound the Chroma HTTP client's timeouts (no httpx session found)")

"""Opening a Chroma store: embedded (PersistentClient) or client/server (HttpClient) with bounded timeouts, made at
first need behind a read-only `Reader`; and releasing chromadb's process-wide system for an embedded store before
its folder is removed or replaced."""

from __future__ import annotations

import logging
import os
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memclaw.errors import DerivedIndexError, UsageError, VectorStoreCorrupted
from memclaw.store._failures import is_corruption, is_permission, permission_error, translate
from memclaw.store._readers import HttpReader, client_running, engine_reader, forget_readers, reader_keys, system_idents
from memclaw.store.base import VectorStore
from memclaw.store.chroma import ChromaStore
from memclaw.store.small import FOLDER as SMALL_FOLDER
from memclaw.store.small import SmallVectors

log = logging.getLogger(__name__)

# chromadb's HttpClient has no timeout at all (httpx timeout=None), and its constructor already talks to the
# server: an unreachable host or a frozen server would hang recall for ever. A heartbeat with timeouts goes first,
# then the client's session gets them. Connecting must be quick; a request may take longer (a 5000-vector upsert):
# memory.chroma_timeout_s, default HTTP_TIMEOUT_S.
HTTP_CONNECT_TIMEOUT_S = 3.0
HTTP_TIMEOUT_S = 30.0


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
    idents = reader_keys()
    if "chromadb" in sys.modules:
        from chromadb.api.shared_system_client import SharedSystemClient

        idents += list(SharedSystemClient._identifier_to_system)
    for ident in idents:
        if ident == base or ident.startswith(base + os.sep):
            release_embedded(Path(ident))


def release_embedded(path: Path) -> None:
    """Stop and forget chromadb's process-wide system for the embedded store at `path`.

    chromadb keeps one system per persist directory for the whole process.
    A live system whose directory was removed writes to deleted files or fails with "no such table".
    Call this before removing or replacing the directory, so the next PersistentClient reads what is on disk.
    Engine readers of `path` are retired too.
    """
    forget_readers(path)
    key = _release_key(path)
    _released[key] = _released.get(key, 0) + 1
    if "chromadb" not in sys.modules:
        return
    from chromadb.api.shared_system_client import SharedSystemClient

    for ident in system_idents(path):
        system = SharedSystemClient._identifier_to_system.pop(ident, None)
        SharedSystemClient._identifier_to_refcount.pop(ident, None)
        if system is not None:
            try:
                system.stop()
            # a broken system is what we are discarding
            except Exception as e:
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
        # once per opening: later damage fails the write that meets it
        if (id(opened), scope) in probed:
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
    small_limit: int = 0,
    small_ok: Callable[[str], bool] | None = None,
) -> ChromaStore:
    """Open the embedded store at `path`, or the Chroma server at `url` (one of the two; a server's requests are
    bounded by `timeout_s`).

    The chromadb client is made at first need: until then `query` and `warm` go through a `Reader` (an
    `HttpReader` for a server, an `EngineReader` for an embedded store that exists already), so a cold recall
    never imports the chromadb package. An embedded store keeps a scope for which `small_ok` holds in a small file
    of its own while it has at most `small_limit` vectors (memclaw.store.small)."""
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
    key = _release_key(path)
    # the release count its client was made at
    connected = [_released.get(key, 0)]

    def connect() -> Any:
        connected[0] = _released.get(key, 0)
        return _persistent_client(store_path)

    def stale() -> bool:
        return _released.get(key, 0) != connected[0]

    small = {"small": SmallVectors(path / SMALL_FOLDER), "small_limit": small_limit, "small_ok": small_ok}
    if (path / "chroma.sqlite3").is_file() and not client_running(path):
        return ChromaStore(
            None, namespace, where=str(path), connect=connect, reader=lambda: engine_reader(store_path), stale=stale,
            **small,
        )  # fmt: skip
    return ChromaStore(connect(), namespace, where=str(path), connect=connect, stale=stale, **small)


_released: dict[str, int] = {}
"""How many times each embedded store's chromadb system was released in this process: a store whose client was made
before the latest release connects again (its system was stopped under it)."""


def _release_key(path: Path) -> str:
    return os.path.abspath(path)


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
        raise translate(e, url) from e
    _bound_http_timeouts(client, timeout)
    return client


def _persistent_client(path: Path) -> Any:
    """chromadb's PersistentClient for `path` (created if missing), its errors said as memclaw's."""
    import chromadb

    # the client's engine keeps its own copy of the index from now on
    forget_readers(path)
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
        if is_permission(e):
            raise permission_error(e, path) from e
        if is_corruption(e):
            raise VectorStoreCorrupted(
                f"the Chroma store at {path} is damaged ({type(e).__name__}: {str(e).splitlines()[0]}); "
                "run `memclaw memory reindex` to rebuild it from the Markdown"
            ) from e
        raise DerivedIndexError(f"cannot open the Chroma store at {path}: {type(e).__name__}: {e}") from e


def _http_timeout(timeout_s: float) -> Any:
    import httpx

    return httpx.Timeout(timeout_s, connect=min(HTTP_CONNECT_TIMEOUT_S, timeout_s))


def _heartbeat(url: str, headers: Mapping[str, str] | None, timeout: Any) -> None:
    """One bounded request before chromadb's client (whose constructor has no timeout) talks to the server."""
    import httpx

    try:
        httpx.get(url.rstrip("/") + "/api/v2/heartbeat", headers=dict(headers or {}), timeout=timeout)
    except httpx.HTTPError as e:
        raise translate(e, url) from e


def _bound_http_timeouts(client: Any, timeout: Any) -> None:
    """Give chromadb's httpx session the timeouts it lacks."""
    import httpx

    session = getattr(getattr(client, "_server", None), "_session", None)
    if isinstance(session, httpx.Client):
        session.timeout = timeout
    # another chromadb version: keep working, just without the bound
    else:
        log.debug("cannot bound the Chroma HTTP client's timeouts (no httpx session found)")

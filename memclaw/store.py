"""The vector store seam: Chroma, embedded (PersistentClient) or client/server (HttpClient).

memclaw always supplies its own embeddings: collections are created with `embedding_function=None`, so Chroma
never loads (or downloads) its default ONNX model. One collection per scope keeps scopes structurally apart
(a metadata `where` filter costs ~177 ms at 100k vectors against ~4 ms unfiltered).
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from memclaw.errors import IndexError_, VectorStoreCorrupted, VectorStoreUnavailable

log = logging.getLogger(__name__)

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


def collection_name(namespace: str, scope: str) -> str:
    """A valid Chroma collection name (3-512 chars of [a-zA-Z0-9._-]) unique per workspace and scope."""
    digest = hashlib.sha256(f"{namespace}\x00{scope}".encode()).hexdigest()[:20]
    return f"memclaw-{digest}"


class ChromaStore:
    """VectorStore over a chromadb client. Build it with `open_chroma_store`."""

    def __init__(self, client: Any, namespace: str, *, where: str) -> None:
        self._client = client
        self._namespace = namespace
        self._where = where
        self._collections: dict[str, Any] = {}

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
        col = self._collection(scope, create=True)
        batch = _max_batch(self._client)
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
        col = self._collection(scope, create=False)
        if col is None or k <= 0:
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
        ids = res["ids"][0] if res["ids"] else []
        dists = res["distances"][0] if res["distances"] else []
        return [
            VectorHit(i, distance_to_similarity(float(d), SPACE)) for i, d in zip(ids, dists, strict=True)
        ]

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


def _translate(e: Exception, where: str) -> Exception:
    name = type(e).__name__
    text = str(e)
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
        return VectorStoreUnavailable(
            f"Chroma at {where} is unreachable ({name}); start it or unset memory.chroma_url"
        )
    return IndexError_(
        f"Chroma at {where} failed: {name}: {text.splitlines()[0] if text else ''}; "
        "run `memclaw memory reindex` to rebuild it from the Markdown"
    )


def _chroma_settings() -> Any:
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    from chromadb.config import Settings

    return Settings(anonymized_telemetry=False, allow_reset=True)


def release_embedded_below(root: Path) -> None:
    """`release_embedded` for every embedded store under `root` (e.g. a temp workspace about to be removed);
    stores elsewhere are left alone. Nothing to do if chromadb was never imported."""
    if "chromadb" not in sys.modules:
        return
    from chromadb.api.shared_system_client import SharedSystemClient

    base = str(root.resolve())
    for ident in list(SharedSystemClient._identifier_to_system):
        if ident == base or ident.startswith(base + os.sep):
            release_embedded(Path(ident))


def release_embedded(path: Path) -> None:
    """Stop and forget chromadb's process-wide system for the embedded store at `path`.

    chromadb keeps one system per persist directory for the whole process; removing the directory under a live
    system leaves it writing to deleted files or failing with "no such table". Call this before removing or
    replacing the directory, so the next PersistentClient starts from what is on disk."""
    from chromadb.api.shared_system_client import SharedSystemClient

    for ident in {str(path), str(path.resolve())}:
        system = SharedSystemClient._identifier_to_system.pop(ident, None)
        SharedSystemClient._identifier_to_refcount.pop(ident, None)
        if system is not None:
            try:
                system.stop()
            except Exception as e:  # a broken system is what we are discarding
                log.debug("stopping the Chroma system at %s: %s", ident, e)


def open_chroma_store(
    *,
    path: Path | None = None,
    url: str | None = None,
    headers: Mapping[str, str] | None = None,
    namespace: str,
    timeout_s: float = HTTP_TIMEOUT_S,
) -> ChromaStore:
    """Open the embedded store at `path`, or the Chroma server at `url` (one of the two; a server's requests are
    bounded by `timeout_s`)."""
    import chromadb

    if url:
        from urllib.parse import urlparse

        parsed = urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise IndexError_(f"memory.chroma_url {url!r} is not an http(s) URL, e.g. http://127.0.0.1:8000")
        timeout = _http_timeout(timeout_s)
        _heartbeat(url, headers, timeout)
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
        return ChromaStore(client, namespace, where=url)
    assert path is not None
    try:
        path.mkdir(parents=True, exist_ok=True)
        client = chromadb.PersistentClient(path=str(path), settings=_chroma_settings())
    except Exception as e:
        # chromadb registers the system for `path` before starting it: a failed start stays cached and every later
        # PersistentClient for `path` in this process would get the broken one. Forget it.
        release_embedded(path)
        if _is_corruption(e):
            raise VectorStoreCorrupted(
                f"the Chroma store at {path} is damaged ({type(e).__name__}: {str(e).splitlines()[0]}); "
                "run `memclaw memory reindex` to rebuild it from the Markdown"
            ) from e
        raise IndexError_(f"cannot open the Chroma store at {path}: {type(e).__name__}: {e}") from e
    return ChromaStore(client, namespace, where=str(path))


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

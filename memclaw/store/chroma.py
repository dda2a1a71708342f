"""`ChromaStore`: the `VectorStore` over a chromadb client (build it with `memclaw.store.clients.open_chroma_store`).

memclaw always supplies its own embeddings: collections are created with `embedding_function=None`, so Chroma
never loads (or downloads) its default ONNX model. One collection per scope keeps scopes structurally apart
(a metadata `where` filter costs ~177 ms at 100k vectors against ~4 ms unfiltered). Until the client is needed,
`query` and `warm` go through a read-only `Reader` (memclaw.store._readers).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from memclaw.errors import VectorStoreUnavailable
from memclaw.store._failures import is_not_found, translate
from memclaw.store._readers import Reader, warm_through
from memclaw.store.base import SPACE, VectorHit, collection_name, first_hits
from memclaw.store.small import SmallVectors

log = logging.getLogger(__name__)
_T = TypeVar("_T")

_GET_PAGE = 5000

EF_SEARCH = 200
"""The HNSW search breadth of memclaw's collections; Chroma's default is 100.

Why 200: docs/decisions/0015-the-search-breadth.md.
A collection made with another breadth takes this one the next time this process writes to it (`_collection`).
"""


class ChromaStore:
    """VectorStore over a chromadb client. Build it with `memclaw.store.clients.open_chroma_store`."""

    def __init__(
        self,
        client: Any,
        namespace: str,
        *,
        where: str,
        connect: Callable[[], Any] | None = None,
        reader: Callable[[], Reader | None] | None = None,
        stale: Callable[[], bool] | None = None,
        small: SmallVectors | None = None,
        small_limit: int = 0,
        small_ok: Callable[[str], bool] | None = None,
    ) -> None:
        """Open over `client`, or with `client` None, over the one `connect` makes at first need.

        The `reader` makes the read-only `Reader` that serves `query` and `warm` until the client is needed.
        The `stale` check turns true once another service of this process released the store under the client.
        The next use then connects again; `memclaw.store.clients.release_embedded` is that release.
        The `small` store keeps up to `small_limit` vectors of a scope for which `small_ok` holds.
        """
        self._client_obj = client
        self._stale = stale
        self._connect = connect
        self._make_reader = reader
        self._reader: Reader | None = None
        self._connect_lock = threading.Lock()
        self._namespace = namespace
        self._where = where
        self._collections: dict[str, Any] = {}
        self._small = small if small_limit > 0 else None
        self._small_limit = small_limit
        self._small_ok = small_ok or (lambda _scope: False)

    def _small_name(self, scope: str) -> str | None:
        """The scope's small file name when its vectors live there (memclaw.store.small), else None."""
        if self._small is None:
            return None
        name = collection_name(self._namespace, scope)
        return name if self._small.exists(name) else None

    def _small_for_write(self, scope: str) -> str | None:
        """The small file a write to `scope` goes to: its own, or a new one for a scope that may have one and has
        no collection yet (a collection made before small scopes existed keeps its vectors)."""
        if self._small is None:
            return None
        name = self._small_name(scope)
        if name is not None or not self._small_ok(scope):
            return name
        return collection_name(self._namespace, scope) if self._collection(scope, create=False) is None else None

    def small_entries(self, scope: str) -> tuple[list[str], np.ndarray, list[Any], list[Any]] | None:
        """Every vector of a small scope (ids, embeddings, metadatas, documents); None for one in a collection."""
        name = self._small_name(scope)
        return None if name is None or self._small is None else self._small.entries(name)

    @property
    def _client(self) -> Any:
        self._drop_if_stale()
        if self._client_obj is None:
            with self._connect_lock:
                if self._client_obj is None:
                    assert self._connect is not None
                    # from now on this process reads through the client
                    self._make_reader = None
                    self._reader = None
                    self._client_obj = self._connect()
        return self._client_obj

    def _drop_if_stale(self) -> None:
        """Forget a client (and its collections) whose store was released under it: the next use connects again."""
        if self._client_obj is not None and self._stale is not None and self._connect is not None and self._stale():
            with self._connect_lock:
                log.debug("the Chroma store at %s was released under this client; connecting again", self._where)
                self._client_obj = None
                self._collections.clear()

    def _live_reader(self) -> Reader | None:
        """The reader while it may serve reads.

        It stops serving once this store opened the chromadb client.
        An engine reader also stops once another store of this process opened a client on the same files.
        The client's engine keeps its own copy of the index, which the reader would no longer match.
        """
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
            # a server that does not answer would not answer the client either: one timeout, not two
            raise
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
        self._drop_if_stale()
        col = self._collections.get(scope)
        if col is not None:
            return col
        name = collection_name(self._namespace, scope)
        try:
            if create:
                col = self._client.get_or_create_collection(
                    name,
                    embedding_function=None,
                    configuration={"hnsw": {"space": SPACE, "ef_search": EF_SEARCH}},
                    metadata={"memclaw_scope": scope, "memclaw_namespace": self._namespace},
                )
                set_search_breadth(col)
            else:
                col = self._client.get_collection(name, embedding_function=None)
        # chromadb raises NotFoundError / ValueError variants across versions
        except Exception as e:
            if not create and is_not_found(e):
                return None
            raise translate(e, self._where) from e
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
        small = self._small_for_write(scope)
        if small is not None and self._small is not None:
            n = self._small.upsert(small, ids, embeddings, metadatas, documents)
            # outgrown: the scope moves into a collection of its own
            if n > self._small_limit:
                all_ids, embs, metas, docs = self._small.entries(small)
                self._chroma_upsert(scope, all_ids, embs, [m or {} for m in metas], [d or "" for d in docs])
                self._small.drop(small)
            return
        self._chroma_upsert(scope, ids, embeddings, metadatas, documents)

    def _chroma_upsert(
        self,
        scope: str,
        ids: Sequence[str],
        embeddings: np.ndarray,
        metadatas: Sequence[Mapping[str, Any]],
        documents: Sequence[str] | None,
    ) -> None:
        from memclaw.util.batches import even_chunk

        col = self._collection(scope, create=True)
        # equal batches: see memclaw.index._vector_writer
        batch = even_chunk(len(ids), _max_batch(self._client))
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
            raise translate(e, self._where) from e

    def delete(self, scope: str, ids: Sequence[str]) -> None:
        if not ids:
            return
        small = self._small_name(scope)
        if small is not None and self._small is not None:
            self._small.delete(small, ids)
            return
        col = self._collection(scope, create=False)
        if col is None:
            return
        try:
            for start in range(0, len(ids), _GET_PAGE):
                col.delete(ids=list(ids[start : start + _GET_PAGE]))
        except Exception as e:
            raise translate(e, self._where) from e

    def warm(self, scope: str) -> None:
        """Make Chroma read the scope's vectors now (its first query on a 100k collection takes ~0.5 s)."""
        if self._small_name(scope) is not None:
            return
        if self._via_reader(scope, warm_through) is not None:
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
            raise translate(e, self._where) from e

    def query(self, scope: str, embedding: np.ndarray, k: int) -> list[VectorHit]:
        if k <= 0:
            return []
        small = self._small_name(scope)
        if small is not None and self._small is not None:
            return self._small.query(small, embedding, k)
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
            if is_not_found(e):
                self._collections.pop(scope, None)
                return []
            raise translate(e, self._where) from e
        return first_hits(res["ids"], res["distances"], SPACE)

    def ids(self, scope: str) -> set[str]:
        return set(self._get_all(scope, with_documents=False))

    def texts(self, scope: str) -> dict[str, str]:
        """Every id in the scope with its stored document text."""
        return self._get_all(scope, with_documents=True)

    def _get_all(self, scope: str, *, with_documents: bool) -> dict[str, str]:
        small = self._small_name(scope)
        if small is not None and self._small is not None:
            return self._small.texts(small)
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
            if is_not_found(e):
                self._collections.pop(scope, None)
                return {}
            raise translate(e, self._where) from e

    def count(self, scope: str) -> int:
        small = self._small_name(scope)
        if small is not None and self._small is not None:
            return self._small.count(small)
        col = self._collection(scope, create=False)
        if col is None:
            return 0
        try:
            return int(col.count())
        except Exception as e:
            raise translate(e, self._where) from e

    def drop(self, scope: str) -> None:
        if self._small is not None:
            self._small.drop(collection_name(self._namespace, scope))
        self._collections.pop(scope, None)
        try:
            self._client.delete_collection(collection_name(self._namespace, scope))
        except Exception as e:
            if not is_not_found(e):
                raise translate(e, self._where) from e


def _max_batch(client: Any) -> int:
    try:
        return max(1, min(int(client.get_max_batch_size()), 5000))
    except Exception:
        return 1000


def search_breadth(col: Any) -> int | None:
    """A collection's HNSW search breadth (`ef_search`) as Chroma records it, if it says."""
    hnsw = (getattr(col, "configuration", None) or {}).get("hnsw") or {}
    ef = hnsw.get("ef_search")
    return int(ef) if ef is not None else None


def set_search_breadth(col: Any) -> None:
    """Give a collection made with another search breadth (before memclaw set one) EF_SEARCH. Chroma reads it when it
    loads the collection's graph, so a process that already searched it keeps the old breadth until it restarts."""
    ef = search_breadth(col)
    if ef is None or ef == EF_SEARCH:
        return
    try:
        col.modify(configuration={"hnsw": {"ef_search": EF_SEARCH}})
    # e.g. a server that cannot change it: the collection is searched as it is
    except Exception as e:
        log.info("collection %s keeps its HNSW search breadth %d (%s: %s)", col.name, ef, type(e).__name__, e)
        return
    log.info("collection %s: HNSW search breadth %d -> %d", col.name, ef, EF_SEARCH)

"""`memclaw memory migrate --to URL`: copy an embedded index to a Chroma server.

Vectors are copied as they are (no re-embedding); a scope whose embedded collection is missing or unreadable is
rebuilt on the server from the Markdown instead. Afterwards the index manifest names that server, so setting
`memory.chroma_url` to the same URL uses the copy without a rebuild.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from memclaw.config import Config
from memclaw.errors import DerivedIndexError, UsageError, VectorStoreUnavailable
from memclaw.index import layout as ix
from memclaw.workspace import Workspace

_PAGE = 2000


def migrate_to_server(ws: Workspace, cfg: Config, url: str, *, console: Any = None) -> int:
    from memclaw.config import http_url_problem
    from memclaw.service.facade import MemoryService
    from memclaw.store.chroma import ChromaStore
    from memclaw.store.clients import open_chroma_store
    from memclaw.util.redact import redact_url

    problem = http_url_problem(url)
    if problem:
        raise UsageError(f"--to {redact_url(url)!r} {problem}")
    local = MemoryService(ws, cfg.model_copy(update={"memory": cfg.memory.model_copy(update={"chroma_url": None})}))
    local.sync()
    src = local.store
    assert isinstance(src, ChromaStore)
    headers = {k: v.get_secret_value() for k, v in cfg.memory.chroma_headers.items()}
    try:
        dst = open_chroma_store(
            url=url, headers=headers, namespace=local.namespace, timeout_s=cfg.memory.chroma_timeout_s
        )
        copied = _copy_all(ws, cfg, url, local, src, dst, console)
    # its fix names memory.chroma_url, the config's server: here it is --to's
    except VectorStoreUnavailable as e:
        raise VectorStoreUnavailable(
            f"the server at --to {redact_url(url)} is unreachable or did not answer; start it there, or check the "
            f"address ({str(e).split('; ')[0]})"
        ) from e
    manifest = ix.read_manifest(local.layout) or {}
    manifest["store"] = ix.store_id(url)
    ix.write_manifest(local.layout, manifest)
    return copied


def _copy_all(ws: Workspace, cfg: Config, url: str, local: Any, src: Any, dst: Any, console: Any) -> int:
    """Every scope of the embedded index copied to `dst` (a scope whose copy is unreadable rebuilt on the server)."""
    from memclaw.service.facade import MemoryService

    copied = 0
    for scope in local.scopes.known_scopes_on_disk():
        dst.drop(scope)
        try:
            copied += _copy_scope(src, dst, scope)
        except DerivedIndexError:
            if console is not None:
                from memclaw.util.richtext import warning

                console.print(warning(f"scope {scope}: embedded copy unreadable; rebuilding on the server"))
            server_cfg = cfg.model_copy(update={"memory": cfg.memory.model_copy(update={"chroma_url": url})})
            remote = MemoryService(ws, server_cfg, embedder=local.embedder)
            copied += sum(r.added for r in remote.sync([scope], full=False))
    return copied


def _copy_scope(src: Any, dst: Any, scope: str) -> int:
    # a small scope's vectors (memclaw.store.small): all at once, few
    small = src.small_entries(scope)
    if small is not None:
        ids, embs, metas, docs = small
        if ids:
            dst.upsert(scope, ids, embs, [m or {} for m in metas], [d or "" for d in docs])
        return len(ids)
    col = src._collection(scope, create=False)
    if col is None:
        return 0
    n = 0
    offset = 0
    while True:
        page = col.get(include=["embeddings", "metadatas", "documents"], limit=_PAGE, offset=offset)
        ids = page["ids"]
        if ids:
            dst.upsert(
                scope, ids, np.asarray(page["embeddings"], dtype=np.float32), page["metadatas"], page["documents"]
            )
            n += len(ids)
        if len(ids) < _PAGE:
            return n
        offset += _PAGE

"""What `memclaw memory stats` shows: per scope, how many memories (facts, history entries, archived turns) the
Markdown and the index hold and whether the index is fresh; the store, the model and whether the index must be
rebuilt (URLs with their credentials hidden)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memclaw.index import layout as ix
from memclaw.util.redact import redact_url

if TYPE_CHECKING:
    from memclaw.config import Config
    from memclaw.index.scopes import ScopeCache


def index_stats(scopes: ScopeCache, config: Config, index_mismatch: Callable[[], str | None]) -> dict[str, Any]:
    """The stats of the index in `scopes`; `index_mismatch()` says why it must be rebuilt, if it must."""
    layout = scopes.layout
    per_scope = {}
    for scope in scopes.known_scopes_on_disk():
        units = scopes.parse(scope)
        sc = scopes.get(scope)
        counts: dict[str, int] = defaultdict(int)
        for u in units:
            counts[u.kind] += 1
        per_scope[scope] = {
            "facts": counts["fact"],
            "history": counts["history"],
            "archive": counts["archive"],  # archived turns
            "indexed": len(sc.state.units) if sc else 0,
            "fresh": bool(sc and sc.state.signatures == scopes.signatures(scope) and not sc.state.pending),
            "vectors_pending": len(sc.state.pending) if sc else 0,
        }
    manifest = ix.read_manifest(layout) or {}
    rebuild = index_mismatch()
    if rebuild is not None:
        for s in per_scope.values():
            s["fresh"] = False
    url = config.memory.chroma_url
    return {
        "workspace": str(scopes.workspace.root),
        "index_dir": str(layout.root),
        "store": redact_url(url) if url else str(layout.chroma_dir),
        "index_store": redact_url(manifest["store"]) if manifest.get("store") else None,  # an older manifest's
        "rebuild": redact_url(rebuild) if rebuild else None,  # URL may hold credentials
        "model": config.embeddings.model,
        "embedder_fingerprint": manifest.get("embedder"),
        "tokenizer_fingerprint": manifest.get("tokenizer"),
        "scopes": per_scope,
    }

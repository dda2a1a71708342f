"""The index's identity: which embedder, tokenizer, store and workspace it was built for (its manifest), whether it
can serve the current settings, and when it must be rebuilt instead."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memclaw.errors import DerivedIndexError, EmbeddingUnavailable
from memclaw.index import layout as ix
from memclaw.util.text import counted

if TYPE_CHECKING:
    from memclaw.config import Config
    from memclaw.embedding.base import Embedder
    from memclaw.index.tokenizer import Tokenizer

log = logging.getLogger(__name__)


def what_broke(e: Exception) -> str:
    """An error's message without its 'run ... to fix it' advice (for warnings about a repair memclaw makes)."""
    return str(e).split("; run `memclaw memory reindex`")[0]


class IndexIdentity:
    """The manifest of one workspace's index and the decisions it drives: rebuild (and why), a copied workspace's
    own namespace on a shared Chroma server, an embedding model change deferred until the new model embeds."""

    def __init__(
        self,
        layout: ix.IndexLayout,
        workspace_root: Path,
        config: Config,
        tokenizer: Tokenizer,
        embedder: Callable[[], Embedder],
        loaded_embedder: Callable[[], Embedder | None],
    ) -> None:
        self.layout = layout
        self.workspace_root = workspace_root
        self.config = config
        self.tokenizer = tokenizer
        # loads it if need be
        self._embedder = embedder
        # the embedder, if it was given or loaded
        self._loaded_embedder = loaded_embedder
        self.checked = False
        # the manifest was found to serve these settings (no rebuild needed)
        self.ok = False
        # The new embedding model cannot embed yet (no key, provider down): the index keeps the old model's identity
        # and vectors, new vectors wait (pending), recall uses BM25 alone. Cleared once it can.
        self.deferred: EmbeddingUnavailable | None = None
        self._namespace: str | None = None

    @property
    def namespace(self) -> str:
        """The workspace's key in the vector store. Recorded in the index manifest, so a moved workspace keeps its
        vectors; a new index takes it from the workspace's path."""
        if self._namespace is None:
            ns = (ix.read_manifest(self.layout) or {}).get("namespace")
            self._namespace = ns if isinstance(ns, str) and ns else self.path_namespace()
        return self._namespace

    @property
    def chroma_url(self) -> str | None:
        return self.config.memory.chroma_url

    def path_namespace(self) -> str:
        return hashlib.sha256(str(self.workspace_root.resolve()).encode()).hexdigest()[:16]

    def embedder_fingerprint(self) -> str:
        """The configured embedder's fingerprint, without loading the model when the config names it."""
        if self._loaded_embedder() is None:
            from memclaw.embedding.load import fingerprint_for

            fp = fingerprint_for(self.config.embeddings)
            if fp is not None:
                return fp
        return self._embedder().fingerprint

    def fingerprints(self) -> dict[str, Any]:
        return {
            "format": ix.FORMAT_VERSION,
            "embedder": self.embedder_fingerprint(),
            "tokenizer": self.tokenizer.fingerprint,
            "store": ix.store_id(self.chroma_url),
            "agent_reply_vectors": self.config.memory.agent_reply_vectors,
        }

    def mismatch(self, have: dict | None, want: dict[str, Any]) -> tuple[str | None, bool]:
        """(why the index in `have` cannot serve `want`, or None; whether this workspace is a copy of one that
        still uses the same Chroma server, which needs its own namespace there)."""
        reason = ix.rebuild_reason(have, want)
        was = (have or {}).get("workspace")
        if have is not None and was is None and have.get("namespace") not in (None, self.path_namespace()):
            # an older manifest built elsewhere: moved or copied, it cannot tell; keep the copy apart
            was = ""
        copied = (
            bool(self.chroma_url)
            and isinstance(was, str)
            and was != str(self.workspace_root.resolve())
            and (not was or Path(was).is_dir())
        )
        if copied:
            why = "the workspace was copied (the copy gets its own vectors on the Chroma server)"
            reason = f"{reason}; {why}" if reason else why
        return reason, copied

    def index_mismatch(self) -> str | None:
        """Why the index must be rebuilt before it can serve the current settings ("the store changed", "the
        embedding model changed"...), or None."""
        if self.checked or self.ok:
            return None
        reason, _ = self.mismatch(ix.read_manifest(self.layout), self.fingerprints())
        self.ok = reason is None
        return reason

    def check(
        self,
        *,
        count_units: Callable[[], int],
        wipe: Callable[[], None],
        on_copied: Callable[[], None],
    ) -> None:
        """Full rebuild (`wipe`) when the embedder, tokenizer or store changed (said in one line: why, and how many
        memories that embeds, `count_units`), or the manifest is missing/unreadable. A moved workspace keeps its
        index. The index changes embedding model only once the new one embeds (`cannot_embed`); until then the old
        identity and vectors stay, new vectors are pending and recall uses BM25 alone. A copy on a shared server
        gets its own namespace (`on_copied` first lets go of the original's store)."""
        if self.checked:
            return
        want = self.fingerprints()
        have = ix.read_manifest(self.layout)
        reason, copied = self.mismatch(have, want)
        if have is not None and have.get("embedder") != want["embedder"]:
            from memclaw.embedding.provider import cannot_embed

            self.deferred = cannot_embed(self._embedder())
            # the old index stays as it is until the new model embeds
            if self.deferred is not None:
                log.info("%s, but %s: the index keeps the previous model until then", reason, self.deferred)
                return
        if copied:
            on_copied()
            # the original keeps its collections
            self._namespace = self.path_namespace()
        if have is None or reason:
            if reason:
                n = count_units()
                log.warning("rebuilding the index: %s; %s to embed", reason, counted(n, "memory"))
            wipe()
        else:
            ix.drop_legacy_state(self.layout)
        manifest = {**want, "namespace": self.namespace, "workspace": str(self.workspace_root.resolve())}
        if have is not None and not reason and "dimensions" in have:
            manifest["dimensions"] = have["dimensions"]
        if manifest != have:
            ix.write_manifest(self.layout, manifest)
        self.checked = True

    def wipe_derived(self) -> None:
        """Remove every scope's state and the recorded vector size (the vectors themselves: `store.chroma`)."""
        ix.remove_tree(self.layout.root / "scopes")
        manifest = ix.read_manifest(self.layout)
        # the next vectors say it again
        if manifest is not None and "dimensions" in manifest:
            del manifest["dimensions"]
            ix.write_manifest(self.layout, manifest)

    def dimensions(self) -> int | None:
        """The vectors' size recorded in the manifest, if any."""
        return (ix.read_manifest(self.layout) or {}).get("dimensions")

    def record_dimensions(self, dim: int) -> None:
        """The vectors' size, recorded in the manifest from the first ones embedded (a provider's model tells it
        only in a response). Vectors of another size cannot join the index."""
        manifest = ix.read_manifest(self.layout) or {}
        had = manifest.get("dimensions")
        if had == dim:
            return
        if had is not None:
            raise DerivedIndexError(
                f"the embedding model now returns {dim} dimensions, the index holds {had}; "
                "run `memclaw memory reindex` to rebuild it"
            )
        ix.write_manifest(self.layout, {**manifest, "dimensions": dim})

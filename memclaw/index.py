"""The derived index of one workspace: per scope, a Chroma collection, a BM25 index and a unit table.

Everything here is derived from the Markdown and rebuildable at any time. Sync is incremental: only new,
edited or deleted units are embedded or removed (content hashes). The index records the embedder and
tokenizer fingerprints it was built with; a change of either triggers a full rebuild. A missing, corrupted
or half-written index is detected and rebuilt from the Markdown with a warning, losing nothing.

On-disk layout under the index dir:
    manifest.json               format version, embedder + tokenizer fingerprints, the store it was built in,
                                the embedding dimensions, the namespace (the workspace's key in the store, kept
                                when the workspace is moved) and the workspace path it was last used at
    chroma/                     the embedded Chroma store (unless memory.chroma_url is set)
    scopes/<key>/state.pkl      the scope's unit table and the file signatures it was built from
    scopes/<key>/lexical.bm25   the scope's BM25 index
    scopes/<key>/DIRTY          present while a sync is writing; forces a reconcile after a crash
    sync.lock                   serialises writers across processes
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import pickle
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from memclaw.errors import IndexError_, MemclawError
from memclaw.fsutil import replace_atomically
from memclaw.incremental import FileMark
from memclaw.unittable import UnitTable

log = logging.getLogger(__name__)

FORMAT_VERSION = 2  # 2: a long unit also has a head vector (memclaw.passages)
_STATE_MAGIC = b"MEMCLAW-STATE-2\n"  # 2: columnar unit table + file marks
_OLD_STATE_MAGICS = (b"MEMCLAW-STATE-1\n",)

Progress = Callable[[int], None]


@dataclass
class SyncReport:
    scope: str
    added: int = 0
    updated: int = 0
    removed: int = 0
    unchanged: int = 0
    rebuilt: bool = False
    pending: int = 0  # units whose vectors wait for the embedding provider (keyword search has them already)
    warnings: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed or self.rebuilt)


@dataclass
class ScopeState:
    """What the index holds for one scope: the units, the file signatures they were parsed from, and per file
    the mark an append-only parse resumes from (memclaw.incremental)."""

    scope: str
    signatures: dict[str, tuple | None]
    units: UnitTable
    links: dict[str, list[str]] = field(default_factory=dict)
    marks: dict[str, FileMark] = field(default_factory=dict)
    lexical_digest: bytes | None = None  # bm25.file_digest of the BM25 index saved with this table
    pending: set[str] = field(default_factory=set)  # unit ids without vectors yet (the provider was down)

    @property
    def hashes(self) -> dict[str, str]:
        return self.units.hashes()


def scope_key(scope: str) -> str:
    return hashlib.sha256(scope.encode("utf-8")).hexdigest()[:16]


class IndexLayout:
    """Paths of the index directory."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    @property
    def chroma_dir(self) -> Path:
        return self.root / "chroma"

    @property
    def lock_file(self) -> Path:
        return self.root / "sync.lock"

    def scope_dir(self, scope: str) -> Path:
        return self.root / "scopes" / scope_key(scope)

    def state_file(self, scope: str) -> Path:
        return self.scope_dir(scope) / "state.pkl"

    def lexical_file(self, scope: str) -> Path:
        return self.scope_dir(scope) / "lexical.bm25"

    def dirty_file(self, scope: str) -> Path:
        return self.scope_dir(scope) / "DIRTY"

    @contextlib.contextmanager
    def writer_lock(self, *, wait: bool = True) -> Iterator[bool]:
        """Exclusive across processes (fcntl) for the duration of a sync. Yields whether it was acquired: with
        `wait=False` it yields False at once when another process holds it."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            f = open(self.lock_file, "a+")  # noqa: SIM115 - closed by the with below
        except OSError as e:
            raise IndexError_(
                f"cannot write the index at {self.root}: {e.strerror or e}; fix its permissions, or delete the "
                "folder (it is rebuilt from the Markdown)"
            ) from e
        with f:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def save_state(path: Path, state: ScopeState) -> None:
    """Plain builtins only (no memclaw class is pickled), behind a magic line and a sha256 of the body."""
    payload = {
        "scope": state.scope,
        "signatures": state.signatures,
        "units": state.units.to_columns(),
        "links": state.links,
        "marks": {src: m.to_tuple() for src, m in state.marks.items()},
        "lexical_digest": state.lexical_digest,
        "pending": sorted(state.pending),
    }
    body = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    digest = hashlib.sha256(body).digest()
    replace_atomically(path, _STATE_MAGIC + digest + body)


def load_state(path: Path) -> ScopeState | None:
    """The saved state, None if absent. Raises IndexError_ if it is corrupted or from another state format
    (the caller rebuilds the scope from the Markdown)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except PermissionError:
        raise  # not damage: rebuilding would meet it too (said in one line by the CLI)
    except OSError as e:
        raise IndexError_(f"cannot read index state {path}: {e.strerror}") from e
    n = len(_STATE_MAGIC)
    if raw.startswith(_OLD_STATE_MAGICS):
        raise IndexError_(f"index state {path} has an older format")
    if not raw.startswith(_STATE_MAGIC) or len(raw) < n + 32:
        raise IndexError_(f"index state {path} is corrupted (bad header)")
    body = memoryview(raw)[n + 32 :]
    if hashlib.sha256(body).digest() != raw[n : n + 32]:
        raise IndexError_(f"index state {path} is corrupted (checksum mismatch)")
    try:
        p = pickle.loads(body)
        state = ScopeState(
            p["scope"],
            p["signatures"],
            UnitTable.from_columns(p["units"]),
            p["links"],
            {src: FileMark.from_tuple(m) for src, m in p["marks"].items()},
            p["lexical_digest"],
            set(p.get("pending", ())),
        )
        if not isinstance(state.lexical_digest, bytes | None):
            raise ValueError("unexpected content")
        if not (isinstance(state.scope, str) and isinstance(state.signatures, dict) and isinstance(state.links, dict)):
            raise ValueError("unexpected content")
    except Exception as e:
        raise IndexError_(f"index state {path} is corrupted ({type(e).__name__})") from e
    return state


def read_manifest(layout: IndexLayout) -> dict | None:
    try:
        data = json.loads(layout.manifest.read_text("utf-8"))
    except FileNotFoundError:
        return None
    except PermissionError:
        raise  # not damage: rebuilding would meet it too (said in one line by the CLI)
    except (OSError, ValueError) as e:
        log.warning("index manifest %s is unreadable (%s); rebuilding the index", layout.manifest, e)
        return None
    return data if isinstance(data, dict) else None


# What a difference in each manifest key means, in words (the one line a rebuild is announced with).
_CHANGE_WORDS = {
    "format": "the index format changed",
    "embedder": "the embedding model changed",
    "tokenizer": "the tokenizer changed",
    "store": "the store changed",
}


def store_id(chroma_url: str | None) -> str:
    """Which vector store an index lives in: "embedded" or "server <url>" (without the URL's credentials: they are
    no part of which server it is, and the manifest is shown by `memory stats`)."""
    from memclaw.redact import redact_url

    return f"server {redact_url(chroma_url).rstrip('/')}" if chroma_url else "embedded"


def rebuild_reason(have: dict | None, want: dict) -> str | None:
    """Why an index built with `have` cannot serve settings `want`, in words, or None when it can (or when there is
    no index yet: building one is not a rebuild)."""
    if have is None:
        return None
    reasons = []
    for key, words in _CHANGE_WORDS.items():
        if key in want and have.get(key) != want[key]:
            before = have.get(key)
            reasons.append(f"{words} ({before} -> {want[key]})" if key in ("store", "embedder") else words)
    return "; ".join(reasons) or None


def write_manifest(layout: IndexLayout, data: dict) -> None:
    replace_atomically(layout.manifest, json.dumps(data, indent=2, sort_keys=True).encode())


def remove_tree(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)


def embed_texts(embedder, texts: list[str], batch_size: int, progress: Progress | None) -> np.ndarray:
    """Batch-encode, turning any failure into one EmbeddingError-style message."""
    try:
        return embedder.encode(texts, batch_size=batch_size, progress=progress)
    except MemclawError:
        raise
    except Exception as e:
        raise IndexError_(f"embedding {len(texts)} memories failed: {type(e).__name__}: {e}") from e

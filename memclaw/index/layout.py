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
    scopes/<key>/state.sqlite3  the scope's unit table, the file signatures and marks it was built from and its
                                BM25 index (memclaw.index.scope_state: SQLite + JSON + raw arrays, nothing that runs
                                code)
    scopes/<key>/DIRTY          present while a sync is writing; forces a reconcile after a crash
    sync.lock                   serialises writers across processes
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from memclaw.errors import IndexError_, MemclawError
from memclaw.index.unittable import UnitTable
from memclaw.markdown.incremental import FileMark
from memclaw.util.files import replace_atomically
from memclaw.util.safepath import NotRegularFileError, read_regular
from memclaw.util.text import counted

log = logging.getLogger(__name__)

FORMAT_VERSION = 4  # 2: a long unit also has a head vector (memclaw.index.passages); 3: facts read without their cid;
# 4: a short archived turn embedded with the turns beside it
STATE_FILE = "state.sqlite3"  # a scope's state (memclaw.index.scope_state)
LEGACY_STATE_FILES = ("state.pkl", "lexical.bm25")
"""What a scope's state was kept in before memclaw.index.scope_state: never read (a pickle can run code), removed
once."""

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
    the mark an append-only parse resumes from (memclaw.markdown.incremental)."""

    scope: str
    signatures: dict[str, tuple | None]
    units: UnitTable
    links: dict[str, list[str]] = field(default_factory=dict)
    marks: dict[str, FileMark] = field(default_factory=dict)
    pending: set[str] = field(default_factory=set)  # unit ids without vectors yet (the provider was down)
    # per file, the keys of the parse notes already said as warnings (memclaw.index.sync: each is said once)
    warned: dict[str, list[str]] = field(default_factory=dict)

    @property
    def hashes(self) -> dict[str, str]:
        return self.units.hashes()


def scope_key(scope: str) -> str:
    return hashlib.sha256(scope.encode("utf-8")).hexdigest()[:16]


OWN_NAMES = frozenset({"manifest.json", "chroma", "scopes", "sync.lock"})
"""What memclaw makes at the top of an index folder."""
_OWN_TEMP = re.compile(r"\.manifest\.json\..*\.tmp\Z")


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

    def check_ours(self) -> None:
        """Raise ConfigError (exit 2) if the index folder exists, is not empty and was not made by memclaw: no
        manifest.json in it, and something beside the names memclaw gives (`memory.index_dir = "/etc"` must not
        have memclaw write its files among the system's). A missing, empty or memclaw-made folder passes."""
        from memclaw.errors import ConfigError

        try:
            names = os.listdir(self.root)
        except (FileNotFoundError, NotADirectoryError):
            return  # (made when needed; a file there is said by index.paths.check_layout)
        except OSError:
            return  # (said in one line where it is first read or written)
        if not names or os.path.lexists(self.manifest):
            return
        foreign = sorted(n for n in names if n not in OWN_NAMES and not _OWN_TEMP.match(n))
        if foreign:
            raise ConfigError(
                f"the index folder {self.root} holds files memclaw did not make ({', '.join(foreign[:3])}"
                f"{', ...' if len(foreign) > 3 else ''}): memclaw writes its index only in a new or empty folder, or "
                "one it made; set memory.index_dir to such a folder"
            )

    def state_file(self, scope: str) -> Path:
        return self.scope_dir(scope) / STATE_FILE

    def legacy_files(self) -> list[Path]:
        """State files of an older memclaw in any scope folder (see LEGACY_STATE_FILES)."""
        root = self.root / "scopes"
        if not root.is_dir():
            return []
        return [f for d in sorted(root.iterdir()) if d.is_dir() for f in map(d.joinpath, LEGACY_STATE_FILES)
                if os.path.lexists(f)]  # fmt: skip

    def dirty_file(self, scope: str) -> Path:
        return self.scope_dir(scope) / "DIRTY"

    @contextlib.contextmanager
    def writer_lock(self, *, wait: bool = True) -> Iterator[bool]:
        """Exclusive across processes (fcntl) for the duration of a sync. Yields whether it was acquired: with
        `wait=False` it yields False at once when another process holds it."""
        from memclaw.errors import rebuild_hint
        from memclaw.index.paths import check_layout

        check_layout(self, embedded=False)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            f = open(self.lock_file, "a+")  # noqa: SIM115 - closed by the with below
        except OSError as e:
            why = f"{e.strerror or e}; fix its permissions{rebuild_hint(self.root)}"
            raise IndexError_(f"cannot write the index at {self.root}: {why}") from e
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


def drop_legacy_state(layout: IndexLayout) -> None:
    """Remove the state files of an older memclaw (a pickle, which can run code: never read); each scope is then
    rebuilt from the Markdown against the vectors the store holds (nothing is embedded again). Said once."""
    legacy = [f for f in layout.legacy_files() if f.is_file() or f.is_symlink()]
    if not legacy:
        return
    log.warning(
        "the index in %s has an older format (its state.pkl files are never read); rebuilding its state from the "
        "Markdown once, keeping the vectors",
        layout.root,
    )
    for f in legacy:
        f.unlink(missing_ok=True)


def read_manifest(layout: IndexLayout) -> dict | None:
    try:
        data = json.loads(read_regular(layout.manifest, follow=True).decode("utf-8"))
    except (FileNotFoundError, NotADirectoryError):  # (no index folder yet, or a file there: said by check_layout)
        return None
    except (IsADirectoryError, NotRegularFileError) as e:
        from memclaw.util.pathkind import odd_path_error

        raise odd_path_error(layout.manifest, "file", layout.root) from e
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
    from memclaw.util.redact import redact_url

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
        raise IndexError_(f"embedding {counted(len(texts), 'memory')} failed: {type(e).__name__}: {e}") from e

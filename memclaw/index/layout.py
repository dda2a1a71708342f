"""The index folder of one workspace: its paths, what may stand at them, its writer lock and its manifest.

The index is derived from the Markdown and can be rebuilt at any time, losing nothing.
A change of the format, the embedder, the tokenizer or the store means a rebuild (`rebuild_reason`).
A path of the wrong kind is not memclaw's to replace: `check_layout` refuses it in one line naming the fix.

The file `manifest.json` holds the format, fingerprints, store, dimensions, namespace and last workspace path.
The namespace is the workspace's key in the store; it is kept when the workspace moves.
The folder `chroma/` is the embedded Chroma store, unless memory.chroma_url is set.
Each scope has `scopes/<key>/state.sqlite3`, its state (memclaw.index._scope_state).
Its `scopes/<key>/DIRTY` is there while a sync writes, and forces a reconcile after a crash.
The file `sync.lock` serialises writers across processes.
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
import stat
from collections.abc import Iterator
from pathlib import Path

from memclaw.errors import DerivedIndexError
from memclaw.util.files import replace_atomically
from memclaw.util.pathkind import odd_path_error
from memclaw.util.safepath import NotRegularFileError, read_regular

log = logging.getLogger(__name__)

# 2: a long unit also has a head vector (memclaw.index.passages); 3: facts read without their cid;
FORMAT_VERSION = 4
# 4: a short archived turn embedded with the turns beside it
# a scope's state (memclaw.index._scope_state)
STATE_FILE = "state.sqlite3"
LEGACY_STATE_FILES = ("state.pkl", "lexical.bm25")
"""What a scope's state was kept in before memclaw.index._scope_state: never read (a pickle can run code), removed
once."""


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
            # made when needed; a file there is said by check_layout
            return
        except OSError:
            # said in one line where it is first read or written
            return
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

        check_layout(self, embedded=False)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            f = open(self.lock_file, "a+")  # noqa: SIM115 - closed by the with below
        except OSError as e:
            why = f"{e.strerror or e}; fix its permissions{rebuild_hint(self.root)}"
            raise DerivedIndexError(f"cannot write the index at {self.root}: {why}") from e
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


# ---- what may stand at the index's paths


def check_layout(layout: IndexLayout, scope: str | None = None, *, embedded: bool = True) -> None:
    """Raise DerivedIndexError if a path of the index, or of `scope`'s part, exists as the wrong kind.

    A missing path is fine: it is made when needed. PermissionError passes through: the CLI says it in one line."""
    expect: list[tuple[Path, str]] = [(layout.root, "folder"), (layout.manifest, "file"), (layout.lock_file, "file"),
                                      (layout.root / "scopes", "folder")]  # fmt: skip
    if embedded:
        expect.append((layout.chroma_dir, "folder"))
    if scope is not None:
        expect += [(layout.scope_dir(scope), "folder"), (layout.state_file(scope), "file"),
                   (layout.dirty_file(scope), "file")]  # fmt: skip
    for path, kind in expect:
        try:
            st = os.stat(path)
        # absent (or under a parent reported on its own)
        except (FileNotFoundError, NotADirectoryError):
            continue
        ok = stat.S_ISDIR(st.st_mode) if kind == "folder" else stat.S_ISREG(st.st_mode)
        if not ok:
            raise odd_path_error(path, kind, layout.root)


def regular_file(path: Path, root: Path) -> bool:
    """Whether the file memclaw keeps at `path`, in the index at `root`, is there yet.

    Raises DerivedIndexError when something else stands there or above it. PermissionError passes through."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    except NotADirectoryError as e:
        for parent in reversed(Path(path).parents):
            if parent.exists() and not parent.is_dir():
                raise odd_path_error(parent, "folder", root) from e
        raise DerivedIndexError(f"cannot use {path}: a folder above it is not a folder") from e
    if not stat.S_ISREG(st.st_mode):
        raise odd_path_error(path, "file", root)
    return True


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
    # no index folder yet, or a file there: said by check_layout
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (IsADirectoryError, NotRegularFileError) as e:
        raise odd_path_error(layout.manifest, "file", layout.root) from e
    except PermissionError:
        # not damage: rebuilding would meet it too (said in one line by the CLI)
        raise
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
    "agent_reply_vectors": "how the agent's replies are embedded changed",
}
# what an older manifest, written before the key, was built with
_BUILT_BEFORE_THE_KEY = {"agent_reply_vectors": "passages"}


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
        before = have.get(key, _BUILT_BEFORE_THE_KEY.get(key))
        if key in want and before != want[key]:
            reasons.append(f"{words} ({before} -> {want[key]})" if key in ("store", "embedder") else words)
    return "; ".join(reasons) or None


def write_manifest(layout: IndexLayout, data: dict) -> None:
    replace_atomically(layout.manifest, json.dumps(data, indent=2, sort_keys=True).encode())


def remove_tree(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)

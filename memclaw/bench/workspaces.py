"""Where a benchmark run keeps one corpus's workspace: a temp dir removed afterwards, or a kept folder reused by a
later run (so that two versions of the code query one index build)."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def temp_workspace(prefix: str) -> Iterator[Path]:
    """A temp dir holding one workspace (`<dir>/ws`) and its side file; removed afterwards."""
    d = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield d / "ws"
    finally:
        from memclaw.store.clients import release_embedded_below

        release_embedded_below(d)
        shutil.rmtree(d, ignore_errors=True)


KEPT_MARK = ".bench-written"


@contextlib.contextmanager
def bench_workspace(prefix: str, workdir: Path | None, key: str) -> Iterator[tuple[Path, bool]]:
    """(the workspace root, whether it was written and indexed by an earlier run). Without `workdir`: a temp
    workspace, removed afterwards. With it: `<workdir>/<key>/ws`, kept, so that a later run (of other code) reuses
    the same Markdown and the same index (Chroma's HNSW build is not reproducible: two builds of one corpus can
    differ in their approximate neighbours, so an exact comparison of two versions must query one build)."""
    if workdir is None:
        with temp_workspace(prefix) as root:
            yield root, False
        return
    d = Path(workdir) / key
    reused = (d / KEPT_MARK).exists()
    if not reused and d.exists():
        # An interrupted write: start again
        shutil.rmtree(d)
    d.mkdir(parents=True, exist_ok=True)
    try:
        yield d / "ws", reused
        (d / KEPT_MARK).touch()
    finally:
        from memclaw.store.clients import release_embedded_below

        release_embedded_below(d)

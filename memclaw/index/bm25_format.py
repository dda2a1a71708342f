"""The on-disk form of a BM25 index: `MAGIC | sha256(body) | body`, the body a JSON header plus raw little-endian
int32 arrays (no pickle: nothing read back can run code). Missing, truncated, corrupted or foreign bytes raise
`IndexError_` naming the fix (rebuild from the Markdown)."""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memclaw.errors import IndexError_
from memclaw.util.safepath import read_regular

FORMAT_VERSION = 1
I4 = np.dtype("<i4")
"""The dtype of every array in the file (little-endian int32)."""

_MAGIC = b"MEMCLAW-BM25\n"
_DIGEST = 32


def encode_index(meta: dict[str, Any], arrays: Sequence[np.ndarray] = ()) -> bytes:
    head = json.dumps(meta, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    parts = [struct.pack("<Q", len(head)), head]
    parts += [np.ascontiguousarray(a, dtype=I4).tobytes() for a in arrays]
    body = b"".join(parts)
    return _MAGIC + hashlib.sha256(body).digest() + body


def corrupt(where: str | Path, why: str) -> IndexError_:
    return IndexError_(f"BM25 index {where} is unusable ({why}); rebuild it with `memclaw memory reindex`")


def read_index_file(path: Path) -> bytes:
    path = Path(path)
    try:
        return read_regular(path, follow=True)
    except FileNotFoundError as e:
        raise corrupt(path, "missing") from e
    except OSError as e:
        raise corrupt(path, f"cannot read: {e.strerror}") from e


def decode_index(raw: bytes, where: str | Path) -> tuple[dict[str, Any], memoryview]:
    """The JSON header and the raw array bytes after it. Raises IndexError_ on any damage."""
    n = len(_MAGIC)
    if not raw.startswith(_MAGIC):
        raise corrupt(where, "not a memclaw BM25 index")
    if len(raw) < n + _DIGEST + 8:
        raise corrupt(where, "truncated")
    body = memoryview(raw)[n + _DIGEST :]
    if hashlib.sha256(body).digest() != raw[n : n + _DIGEST]:
        raise corrupt(where, "checksum mismatch: truncated or corrupted")
    (hlen,) = struct.unpack_from("<Q", body, 0)
    try:
        meta = json.loads(bytes(body[8 : 8 + hlen]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise corrupt(where, "bad header") from e
    if not isinstance(meta, dict):
        raise corrupt(where, "bad header")
    if meta.get("format") != FORMAT_VERSION:
        raise corrupt(where, f"format {meta.get('format')!r}, this memclaw reads {FORMAT_VERSION}")
    return meta, body[8 + hlen :]


def check_params(where: str | Path, meta: dict[str, Any], kind: str) -> tuple[float, float]:
    if meta.get("kind") != kind:
        raise corrupt(where, f"holds a {meta.get('kind')!r} index, expected {kind!r}")
    k1, b = meta.get("k1"), meta.get("b")
    if not isinstance(k1, int | float) or not isinstance(b, int | float) or k1 < 0 or not 0 <= b <= 1:
        raise corrupt(where, "bad parameters")
    return float(k1), float(b)

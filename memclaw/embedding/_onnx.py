"""The ONNX backend: `OnnxEmbedder` (onnxruntime + `tokenizers`, no torch import, ~0.5 s to load, a few ms per
query) on a cached export, where that export lives (`export_dir_for`) and whether it is valid (`read_manifest`).
The export's model file is sha256-checked once and a stamp beside it records that check."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memclaw.embedding._registry import ModelSpec
from memclaw.embedding.base import Progress, batches, normalize_rows
from memclaw.errors import EmbeddingError
from memclaw.markdown.formats import clean_text
from memclaw.util.files import replace_atomically

log = logging.getLogger(__name__)

EXPORT_FORMAT = 1


def _onnx_threads() -> int:
    return max(1, min(4, os.cpu_count() or 1))


def _file_identity(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _verified_before(path: Path, sha256: str) -> bool:
    """Whether `path` was sha256-verified as `sha256` and has not been touched since (same size, mtime, ctime,
    inode and device: any rewrite, truncation or copy changes one of them). Hashing an 86 MB model costs a
    cold `memclaw recall` ~0.15 s on every start; the stamp makes it once per export."""
    try:
        stamp = json.loads(_stamp_path(path).read_text("utf-8"))
        return stamp == {"sha256": sha256, "file": _file_identity(path)}
    except (OSError, ValueError):
        return False


def _record_verified(path: Path, sha256: str) -> None:
    try:
        data = json.dumps({"sha256": sha256, "file": _file_identity(path)}).encode()
        replace_atomically(_stamp_path(path), data)
    # a read-only cache: verify on every load, as before
    except OSError:
        log.debug("cannot record the verification of %s", path, exc_info=True)


def import_runtime() -> None:
    """Import what `OnnxEmbedder` runs on (onnxruntime, tokenizers) in the caller's thread: importing holds the GIL
    throughout, creating the session does not (see memclaw.embedding.load.load_in_background)."""
    import onnxruntime  # noqa: F401
    import tokenizers  # noqa: F401


class OnnxEmbedder:
    """onnxruntime + `tokenizers` on an export made by `export_onnx`: tokenize with truncation to
    max_seq_length and padding to the longest text of each batch, run the transformer, pool with the
    attention mask, L2-normalize. Texts are sorted by their word pieces before batching to keep padding small.

    `spin`: ONNX Runtime's threads busy-wait between runs for the next one (~6% more texts a second in a batch).
    Off for a process that embeds a query among other work (a cold `recall`, `context`, a turn): spinning they take
    the CPU that work needs (~70 ms of a cold recall's 0.8 s here). The vectors are the same either way."""

    def __init__(self, export_dir: Path, *, expected_source_sha256: str | None = None, spin: bool = True) -> None:
        manifest = read_manifest(export_dir)
        if manifest is None:
            raise EmbeddingError(f"no valid ONNX export in {export_dir}; delete it and load the model again")
        if expected_source_sha256 and manifest["source_sha256"] != expected_source_sha256:
            raise EmbeddingError(f"ONNX export {export_dir} was made from other weights; delete it to re-export")
        import onnxruntime as ort
        from tokenizers import Tokenizer

        onnx_path = export_dir / "model.onnx"
        if not _verified_before(onnx_path, manifest["onnx_sha256"]):
            data = onnx_path.read_bytes()
            if hashlib.sha256(data).hexdigest() != manifest["onnx_sha256"]:
                raise EmbeddingError(f"ONNX export {export_dir} is corrupted (sha256 mismatch); delete it to re-export")
            _record_verified(onnx_path, manifest["onnx_sha256"])
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = _onnx_threads()
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3
        if not spin:
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            self._session = ort.InferenceSession(str(onnx_path), opts, providers=["CPUExecutionProvider"])
            tok = Tokenizer.from_file(str(export_dir / "tokenizer.json"))
        except Exception as e:
            raise EmbeddingError(
                f"cannot open ONNX export {export_dir}: {type(e).__name__}: {e}; delete it to re-export"
            ) from e
        self.max_seq_length = int(manifest["max_seq_length"])
        tok.enable_truncation(self.max_seq_length)
        pad = tok.padding or {}
        # each batch is padded here, to its longest text (encode)
        tok.no_padding()
        self._pad_id = int(pad.get("pad_id", manifest.get("pad_id", 0)))
        self._pad_type_id = int(pad.get("pad_type_id", 0))
        self._tokenizer = tok
        self._inputs = [i.name for i in self._session.get_inputs()]
        self._pooling: str = manifest["pooling"]
        self.name: str = manifest["model"]
        self.dim: int = int(manifest["dimensions"])
        self.fingerprint: str = manifest["fingerprint"]
        self.export_dir = export_dir
        self.manifest = manifest

    def _run(self, encs: list[Any]) -> np.ndarray:
        """The vectors of tokenized texts, padded to the longest of them."""
        width = max(len(e.ids) for e in encs)
        ids = np.full((len(encs), width), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(encs), width), dtype=np.int64)
        types = np.full((len(encs), width), self._pad_type_id, dtype=np.int64)
        for row, e in enumerate(encs):
            n = len(e.ids)
            ids[row, :n] = e.ids
            mask[row, :n] = 1
            types[row, :n] = e.type_ids
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        hidden = self._session.run(None, {k: v for k, v in feed.items() if k in self._inputs})[0]
        if self._pooling == "cls":
            pooled = hidden[:, 0]
        elif self._pooling == "max":
            pooled = np.where(mask[..., None] > 0, hidden, -1e9).max(axis=1)
        else:
            m = mask[..., None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
        return normalize_rows(pooled)

    def encode(self, texts: Sequence[str], *, batch_size: int = 64, progress: Progress | None = None) -> np.ndarray:
        # lone surrogates (undecodable argv bytes) break the tokenizer
        texts = [clean_text(str(t)) for t in texts]
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        encs = self._tokenizer.encode_batch(texts)
        # longest first by word pieces, what the model runs on: each batch pads to little
        order = sorted(range(len(texts)), key=lambda i: -len(encs[i].ids))
        for start, end in batches(len(texts), batch_size):
            idx = order[start:end]
            out[idx] = self._run([encs[i] for i in idx])
            if progress:
                progress(end - start)
        return out

    def warm_up(self) -> None:
        self.encode(["warm up the session"])


def export_dir_for(spec: ModelSpec, cache_dir: Path) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", spec.name)
    return cache_dir / f"{safe}-{spec.sha256[:12]}-onnx"


def read_manifest(export_dir: Path, spec: ModelSpec | None = None) -> dict[str, Any] | None:
    """The export's manifest if it is complete and (given a spec) matches the registry entry, else None."""
    try:
        manifest = json.loads((export_dir / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    needed = ("format", "model", "source_sha256", "onnx_sha256", "fingerprint", "dimensions", "pooling")
    if not isinstance(manifest, dict) or any(k not in manifest for k in needed):
        return None
    if manifest["format"] != EXPORT_FORMAT:
        return None
    if not (export_dir / "model.onnx").is_file() or not (export_dir / "tokenizer.json").is_file():
        return None
    if spec is not None and (
        manifest["source_sha256"] != spec.sha256
        or manifest["fingerprint"] != spec.fingerprint
        or manifest.get("max_seq_length") != spec.max_seq_length
    ):
        return None
    return manifest

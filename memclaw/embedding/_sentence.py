"""The sentence-transformers (torch) backend: the reference embedder, also the only way to run a model that is
not in the registry, and the helpers that read a loaded model's pooling and dimension (used by the ONNX export).
Loading forces Hugging Face offline: nothing is ever downloaded."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memclaw.embedding._registry import file_sha256
from memclaw.embedding.base import Progress, batches, normalize_rows
from memclaw.errors import EmbeddingError
from memclaw.markdown.formats import clean_text

_OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def _force_offline() -> None:
    from memclaw.runtime import set_offline_env

    os.environ.update(_OFFLINE_ENV)
    # also: no third-party progress bars
    set_offline_env()


def import_sentence_transformers() -> Any:
    _force_offline()
    try:
        import sentence_transformers
    except ImportError as e:
        raise EmbeddingError(
            "the torch backend needs sentence-transformers: pip install sentence-transformers "
            "(or use embeddings.backend = 'onnx' with a cached export)"
        ) from e
    return sentence_transformers


def st_pooling(model: Any) -> tuple[str, bool]:
    """(pooling mode, ends with Normalize) of a loaded SentenceTransformer."""
    pooling, norm = "unknown", False
    for module in model:
        cls = type(module).__name__
        if cls == "Pooling":
            mode = getattr(module, "pooling_mode", "unknown")
            pooling = "+".join(mode) if isinstance(mode, (tuple, list)) else str(mode)
        elif cls == "Normalize":
            norm = True
    return pooling, norm


def st_dimension(model: Any) -> int | None:
    getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return getter()


class SentenceTransformerEmbedder:
    """The reference backend: sentence-transformers on torch, CPU."""

    def __init__(self, model_dir: Path | str, *, name: str, fingerprint: str | None = None) -> None:
        st = import_sentence_transformers()
        try:
            self._model = st.SentenceTransformer(str(model_dir), device="cpu", local_files_only=True)
        # any load failure is one clear error
        except Exception as e:
            raise EmbeddingError(
                f"cannot load embedding model {name} from {model_dir}: {type(e).__name__}: {e}; "
                "check the model directory"
            ) from e
        self._model.eval()
        self.name = name
        dim = st_dimension(self._model)
        if dim is None:
            raise EmbeddingError(f"model {name} does not report its embedding dimension; use another model")
        self.dim = int(dim)
        if fingerprint is None:
            pooling, norm = st_pooling(self._model)
            fingerprint = (
                f"st:{name}@{_dir_weights_sha(Path(model_dir))[:16]}/{pooling}{'+norm' if norm else ''}"
                f"/max{self._model.max_seq_length}/d{self.dim}"
            )
        self.fingerprint = fingerprint
        self.max_seq_length = int(self._model.max_seq_length)

    @property
    def model(self) -> Any:
        """The underlying SentenceTransformer."""
        return self._model

    def encode(self, texts: Sequence[str], *, batch_size: int = 64, progress: Progress | None = None) -> np.ndarray:
        texts = [clean_text(str(t)) for t in texts]
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start, end in batches(len(texts), batch_size):
            vecs = self._model.encode(
                texts[start:end],
                batch_size=batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
            out[start:end] = vecs
            if progress:
                progress(end - start)
        return normalize_rows(out) if texts else out

    def warm_up(self) -> None:
        self.encode(["warm up"])


def _dir_weights_sha(model_dir: Path) -> str:
    for name in ("model.safetensors", "pytorch_model.bin"):
        p = model_dir / name
        if p.is_file():
            return file_sha256(p)
    return hashlib.sha256(str(model_dir).encode()).hexdigest()

"""A local cross-encoder (sentence-transformers `CrossEncoder`) that scores (query, text) pairs for re-ranking.

The model is a directory on this machine (`recall.rerank.model`), loaded offline: nothing is ever downloaded, no
remote code runs, and only safetensors weights are read (a pickled `pytorch_model.bin` could run code). A missing or
unreadable directory is one RerankError naming the key to fix. Loaded once per process per directory.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memclaw.embedding._sentence import import_sentence_transformers
from memclaw.errors import EmbeddingError, RerankError
from memclaw.markdown.formats import clean_text

SETTING = "recall.rerank.model"
BATCH = 16
"""Pairs scored at once (a re-ranking scores tens of them)."""

_loaded: dict[Path, Any] = {}
_lock = threading.Lock()


def _problem(path: Path) -> str | None:
    """Why `path` cannot be a saved cross-encoder, or None."""
    if not path.is_dir():
        return "is not a directory"
    if not (path / "config.json").is_file():
        return "holds no config.json"
    if not (path / "model.safetensors").is_file():
        return "holds no model.safetensors (memclaw reads no pickled weights)"
    return None


def load_cross_encoder(path: str | Path) -> Any:
    """The CrossEncoder saved in `path`, loaded once per process (RerankError when it cannot be)."""
    where = Path(path).expanduser()
    problem = _problem(where)
    if problem:
        raise RerankError(
            f"{SETTING} {str(where)!r} {problem}; set it to a directory saved by CrossEncoder.save_pretrained"
        )
    key = where.resolve()
    with _lock:
        if key not in _loaded:
            try:
                st = import_sentence_transformers()
                model = st.CrossEncoder(str(key), device="cpu", local_files_only=True, trust_remote_code=False,
                                        model_kwargs={"use_safetensors": True})  # fmt: skip
            except EmbeddingError as e:
                raise RerankError(str(e)) from None
            # any load failure is one line
            except Exception as e:
                first = (str(e).splitlines() or [""])[0][:200]
                raise RerankError(
                    f"cannot load the cross-encoder in {SETTING} {str(where)!r} ({type(e).__name__}: {first}); "
                    "check the directory"
                ) from None
            model.eval()
            _loaded[key] = model
        return _loaded[key]


def cross_encoder_scores(path: str | Path, query: str, texts: Sequence[str]) -> list[float]:
    """The cross-encoder's score of each (query, text) pair, in the order of `texts`; higher is more relevant."""
    if not texts:
        return []
    model = load_cross_encoder(path)
    pairs = [(clean_text(query), clean_text(str(t))) for t in texts]
    try:
        scores = model.predict(pairs, batch_size=BATCH, show_progress_bar=False, convert_to_numpy=True)
    except Exception as e:
        first = (str(e).splitlines() or [""])[0][:200]
        raise RerankError(f"the cross-encoder in {SETTING} failed ({type(e).__name__}: {first})") from None
    return [float(s) for s in scores.reshape(len(texts), -1)[:, 0]]

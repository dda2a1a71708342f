"""Loading an embedder: `load_embedder` (once per process per model, backend and cache dir), the fingerprint a
config names without loading it, one query's vector, and the default ONNX export cache.

Backends: `OnnxEmbedder` (memclaw.embedding._onnx, the default whenever a valid export exists),
`SentenceTransformerEmbedder` (memclaw.embedding._sentence, the torch reference), `HashEmbedder` ("hash-test",
memclaw.embedding._hashing) and `ProviderEmbedder` ("<provider>/<model>", memclaw.embedding.provider: the user's
provider through litellm; memories leave the machine).

Every backend returns float32 rows that are L2-normalized, so a dot product is the cosine similarity. The
`fingerprint` names the weights (sha256) and the pooling, not the backend: the ONNX export and torch agree to
~1e-7, so switching backend keeps the index; changing the model rebuilds it.

ONNX export cache: `EmbeddingsConfig.cache_dir`, else the repository's `embeddings/cache` when writable, else
`$MEMCLAW_HOME/models`. Nothing is ever downloaded.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from memclaw.embedding._export import export_onnx
from memclaw.embedding._hashing import HASH_TEST_MODEL, HashEmbedder
from memclaw.embedding._onnx import OnnxEmbedder, export_dir_for, import_runtime, read_manifest
from memclaw.embedding._registry import (
    REPO_EMBEDDINGS,
    ModelSpec,
    find_spec,
    load_registry,
    models_home,
    resolve_model_dir,
    resolve_unregistered,
    verify_weights,
)
from memclaw.embedding._sentence import SentenceTransformerEmbedder
from memclaw.embedding.base import Embedder
from memclaw.errors import EmbeddingError
from memclaw.util.background import background_thread

if TYPE_CHECKING:
    from memclaw.config import EmbeddingsConfig

log = logging.getLogger(__name__)


def default_cache_dir() -> Path:
    """The repository's embeddings/cache when the registry lives there and it is writable, else
    $MEMCLAW_HOME/models."""
    if (REPO_EMBEDDINGS / "registry.toml").is_file():
        cache = REPO_EMBEDDINGS / "cache"
        probe = cache if cache.is_dir() else REPO_EMBEDDINGS
        if os.access(probe, os.W_OK | os.X_OK):
            return cache
    return models_home()


def _torch_available() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("torch", "sentence_transformers", "onnx"))


_LOADED: dict[tuple[Any, ...], Embedder] = {}
_LOAD_LOCK = threading.Lock()
# loads under way in the background (load_in_background)
_LOADING: dict[tuple[Any, ...], threading.Thread] = {}
_LOADING_LOCK = threading.Lock()


def fingerprint_for(cfg: EmbeddingsConfig, *, registry: Mapping[str, ModelSpec] | None = None) -> str | None:
    """The fingerprint the embedder `cfg` names would have, without loading it; None when only loading can tell
    (a model that is not in the registry)."""
    if cfg.model == HASH_TEST_MODEL:
        return HashEmbedder().fingerprint
    spec = find_spec(cfg.model, load_registry() if registry is None else registry)
    if spec is not None:
        return spec.fingerprint
    from memclaw.embedding.provider import is_provider_model, provider_fingerprint

    return provider_fingerprint(cfg) if is_provider_model(cfg.model) else None


def encode_query(embedder: Embedder, text: str) -> np.ndarray:
    """One query's vector. An embedder with its own `encode_query` (the provider's, which caches queries on disk)
    answers it; any other encodes the text."""
    own = getattr(embedder, "encode_query", None)
    return own(text) if callable(own) else embedder.encode([text])[0]


class ModelChoice(Protocol):
    """The settings that name an embedder to load (EmbeddingsConfig's, or memclaw.cli.early's guess of them)."""

    @property
    def model(self) -> str: ...
    @property
    def backend(self) -> str: ...
    @property
    def cache_dir(self) -> Path | None: ...


def load_in_background(cfg: ModelChoice) -> bool:
    """Start loading `cfg`'s embedder in a background thread, when that is the quick path; whether a load started.

    The quick path is a registry model whose cached ONNX export is valid, neither loaded nor loading in this process.
    Its ONNX Runtime session, most of a cold model load, does not hold the GIL.
    So it runs beside the caller's own start-up instead of after it.
    `load_embedder` then waits for it and returns the same embedder, whose threads do not spin between runs.
    If the background load fails, nothing is kept, and `load_embedder` loads and says what is wrong as usual.
    The thread is memclaw.util.background's: an exit waits for it rather than tearing the session down midway.
    """
    if cfg.model == HASH_TEST_MODEL or cfg.backend == "torch":
        return False
    try:
        spec = find_spec(cfg.model, load_registry())
    except EmbeddingError:
        return False
    if spec is None:
        return False
    cache_dir = Path(cfg.cache_dir).expanduser() if cfg.cache_dir else default_cache_dir()
    key = (cfg.model, cfg.backend, str(cache_dir.resolve()), spec)
    target = export_dir_for(spec, cache_dir)
    with _LOADING_LOCK:
        if key in _LOADED or key in _LOADING or read_manifest(target, spec) is None:
            return False
        thread = background_thread(lambda: _load_export(key, target, spec), "memclaw-embedder-load")
        _LOADING[key] = thread
    # here, at full speed: in the thread it would share the GIL with the caller's start-up
    import_runtime()
    thread.start()
    return True


def _load_export(key: tuple[Any, ...], target: Path, spec: ModelSpec) -> None:
    try:
        with _LOAD_LOCK:
            if key not in _LOADED:
                _LOADED[key] = OnnxEmbedder(target, expected_source_sha256=spec.sha256, spin=False)
    # load_embedder, on the caller's thread, loads again and says why
    except Exception:
        log.debug("background load of %s failed", spec.name, exc_info=True)
    finally:
        with _LOADING_LOCK:
            _LOADING.pop(key, None)


def load_embedder(cfg: EmbeddingsConfig | None = None, *, registry: Mapping[str, ModelSpec] | None = None) -> Embedder:
    """The embedder for `cfg`, loaded once per process (per model, backend and cache dir).

    backend "auto": the cached ONNX export when valid; else export it now (registry models, when torch and
    onnx are installed; a one-line notice); else sentence-transformers. "onnx" / "torch" force a backend.
    "<provider>/<model>" (a provider litellm knows, not in the registry): the provider's embeddings
    (memclaw.embedding.provider), a new instance per call.
    """
    if cfg is None:
        from memclaw.config import EmbeddingsConfig

        cfg = EmbeddingsConfig()
    if cfg.model == HASH_TEST_MODEL:
        key: tuple[Any, ...] = (HASH_TEST_MODEL,)
    else:
        registry = load_registry() if registry is None else registry
        spec = find_spec(cfg.model, registry)
        # nothing to load: one per caller, with its settings
        if spec is None and _is_provider_model(cfg.model):
            from memclaw.embedding.provider import ProviderEmbedder

            return ProviderEmbedder(cfg)
        cache_dir = Path(cfg.cache_dir).expanduser() if cfg.cache_dir else default_cache_dir()
        key = (cfg.model, cfg.backend, str(cache_dir.resolve()), spec)
    with _LOADING_LOCK:
        loading = _LOADING.get(key)
    # started by load_in_background: its result, or (if it failed) a load of our own
    if loading is not None:
        loading.join()
    with _LOAD_LOCK:
        if key in _LOADED:
            return _LOADED[key]
        if cfg.model == HASH_TEST_MODEL:
            emb: Embedder = HashEmbedder()
        elif spec is not None:
            emb = _load_registry_model(spec, cfg.backend, cache_dir)
        else:
            if cfg.backend == "onnx":
                raise EmbeddingError(
                    f"model {cfg.model!r} is not in the registry, so it has no ONNX export; "
                    "add it to embeddings/registry.toml or set embeddings.backend = 'torch'"
                )
            emb = SentenceTransformerEmbedder(resolve_unregistered(cfg.model), name=cfg.model)
        _LOADED[key] = emb
        return emb


def _load_registry_model(spec: ModelSpec, backend: str, cache_dir: Path) -> Embedder:
    if spec.quantize:
        # only its ONNX export is that model: torch would give other vectors under its fingerprint
        if backend == "torch":
            raise EmbeddingError(
                f"model {spec.name} is {spec.quantize}, which only the ONNX backend runs; "
                "set embeddings.backend = 'auto' or pick the model without quantisation"
            )
        backend = "onnx"
    if backend == "torch":
        model_dir = resolve_model_dir(spec)
        verify_weights(model_dir, spec)
        return SentenceTransformerEmbedder(model_dir, name=spec.name, fingerprint=spec.fingerprint)
    target = export_dir_for(spec, cache_dir)
    if read_manifest(target, spec) is not None:
        try:
            return OnnxEmbedder(target, expected_source_sha256=spec.sha256)
        except EmbeddingError as e:
            log.warning("cached ONNX export unusable (%s); exporting again", e)
    if backend == "auto" and not _torch_available():
        if _import_ok("sentence_transformers"):
            model_dir = resolve_model_dir(spec)
            verify_weights(model_dir, spec)
            log.warning(
                "no ONNX export of %s and the `onnx` package is missing to make one; using torch "
                "(slow start): pip install onnx",
                spec.name,
            )
            return SentenceTransformerEmbedder(model_dir, name=spec.name, fingerprint=spec.fingerprint)
        raise EmbeddingError(
            f"model {spec.name} has no ONNX export in {cache_dir} and torch is not installed to make one; "
            "pip install torch sentence-transformers onnx"
        )
    if backend == "onnx" and not _torch_available():
        raise EmbeddingError(
            f"model {spec.name} has no ONNX export in {cache_dir}; making one needs torch, sentence-transformers "
            "and onnx: pip install onnx (or set embeddings.backend = 'torch')"
        )
    model_dir = resolve_model_dir(spec)
    verify_weights(model_dir, spec)
    log.warning("exporting %s to ONNX once (about 15 s) into %s; later loads are fast", spec.name, target)
    try:
        target = export_onnx(spec, cache_dir, model_dir=model_dir)
        return OnnxEmbedder(target, expected_source_sha256=spec.sha256)
    except (EmbeddingError, OSError) as e:
        if backend == "onnx":
            raise EmbeddingError(f"ONNX export of {spec.name} failed: {e}") from e
        log.warning("ONNX export of %s failed (%s); using sentence-transformers (torch)", spec.name, e)
        return SentenceTransformerEmbedder(model_dir, name=spec.name, fingerprint=spec.fingerprint)


def _is_provider_model(name: str) -> bool:
    from memclaw.embedding.provider import is_provider_model

    return is_provider_model(name)


def _import_ok(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None

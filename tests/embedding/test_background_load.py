"""Loading the model in the background (memclaw.embedding.load.load_in_background): only the quick path (a valid
cached ONNX export) starts; `load_embedder` then waits for it and returns that very embedder; a background load
that fails keeps nothing and says nothing, and `load_embedder` loads and says what is wrong as before. Each test
gets its own export folder (links to the real export), so it is a load of its own in this process."""

from __future__ import annotations

import logging
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

from memclaw.config import EmbeddingsConfig
from memclaw.embedding import load
from memclaw.embedding._onnx import OnnxEmbedder
from memclaw.embedding.load import load_embedder, load_in_background
from memclaw.errors import EmbeddingError

pytestmark = pytest.mark.slow


@pytest.fixture
def cache_dir(embedder, tmp_path) -> Path:
    """An export cache holding the real export (its files linked, the manifest copied)."""
    assert isinstance(embedder, OnnxEmbedder)
    export = tmp_path / "cache" / embedder.export_dir.name
    export.mkdir(parents=True)
    for name in ("model.onnx", "tokenizer.json"):
        (export / name).symlink_to(embedder.export_dir / name)
    shutil.copy(embedder.export_dir / "manifest.json", export / "manifest.json")
    return export.parent


def _loading_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "memclaw-embedder-load"]


def test_the_model_loads_in_the_background_and_load_embedder_returns_it(embedder, cache_dir):
    cfg = EmbeddingsConfig(cache_dir=cache_dir)
    assert load_in_background(cfg)
    [thread] = _loading_threads()
    assert not thread.daemon  # an exit waits for it instead of tearing the session down midway
    assert not load_in_background(cfg)  # one load at a time
    got = load_embedder(cfg)
    assert (
        isinstance(got, OnnxEmbedder) and got is not embedder and got.export_dir == cache_dir / embedder.export_dir.name
    )
    assert not _loading_threads()
    assert load_embedder(cfg) is got and not load_in_background(cfg)  # loaded: nothing more to start
    texts = ["where does my sister live", "Maya's sister Lena lives in Porto"]
    assert np.array_equal(got.encode(texts), embedder.encode(texts))  # the same vectors, bit for bit
    usual = OnnxEmbedder(got.export_dir)
    assert _spins(usual) and not _spins(got)  # its threads leave the CPU to the command's other work


def _spins(e: OnnxEmbedder) -> bool:
    """Whether the session's threads busy-wait between runs (ONNX Runtime's default)."""
    opts = e._session.get_session_options()
    try:
        return opts.get_session_config_entry("session.intra_op.allow_spinning") != "0"
    except RuntimeError:  # not set: the default, spinning
        return True


@pytest.mark.parametrize(
    "settings",
    [{"model": "hash-test"}, {"backend": "torch"}, {"model": "openai/text-embedding-3-small"}, {}],
    ids=["hash-test", "torch", "provider", "no-export"],
)
def test_only_the_quick_path_starts(tmp_path, settings):
    """No export to load (the default model without one in this cache dir), torch, a provider, the test embedder:
    the caller loads as before (an export to make, a warning to say, a request to send happen where they did)."""
    assert not load_in_background(EmbeddingsConfig(cache_dir=tmp_path, **settings))
    assert not _loading_threads()


def test_a_failed_background_load_keeps_nothing_and_load_embedder_says_why(embedder, cache_dir, caplog, monkeypatch):
    export = cache_dir / embedder.export_dir.name
    (export / "model.onnx").unlink()
    (export / "model.onnx").write_bytes(b"not a model")  # the manifest still reads: the quick path is tried
    monkeypatch.setattr(load, "_torch_available", lambda: False)  # (no re-export: its one-line refusal instead)
    cfg = EmbeddingsConfig(cache_dir=cache_dir, backend="onnx")
    with caplog.at_level(logging.DEBUG, logger="memclaw.embedding"):
        assert load_in_background(cfg)
        for t in _loading_threads():
            t.join()
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # the background says nothing
        with pytest.raises(EmbeddingError, match="has no ONNX export"):
            load_embedder(cfg)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "cached ONNX export unusable" in warnings[0]  # said once, by the caller's load

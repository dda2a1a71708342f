"""Start-up work moved to background threads, so that a cold command loads its parts side by side instead of one
after the other: the embedding model (ONNX Runtime builds its session in native code, without the GIL) while the
index and BM25 load, the token encoding while the prompt is assembled. (Not litellm: its import is Python through
and through, and in a thread it only slowed the turn around it.) A failure there is not reported by the thread:
the caller's own load raises it again. A command that ends before using what it started waits for it at exit (a
native library torn down mid-load can crash the interpreter)."""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memclaw.config import EmbeddingsConfig

log = logging.getLogger(__name__)

EXIT_WAIT_S = 60.0
_started: dict[tuple, threading.Thread] = {}
_lock = threading.Lock()


def _start(key: tuple, work: Callable[[], object], name: str) -> None:
    with _lock:
        if key in _started:
            return

        def run() -> None:
            try:
                work()
            except Exception as e:  # said by the caller's own load
                log.debug("%s failed in the background: %s", name, e)

        _started[key] = t = threading.Thread(target=run, name=f"memclaw-{name}", daemon=True)
    t.start()


def load_embedder_in_background(cfg: EmbeddingsConfig) -> None:
    """Start loading the embedder `cfg` names (once per process and settings; its imports happen in the thread too);
    `embedding.load_embedder` waits for it. Provider models have nothing to load."""
    from memclaw.providers import is_provider_model

    if is_provider_model(cfg.model):
        return

    def load() -> None:
        from memclaw.embedding import load_embedder

        load_embedder(cfg)

    _start(("embedder", cfg.model, cfg.backend, str(cfg.cache_dir) if cfg.cache_dir else None), load, "embedder-load")


def load_encoding_in_background(model: str | None) -> None:
    """Start loading the token encoding of `model` (tiktoken's BPE, ~0.5 s); `tokens.encoding` waits for it."""
    from memclaw.tokens import encoding, token_family

    family = token_family(model)
    _start(("encoding", family), lambda: encoding(family), "encoding-load")


@atexit.register
def _wait_at_exit() -> None:
    with _lock:
        threads = list(_started.values())
    for t in threads:
        t.join(EXIT_WAIT_S)

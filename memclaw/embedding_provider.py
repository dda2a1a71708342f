"""Embeddings from the user's provider through litellm: the second implementation of `embedding.Embedder`.

`embeddings.model = "<provider>/<model>"` (`openai/text-embedding-3-small`, `gemini/text-embedding-004`,
`ollama/nomic-embed-text`, ...). Endpoint and key: `embeddings.api_base` / `embeddings.api_key`, else the provider's
environment variables, which litellm reads itself (`OPENAI_API_KEY`, `OPENAI_API_BASE`, `GEMINI_API_KEY`, ...).

- Requests carry at most `batch_size` inputs (capped at the provider's limit) and MAX_REQUEST_TOKENS tokens; each
  input is cut to the model's input limit (litellm's model info, else `embeddings.max_input_tokens`).
- 429, 5xx, timeouts and connection errors are retried with exponential backoff (Retry-After honoured, the agent's
  rules: memclaw.llm); an authentication error is not retried (`EmbeddingAuthError`, exit 5, naming the key to
  set). Out of retries: `EmbeddingUnavailable`; recall then answers from BM25 and sync leaves the vectors pending.
  After that, calls fail at once for COOLDOWN_S instead of waiting on a provider known to be down.
- Query embeddings are cached on disk by (model fingerprint, sha256 of the text): a repeated recall costs no
  request. The dimensions come from the first response and are remembered there too.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memclaw.embedding import Progress, _normalize
from memclaw.errors import EmbeddingAuthError, EmbeddingProviderError, EmbeddingUnavailable

if TYPE_CHECKING:
    from memclaw.config import EmbeddingsConfig

log = logging.getLogger(__name__)

DEFAULT_MAX_INPUT_TOKENS = 8191  # OpenAI's embedding models; others are read from litellm's model info
MAX_REQUEST_TOKENS = 300_000  # OpenAI's per-request total
# Inputs per request the providers accept (OpenAI 2048, Gemini's batchEmbedContents 100, Cohere 96, ...).
MAX_INPUTS = {"openai": 2048, "azure": 2048, "gemini": 100, "vertex_ai": 250, "cohere": 96, "voyage": 128}
DEFAULT_MAX_INPUTS = 256
COOLDOWN_S = 30.0
_CACHE_FILE = "query-embeddings.sqlite3"


def is_provider_model(name: str) -> bool:
    """True for "<provider>/<model>" where the provider is one litellm knows (openai, gemini, ollama, ...)."""
    head, sep, rest = name.partition("/")
    if not sep or not rest or Path(name).expanduser().exists():
        return False
    from memclaw.llm import litellm_module as _lib

    return head in {str(getattr(p, "value", p)) for p in _lib().provider_list}


def provider_fingerprint(cfg: EmbeddingsConfig) -> str:
    """What identifies a provider model's vectors: its name and requested dimensions (the endpoint does not)."""
    return f"litellm:{cfg.model}" + (f"/d{cfg.dimensions}" if cfg.dimensions else "")


def _lib() -> Any:
    from memclaw.llm import litellm_module as lib

    litellm = lib()
    # litellm's OpenAI embedding path reads `max_retries or litellm.DEFAULT_MAX_RETRIES`, so the 0 we pass (our
    # retries, not the SDK's on top) only holds when that default is 0 too; nothing else reads the attribute.
    litellm.DEFAULT_MAX_RETRIES = 0
    return litellm


class QueryCache:
    """Query vectors on disk (SQLite) by (model fingerprint, text digest), and each model's dimensions."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._ready = False

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=10)
        if not self._ready:
            db.execute(
                "CREATE TABLE IF NOT EXISTS vectors (model TEXT, digest BLOB, vector BLOB, PRIMARY KEY (model, digest))"
            )
            db.execute("CREATE TABLE IF NOT EXISTS dims (model TEXT PRIMARY KEY, dim INTEGER)")
            self._ready = True
        return db

    def get(self, model: str, text: str) -> np.ndarray | None:
        try:
            with self._connect() as db:
                row = db.execute(
                    "SELECT vector FROM vectors WHERE model = ? AND digest = ?", (model, _digest(text))
                ).fetchone()
        except sqlite3.Error as e:  # a cache: never fatal
            log.info("query embedding cache %s unusable (%s)", self.path, e)
            return None
        return np.frombuffer(row[0], dtype=np.float32).copy() if row else None

    def put(self, model: str, text: str, vector: np.ndarray) -> None:
        try:
            with self._connect() as db:
                db.execute(
                    "INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)",
                    (model, _digest(text), np.asarray(vector, dtype=np.float32).tobytes()),
                )
        except sqlite3.Error as e:
            log.info("query embedding cache %s unusable (%s)", self.path, e)

    def dim(self, model: str) -> int | None:
        try:
            with self._connect() as db:
                row = db.execute("SELECT dim FROM dims WHERE model = ?", (model,)).fetchone()
        except sqlite3.Error:
            return None
        return int(row[0]) if row else None

    def set_dim(self, model: str, dim: int) -> None:
        try:
            with self._connect() as db:
                db.execute("INSERT OR REPLACE INTO dims VALUES (?, ?)", (model, dim))
        except sqlite3.Error as e:
            log.info("query embedding cache %s unusable (%s)", self.path, e)


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def default_cache_path(cfg: EmbeddingsConfig) -> Path:
    from memclaw.config import memclaw_home

    return (Path(cfg.cache_dir).expanduser() if cfg.cache_dir else memclaw_home() / "cache") / _CACHE_FILE


class ProviderEmbedder:
    """An Embedder over `litellm.embedding` (sync: recall and sync call it from worker threads)."""

    def __init__(
        self,
        cfg: EmbeddingsConfig,
        *,
        cache: QueryCache | None = None,
        backoff_base_s: float = 1.0,
        max_backoff_s: float = 20.0,
    ) -> None:
        self.name = cfg.model
        self.fingerprint = provider_fingerprint(cfg)
        self.api_base = cfg.api_base
        self._api_key = cfg.api_key.get_secret_value() if cfg.api_key else None
        self.dimensions = cfg.dimensions
        self.timeout_s = cfg.timeout_s
        self.max_retries = cfg.max_retries
        self.backoff_base_s = backoff_base_s
        self.max_backoff_s = max_backoff_s
        self.cache = cache or QueryCache(default_cache_path(cfg))
        provider = cfg.model.split("/", 1)[0]
        self.max_inputs = MAX_INPUTS.get(provider, DEFAULT_MAX_INPUTS)
        self.max_input_tokens = cfg.max_input_tokens or _model_max_tokens(cfg.model)
        self._dim: int | None = cfg.dimensions or self.cache.dim(self.fingerprint)
        self._down_until = 0.0
        self._down_msg = ""

    def __repr__(self) -> str:  # never the key
        return f"ProviderEmbedder(model={self.name!r}, api_base={self.api_base!r})"

    @property
    def dim(self) -> int:
        """The model's dimensions: known from an earlier response, else asked for with a one-word request."""
        if self._dim is None:
            self.encode(["dimensions"])
        assert self._dim is not None
        return self._dim

    # ----- Embedder ----------------------------------------------------------------------------------------
    def encode(self, texts: Sequence[str], *, batch_size: int = 64, progress: Progress | None = None) -> np.ndarray:
        texts = [self._cut(str(t)) for t in texts]
        rows: list[np.ndarray] = []
        for batch in self._batches(texts, batch_size):
            rows.extend(self._request(batch))
            if progress:
                progress(len(batch))
        if not rows:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        return _normalize(np.vstack(rows))

    def encode_query(self, text: str) -> np.ndarray:
        """One query's vector; a repeat is answered from the on-disk cache without a request."""
        text = self._cut(str(text))
        hit = self.cache.get(self.fingerprint, text)
        if hit is not None:
            return hit
        vec = self.encode([text])[0]
        self.cache.put(self.fingerprint, text, vec)
        return vec

    def warm_up(self) -> None:
        return None

    # ----- helpers -----------------------------------------------------------------------------------------
    def _cut(self, text: str) -> str:
        """The text cut to the model's input limit (cl100k tokens, as litellm counts them). A token is at least
        one byte, so a text of fewer bytes than the limit needs no tokenizing."""
        text = text or " "  # providers refuse empty input
        if len(text.encode("utf-8", "surrogatepass")) <= self.max_input_tokens:
            return text
        from litellm.litellm_core_utils.default_encoding import encoding

        tokens = encoding.encode(text, disallowed_special=())
        return text if len(tokens) <= self.max_input_tokens else encoding.decode(tokens[: self.max_input_tokens])

    def _batches(self, texts: list[str], batch_size: int) -> Iterator[list[str]]:
        limit = max(1, min(batch_size, self.max_inputs))
        batch: list[str] = []
        tokens = 0
        for t in texts:
            n = len(t) // 2 + 1  # a cheap upper-bound-ish estimate of tokens (chars/4 is typical)
            if batch and (len(batch) >= limit or tokens + n > MAX_REQUEST_TOKENS):
                yield batch
                batch, tokens = [], 0
            batch.append(t)
            tokens += n
        if batch:
            yield batch

    def _kwargs(self, batch: list[str]) -> dict[str, Any]:
        kw: dict[str, Any] = {
            "model": self.name,
            "input": batch,
            "timeout": self.timeout_s,
            "max_retries": 0,  # retries are ours (the provider SDK's own would multiply them)
            "encoding_format": "float",
        }
        if self.dimensions:
            kw["dimensions"] = self.dimensions
        if self.api_base:
            kw["api_base"] = self.api_base
        if self._api_key:
            kw["api_key"] = self._api_key
        return kw

    def _request(self, batch: list[str]) -> list[np.ndarray]:
        from memclaw.llm import _retryable, backoff_seconds

        if time.monotonic() < self._down_until:
            raise EmbeddingUnavailable(self._down_msg)
        lib = _lib()
        attempts = 1 + self.max_retries
        for attempt in range(1, attempts + 1):
            try:
                resp = lib.embedding(**self._kwargs(batch))
                return self._vectors(resp, len(batch))
            except EmbeddingProviderError:
                raise
            except Exception as e:  # litellm maps provider errors to its own exception classes
                if not _retryable(e) or attempt == attempts:
                    raise self._error(e, attempt) from None
                wait = backoff_seconds(attempt, e, self.backoff_base_s, self.max_backoff_s)
                log.warning(
                    "embedding with %s failed (%s); retry %d/%d in %.1fs",
                    self.name,
                    self._describe(e),
                    attempt,
                    self.max_retries,
                    wait,
                )
                time.sleep(wait)
        raise AssertionError("unreachable")

    def _vectors(self, resp: Any, n: int) -> list[np.ndarray]:
        data = getattr(resp, "data", None)
        if not isinstance(data, list) or len(data) != n:
            raise EmbeddingProviderError(
                f"the embedding provider for {self.name} answered {n} inputs with "
                f"{len(data) if isinstance(data, list) else 'no'} vectors; check embeddings.model and api_base"
            )
        items = sorted(data, key=lambda d: _field(d, "index") or 0)
        rows = [np.asarray(_field(d, "embedding"), dtype=np.float32) for d in items]
        dims = {r.shape[0] for r in rows if r.ndim == 1}
        if len(dims) != 1 or any(r.ndim != 1 for r in rows):
            raise EmbeddingProviderError(f"the embedding provider for {self.name} returned malformed vectors")
        dim = dims.pop()
        if self._dim != dim:
            if self._dim is not None:
                log.warning("%s now returns %d dimensions (was %d)", self.name, dim, self._dim)
            self._dim = dim
            self.cache.set_dim(self.fingerprint, dim)
        return rows

    def _describe(self, e: BaseException) -> str:
        from memclaw.llm import scrub

        status = getattr(e, "status_code", None)
        msg = (str(e).splitlines() or [""])[0]
        text = f"{type(e).__name__}{f' {status}' if status else ''}: {msg}"[:300]
        return scrub(text, [self._api_key or ""])

    def _error(self, e: BaseException, attempts: int) -> EmbeddingProviderError:
        from memclaw.llm import _retryable, key_env_names

        lib = _lib()
        status = getattr(e, "status_code", None)
        if isinstance(e, lib.AuthenticationError) or status in (401, 403):
            return EmbeddingAuthError(
                f"the embedding provider rejected the credentials for {self.name} (HTTP {status or 401}); "
                f"set {key_env_names(self.name) or 'the provider API key'} (or embeddings.api_key)"
            )
        if _retryable(e):
            self._down_until = time.monotonic() + COOLDOWN_S
            self._down_msg = (
                f"the embedding provider for {self.name} is unavailable after {attempts} attempt(s) "
                f"({self._describe(e)})"
            )
            return EmbeddingUnavailable(self._down_msg)
        return EmbeddingProviderError(
            f"the embedding provider refused {self.name} ({self._describe(e)}); check embeddings.model and its settings"
        )


def _field(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, dict) else getattr(item, key, None)


def _model_max_tokens(model: str) -> int:
    try:
        n = _lib().get_model_info(model).get("max_input_tokens")
    except Exception:
        n = None
    return int(n) if isinstance(n, int) and n > 0 else DEFAULT_MAX_INPUT_TOKENS

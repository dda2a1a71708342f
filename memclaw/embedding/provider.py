"""Embeddings from the user's provider through litellm: the second implementation of `embedding.Embedder`.

`embeddings.model = "<provider>/<model>"` (`openai/text-embedding-3-small`, `gemini/text-embedding-004`,
`ollama/nomic-embed-text`, ...). Endpoint and key: `embeddings.api_base` / `embeddings.api_key`, else the provider's
environment variables, which litellm reads itself (`OPENAI_API_KEY`, `OPENAI_API_BASE`, `GEMINI_API_KEY`, ...).

- Requests carry at most `batch_size` inputs (capped at the provider's limit) and MAX_REQUEST_TOKENS tokens; each
  input is cut to the model's input limit (litellm's model info, else `embeddings.max_input_tokens`).
- 429, 5xx, timeouts and dropped connections are retried with exponential backoff (Retry-After honoured, the agent's
  rules: memclaw.llm.client); an authentication error is not retried (`EmbeddingAuthError`, exit 5, naming the key to
  set). Out of retries: `EmbeddingUnavailable`; recall then answers from BM25 and sync leaves the vectors pending.
  After that, calls fail at once for COOLDOWN_S instead of waiting on a provider known to be down. A refused
  connection is not retried, and no later request of this process goes to that address (memclaw.llm.client).
- A provider that needs a key and has none (`embeddings.api_key`, else the provider's variable) is known before
  any request and without importing litellm: `EmbeddingKeyMissing` (an `EmbeddingUnavailable`: the vectors stay
  pending), naming the variable, never retried.
- Query embeddings are cached on disk (memclaw.embedding._query_cache): a repeated recall costs no request and does not
  import litellm. The dimensions come from the first response and are remembered there too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memclaw.embedding._query_cache import QueryCache, default_cache_path
from memclaw.embedding.base import Progress, normalize_rows
from memclaw.errors import EmbeddingAuthError, EmbeddingKeyMissing, EmbeddingProviderError, EmbeddingUnavailable
from memclaw.llm import providers
from memclaw.util.cooldown import Cooldown

if TYPE_CHECKING:
    from memclaw.config import EmbeddingsConfig

log = logging.getLogger(__name__)

# OpenAI's embedding models; others are read from litellm's model info
DEFAULT_MAX_INPUT_TOKENS = 8191
# OpenAI's per-request total
MAX_REQUEST_TOKENS = 300_000
# Inputs per request the providers accept (OpenAI 2048, Gemini's batchEmbedContents 100, Cohere 96, ...).
MAX_INPUTS = {"openai": 2048, "azure": 2048, "gemini": 100, "vertex_ai": 250, "cohere": 96, "voyage": 128}
DEFAULT_MAX_INPUTS = 256
COOLDOWN_S = 30.0
KEY_SETTING = "embeddings.api_key"


def is_provider_model(name: str) -> bool:
    """True for "<provider>/<model>" where the provider is one litellm knows (openai, gemini, ollama, ...) and the
    name is not a local path. Without importing litellm."""
    return providers.is_provider_model(name) and not Path(name).expanduser().exists()


def provider_fingerprint(cfg: EmbeddingsConfig) -> str:
    """What identifies a provider model's vectors: its name and requested dimensions (the endpoint does not)."""
    return f"litellm:{cfg.model}" + (f"/d{cfg.dimensions}" if cfg.dimensions else "")


def cannot_embed(embedder: object) -> EmbeddingUnavailable | None:
    """Why `embedder` cannot embed now (a provider without its key, or down: its `probe`), else None. Local models
    have no probe: they embed or fail to load, which raises."""
    probe = getattr(embedder, "probe", None)
    try:
        if callable(probe):
            probe()
    except EmbeddingUnavailable as e:
        return e
    return None


def _lib() -> Any:
    from memclaw.llm.client import litellm_module as lib

    litellm = lib()
    # litellm's OpenAI embedding path reads `max_retries or litellm.DEFAULT_MAX_RETRIES`, so the 0 we pass (our
    # retries, not the SDK's on top) only holds when that default is 0 too; nothing else reads the attribute.
    litellm.DEFAULT_MAX_RETRIES = 0
    return litellm


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
        # else litellm's model info, read when a text needs it
        self._max_input_tokens = cfg.max_input_tokens
        self._dim: int | None = cfg.dimensions or self.cache.dim(self.fingerprint)
        self._down = Cooldown(COOLDOWN_S)

    # never the key
    def __repr__(self) -> str:
        return f"ProviderEmbedder(model={self.name!r}, api_base={self.api_base!r})"

    @property
    def max_input_tokens(self) -> int:
        if self._max_input_tokens is None:
            self._max_input_tokens = _model_max_tokens(self.name)
        return self._max_input_tokens

    def missing_key(self) -> str | None:
        """One line naming the variable to set when the provider needs a key and none is configured or in the
        environment, else None (no request, no litellm)."""
        return providers.required_key_missing(self.name, self._api_key, KEY_SETTING)

    def _check_key(self) -> None:
        no_key = self.missing_key()
        if no_key:
            raise EmbeddingKeyMissing(no_key)

    def probe(self) -> None:
        """Make sure the provider embeds now: EmbeddingKeyMissing at once without a key, else one one-word request
        (EmbeddingUnavailable when it stays down). The index changes model only after this succeeds."""
        self.encode(["dimensions"])

    @property
    def dim(self) -> int:
        """The model's dimensions: known from an earlier response, else asked for with a one-word request."""
        if self._dim is None:
            self.encode(["dimensions"])
        assert self._dim is not None
        return self._dim

    # ----- Embedder ----------------------------------------------------------------------------------------
    def encode(self, texts: Sequence[str], *, batch_size: int = 64, progress: Progress | None = None) -> np.ndarray:
        # before anything that imports litellm
        self._check_key()
        texts = [self._cut(str(t)) for t in texts]
        rows: list[np.ndarray] = []
        for batch in self._batches(texts, batch_size):
            rows.extend(self._request(batch))
            if progress:
                progress(len(batch))
        if not rows:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        return normalize_rows(np.vstack(rows))

    def encode_query(self, text: str) -> np.ndarray:
        """One query's vector; a repeat is answered from the on-disk cache without a request (nor litellm)."""
        text = str(text) or " "
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
        # providers refuse empty input
        text = text or " "
        if len(text.encode("utf-8", "surrogatepass")) <= self.max_input_tokens:
            return text
        from memclaw.llm.tokens import encoding as tiktoken_encoding

        encoding = tiktoken_encoding("cl100k")
        if encoding is None:  # pragma: no cover - tiktoken ships with litellm: its own copy, through the seam
            import importlib

            _lib()
            encoding = importlib.import_module("litellm.litellm_core_utils.default_encoding").encoding
        tokens = encoding.encode(text, disallowed_special=())
        return text if len(tokens) <= self.max_input_tokens else encoding.decode(tokens[: self.max_input_tokens])

    def _batches(self, texts: list[str], batch_size: int) -> Iterator[list[str]]:
        limit = max(1, min(batch_size, self.max_inputs))
        batch: list[str] = []
        tokens = 0
        for t in texts:
            # a cheap upper-bound-ish estimate of tokens (chars/4 is typical)
            n = len(t) // 2 + 1
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
            # retries are ours (the provider SDK's own would multiply them)
            "max_retries": 0,
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
        from memclaw.llm import client

        self._check_key()
        circuit = client.circuit_key(self.name, self.api_base)
        if self._down.down() is not None or client.circuit_open(circuit) is not None:
            # Down a moment ago, and said then: not asked again, nor said again.
            raise EmbeddingUnavailable(f"the embedding provider for {self.name} is still unavailable")
        lib = _lib()
        attempts = 1 + self.max_retries
        for attempt in range(1, attempts + 1):
            try:
                resp = lib.embedding(**self._kwargs(batch))
                return self._vectors(resp, len(batch))
            except EmbeddingProviderError:
                raise
            # litellm maps provider errors to its own exception classes
            except Exception as e:
                failed = client.describe_failure(e, api_base=self.api_base, timeout_s=self.timeout_s)
                client.trip_circuit(circuit, failed)
                if not client.retryable(e) or attempt == attempts or failed.kind == client.CONNECT_FAILED:
                    raise self._error(e, attempt) from None
                wait = client.backoff_seconds(attempt, e, self.backoff_base_s, self.max_backoff_s)
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
        from memclaw.llm.client import describe_failure, scrub

        text = describe_failure(e, api_base=self.api_base, timeout_s=self.timeout_s).text
        return scrub(text, [self._api_key or ""])

    def _error(self, e: BaseException, attempts: int) -> EmbeddingProviderError:
        from memclaw.llm.client import retryable

        lib = _lib()
        status = getattr(e, "status_code", None)
        if isinstance(e, lib.AuthenticationError) or status in (401, 403):
            return EmbeddingAuthError(
                f"the embedding provider rejected the credentials for {self.name} (HTTP {status or 401}); "
                f"set {providers.key_env_names(self.name) or 'the provider API key'} (or {KEY_SETTING})"
            )
        if retryable(e):
            why = self._describe(e)
            self._down.trip(why)
            return EmbeddingUnavailable(
                f"the embedding provider for {self.name} is unavailable after {attempts} attempt(s) ({why})"
            )
        return EmbeddingProviderError(
            f"the embedding provider refused {self.name} ({self._describe(e)}); check embeddings.model and its settings"
        )


def _field(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, dict) else getattr(item, key, None)


def _model_max_tokens(model: str) -> int:
    from memclaw.llm.client import model_info

    n = model_info(model).get("max_input_tokens")
    return int(n) if isinstance(n, int) and n > 0 else DEFAULT_MAX_INPUT_TOKENS

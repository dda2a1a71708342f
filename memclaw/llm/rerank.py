"""A provider's re-ranker through litellm's rerank API (Cohere, Jina, Voyage, a local Infinity or TEI server).

`rerank_scores` sends one request and returns one score per document, in the documents' order. It is asked once:
re-ranking sits on recall's hot path, where the fused order is a good answer already, so a failure is not retried.
Every failure is a `RerankError` in one line naming the address, never the key. A refused connection trips the
endpoint's circuit (memclaw.llm.client), so the same process does not ask it again for a while.

litellm 1.106's rerank providers that take `api_base`: `cohere/` (+ /v1/rerank or /v2/rerank; default
api.cohere.com), `infinity/` (+ /rerank, required), `huggingface/` (Text Embeddings Inference: + /rerank), `jina_ai/`,
`voyage/`, `together_ai/`, `hosted_vllm/`, `deepinfra/` and `azure_ai/`. litellm maps each answer to Cohere's shape:
`results` of `index` and `relevance_score`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

from memclaw.errors import RerankError
from memclaw.llm import providers

KEY_SETTING = "recall.rerank.api_key"


class _QuietRerankFailures(logging.Filter):
    """litellm logs every failed rerank at ERROR before raising it; memclaw says the failure once, its own way."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Error in rerank")


_QUIET = _QuietRerankFailures()


def rerank_scores(
    *,
    model: str,
    query: str,
    documents: Sequence[str],
    api_base: str | None,
    api_key: str | None,
    timeout_s: float,
) -> list[float | None]:
    """One relevance score per document (None: the provider left it out), in the order of `documents`.

    Raises RerankError when the key is missing, the endpoint fails or times out, or the answer is malformed:
    indices out of range or repeated, scores that are not finite numbers."""
    from memclaw.llm import client

    if not documents:
        return []
    no_key = providers.required_key_missing(model, api_key, KEY_SETTING)
    if no_key and not providers.is_local_url(api_base):
        raise RerankError(no_key)
    circuit = client.circuit_key(model, api_base)
    down = client.circuit_open(circuit)
    if down is not None:
        raise RerankError(f"the re-ranker {model} is unavailable: {down}")
    lib = client.litellm_module()
    litellm_log = logging.getLogger("LiteLLM")
    if _QUIET not in litellm_log.filters:
        litellm_log.addFilter(_QUIET)
    kw: dict[str, Any] = {
        "model": model,
        "query": query,
        "documents": list(documents),
        "top_n": len(documents),
        "return_documents": False,
        "timeout": timeout_s,
        "max_retries": 0,
    }
    if api_base:
        kw["api_base"] = api_base
    if api_key:
        kw["api_key"] = api_key
    try:
        resp = lib.rerank(**kw)
    # litellm maps provider errors to its own exception classes
    except Exception as e:
        failed = client.describe_failure(e, api_base=api_base, timeout_s=timeout_s)
        client.trip_circuit(circuit, failed)
        raise RerankError(f"the re-ranker {model} failed: {client.scrub(failed.text, [api_key or ''])}") from None
    return _scores(resp, len(documents), model)


def _scores(resp: Any, n: int, model: str) -> list[float | None]:
    """The scores of a rerank response, checked: each index within the documents and given once."""
    results = _field(resp, "results")
    if not isinstance(results, list):
        raise RerankError(f"the re-ranker {model} answered without results")
    out: list[float | None] = [None] * n
    for r in results:
        index, score = _field(r, "index"), _field(r, "relevance_score")
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < n:
            raise RerankError(f"the re-ranker {model} answered index {str(index)[:20]!r} for {n} documents")
        if out[index] is not None:
            raise RerankError(f"the re-ranker {model} scored document {index} twice")
        if not isinstance(score, (int, float)) or isinstance(score, bool) or not math.isfinite(score):
            raise RerankError(f"the re-ranker {model} answered a score that is not a number for document {index}")
        out[index] = float(score)
    return out


def _field(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, dict) else getattr(item, key, None)

"""A scripted rerank server on 127.0.0.1 for tests (a sibling of tests/llm_server.py): Cohere's rerank API, which
Infinity and Jina answer alike, and Text Embeddings Inference's (`texts` in, a list of `index` and `score` out).

Real HTTP: litellm's `rerank` talks to it exactly as to a provider. With an empty queue it scores each document by
the query words it holds (deterministic), so tests can predict the order; scripted items answer errors, malformed
bodies, delays or hand-written results.

    server.status(500)                               # one HTTP 500
    server.raw("{not json")                          # a malformed body
    server.results([(7, 0.9)])                       # an index out of range
    server.requests[-1]["documents"]                 # what the client sent
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.llm_server import Scripted, ScriptedLLMServer


def overlap_score(query: str, document: str) -> float:
    """The share of the query's words the document holds, with a tie-break by the document's length."""
    words = set(re.findall(r"\w+", query.lower()))
    held = set(re.findall(r"\w+", document.lower()))
    return len(words & held) / max(1, len(words)) + 1e-4 / (1 + len(document))


class ScriptedRerankServer(ScriptedLLMServer):
    paths = ("/v1/rerank", "/v2/rerank", "/rerank")

    def __init__(self) -> None:
        super().__init__()
        # scores by word overlap
        self.default = Scripted()

    def answer(self, item: Scripted, req: dict[str, Any]) -> bytes:
        if item.message is not None:
            results = item.message["results"]
        else:
            sent = req.get("documents") or req.get("texts") or []
            docs = [d if isinstance(d, str) else d.get("text", "") for d in sent]
            scored = sorted(
                ((i, overlap_score(str(req.get("query", "")), d)) for i, d in enumerate(docs)), key=lambda x: -x[1]
            )
            results = [{"index": i, "relevance_score": s} for i, s in scored][: req.get("top_n") or None]
        if "texts" in req:
            # Text Embeddings Inference
            return json.dumps([{"index": r["index"], "score": r["relevance_score"]} for r in results]).encode()
        body = {"id": "rerank-1", "results": results, "meta": {"billed_units": {"search_units": 1}}}
        return json.dumps(body).encode()

    def results(self, pairs: list[tuple[Any, Any]]) -> ScriptedRerankServer:
        """Answer once with these (index, relevance_score) pairs as they are."""
        return self.push(Scripted(message={"results": [{"index": i, "relevance_score": s} for i, s in pairs]}))

    @property
    def base(self) -> str:
        """The api_base to give litellm (it appends the provider's path)."""
        return f"http://127.0.0.1:{self.port}"


@contextmanager
def rerank_server() -> Iterator[ScriptedRerankServer]:
    server = ScriptedRerankServer().start()
    try:
        yield server
    finally:
        server.stop()

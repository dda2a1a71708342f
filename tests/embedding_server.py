"""A scripted OpenAI-compatible `/v1/embeddings` server on 127.0.0.1 for tests (a sibling of tests/llm_server.py).

Real HTTP: litellm talks to it exactly as to a provider. Its vectors are deterministic hashed character n-grams
(word unigrams and character 3-grams, signed hashing into `dim` buckets), so texts that share words or spellings
are close and recall through it is meaningful. Every request body is kept, so tests count requests and batch sizes.
With an empty queue it answers with vectors; `server.default` changes that (e.g. Scripted(status=503): an outage).

    server.status(429, headers={"Retry-After": "0"})   # one 429, then vectors
    server.status(401)                                 # a rejected key
    server.push(Scripted(delay=5))                     # a late answer (client timeouts)
    server.inputs                                      # the input list of every request, in order
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.llm_server import Scripted, ScriptedLLMServer

DIM = 96


def hashed_vector(text: str, dim: int = DIM) -> list[float]:
    v = [0.0] * dim
    for w in re.findall(r"\w+", text.lower()):
        feats = [("w:" + w, 1.0)] + [("c:" + f"#{w}#"[i : i + 3], 0.5) for i in range(len(w))]
        for feat, weight in feats:
            d = hashlib.md5(feat.encode()).digest()
            v[int.from_bytes(d[:4], "little") % dim] += weight if d[4] & 1 else -weight
    if not any(v):
        v[0] = 1.0
    return v


class ScriptedEmbeddingServer(ScriptedLLMServer):
    paths = ("/v1/embeddings", "/embeddings")

    def __init__(self, dim: int = DIM) -> None:
        super().__init__()
        self.dim = dim
        self.default = Scripted()  # vectors

    def answer(self, item: Scripted, req: dict[str, Any]) -> bytes:
        inputs = req.get("input")
        inputs = [inputs] if isinstance(inputs, str) else list(inputs or [])
        b64 = req.get("encoding_format") == "base64"
        data = []
        for i, text in enumerate(inputs):
            vec = hashed_vector(str(text), self.dim)
            emb: Any = base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode() if b64 else vec
            data.append({"object": "embedding", "index": i, "embedding": emb})
        n = sum(len(str(t).split()) for t in inputs)
        body = {
            "object": "list",
            "data": data,
            "model": req.get("model", "scripted"),
            "usage": {"prompt_tokens": n, "total_tokens": n},
        }
        return json.dumps(body).encode()

    @property
    def inputs(self) -> list[list[str]]:
        with self._lock:
            return [list(r["input"]) if isinstance(r.get("input"), list) else [r.get("input")] for r in self.requests]


@contextmanager
def embedding_server(dim: int = DIM) -> Iterator[ScriptedEmbeddingServer]:
    server = ScriptedEmbeddingServer(dim).start()
    try:
        yield server
    finally:
        server.stop()

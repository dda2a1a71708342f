"""The layout is the pipeline (ARCHITECTURE.md): every import in the package runs down the layers, never up, and
each external system is imported by its one package only. Function-level and TYPE_CHECKING imports count too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "memclaw"

# layer of each top-level part of the package (ARCHITECTURE.md's table); a part may import its own layer's
# modules only when they are the same part, and any lower layer
LAYERS: dict[str, float] = {
    "errors": 0,
    "util": 0.1,
    "prompts": 0.2,
    "defaults": 0.25,
    "config": 0.3,
    "runtime": 0.4,
    "markdown": 1,
    "workspace": 2,
    "permission_errors": 2.5,
    "llm": 3,
    "store": 3,
    "embedding": 4,
    "index": 5,
    "recall": 6,
    "service": 7,
    "tools": 7.5,
    "context": 8,
    "agent": 9,
    "channels": 10,
    "mcpserver": 11.5,
    "cli": 12,
    "bench": 11,
    "importers": 11.5,
}
SEAMS: dict[str, str] = {
    "litellm": "llm",
    "openai": "llm",
    "chromadb": "store",
    "sentence_transformers": "embedding",
    "transformers": "embedding",
    "onnxruntime": "embedding",
    "tokenizers": "embedding",
    "torch": "embedding",
    "onnx": "embedding",
    "discord": "channels.discord",
    "mcp": "mcpserver",
    "mcp_types": "mcpserver",
    "uvicorn": "mcpserver",
    "starlette": "mcpserver",
}
ROOT_OK = {"__init__"}  # memclaw/__init__.py re-exports lazily; not a layer of its own


def _part(module: str) -> str:
    """'memclaw.index.sync' -> 'index'."""
    return module.split(".")[1] if module.count(".") else "__init__"


def _modules() -> list[tuple[str, Path]]:
    out = []
    for f in sorted(PKG.rglob("*.py")):
        rel = f.relative_to(PKG.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out.append((".".join(parts), f))
    return out


def _imports(path: Path, module: str) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text("utf-8"))
    pkg = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[: len(base) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            if name == "memclaw":  # `from memclaw import x`: x is a submodule or a root name
                found += [(f"memclaw.{a.name}", node.lineno) for a in node.names]
            else:
                found.append((name, node.lineno))
    return found


def test_every_part_of_the_package_has_a_layer():
    parts = {_part(m) for m, _ in _modules()} - ROOT_OK
    assert parts <= set(LAYERS), sorted(parts - set(LAYERS))


def test_no_import_runs_up_the_layers():
    bad = []
    for module, path in _modules():
        src = _part(module)
        if src in ROOT_OK:
            continue
        for name, line in _imports(path, module):
            if not name.startswith("memclaw.") or name == "memclaw":
                continue
            dst = _part(name)
            if dst in ROOT_OK or dst == src or dst.startswith("__"):  # (memclaw.__version__)
                continue
            if LAYERS[dst] >= LAYERS[src]:
                bad.append(
                    f"{path.relative_to(PKG.parent)}:{line} ({src}, layer {LAYERS[src]}) imports {name} "
                    f"({dst}, layer {LAYERS[dst]})"
                )
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("lib", sorted(SEAMS))
def test_each_external_system_is_imported_by_its_package_only(lib):
    home = SEAMS[lib]
    bad = []
    for module, path in _modules():
        inside = module == f"memclaw.{home}" or module.startswith(f"memclaw.{home}.")
        for name, line in _imports(path, module):
            if (name == lib or name.startswith(lib + ".")) and not inside:
                bad.append(f"{path.relative_to(PKG.parent)}:{line} imports {name}")
    assert not bad, "\n".join(bad)


def test_no_private_name_is_imported_across_modules():
    bad = []
    for _module, path in _modules():
        tree = ast.parse(path.read_text("utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("memclaw"):
                for a in node.names:
                    if a.name.startswith("_") and not a.name.startswith("__"):
                        bad.append(f"{path.relative_to(PKG.parent)}:{node.lineno} imports {node.module}.{a.name}")
    assert not bad, "\n".join(bad)


def test_a_private_module_is_imported_only_inside_its_package():
    """`memclaw/index/_bm25.py` is the index's own: only modules of `memclaw.index` may import it."""
    bad = []
    for module, path in _modules():
        importer_pkg = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        for name, line in _imports(path, module):
            if not name.startswith("memclaw."):
                continue
            parts = name.split(".")
            for i, part in enumerate(parts):
                if part.startswith("_") and not part.startswith("__"):
                    owner = ".".join(parts[:i])
                    if importer_pkg != owner and not importer_pkg.startswith(owner + "."):
                        bad.append(f"{path.relative_to(PKG.parent)}:{line} imports {name}")
                    break
    assert not bad, "\n".join(bad)

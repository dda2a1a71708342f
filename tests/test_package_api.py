"""`memclaw.bench` and `memclaw.cli` name their public modules in `__all__` (pydantic-ai's manner): the rest are
their internals. Code outside a package (memclaw's other packages, benchmarks/, tools/) imports only the public
ones; the tests may reach any module."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("memclaw.bench", "memclaw.cli")


def _imports_from_outside(package: str) -> dict[str, set[str]]:
    """Each module of `package` imported by code outside it -> the files that import it."""
    inside = REPO / Path(*package.split("."))
    found: dict[str, set[str]] = {}
    files = [*(REPO / "memclaw").rglob("*.py"), *(REPO / "benchmarks").rglob("*.py"), *(REPO / "tools").rglob("*.py")]
    for path in files:
        if inside in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module == package:
                    names = [a.name for a in node.names]
                elif node.module.startswith(package + "."):
                    names = [node.module[len(package) + 1 :].split(".")[0]]
            elif isinstance(node, ast.Import):
                names = [
                    a.name[len(package) + 1 :].split(".")[0] for a in node.names if a.name.startswith(package + ".")
                ]
            for name in names:
                found.setdefault(name, set()).add(str(path.relative_to(REPO)))
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_all_names_the_public_modules_and_only_they_are_imported_from_outside(package):
    mod = importlib.import_module(package)
    modules = {m.name for m in pkgutil.iter_modules(mod.__path__)}
    assert set(mod.__all__) <= modules, set(mod.__all__) - modules
    assert all(name in mod.__doc__ for name in mod.__all__)
    outside = _imports_from_outside(package)
    reached = {name: files for name, files in outside.items() if name not in mod.__all__}
    assert not reached, f"internal modules of {package} imported from outside it: {reached}"

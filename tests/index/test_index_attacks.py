"""Hostile files in the index folder (issue 18.1): nothing memclaw reads from disk may run code.

The index is derived data in `.memclaw-index/` beside the Markdown: anyone who can write there (a synced folder, a
shared workspace, a restored backup) must not be able to run code as the user. The state used to be a pickle
behind an unkeyed sha256 (`MEMCLAW-STATE-2\\n` + sha256(body) + body): a crafted body ran `os.system` on the
next `memclaw recall`. These tests write exactly that attack, and its variants, and run the real console script.
A static check then makes sure no loader of memclaw can come back to pickle.
"""

from __future__ import annotations

import ast
import hashlib
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MEMORY = "# Family\n- My sister Lena lives in Porto\n- I work at Solaris Energy\n"
HISTORY = "[2026-03-02 18:10] Talked about the trip to Porto in April.\n"


class _RunsCode:
    """Unpickling this calls os.system: what a hostile state file carries."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def _memclaw(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The installed console script, in a child process (as a user runs it)."""
    script = Path(sys.executable).with_name("memclaw")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "memclaw.cli.main"]
    env = {**os.environ, "MEMCLAW_HOME": str(home), "COLUMNS": "400", **(env or {})}
    return subprocess.run([*cmd, *args], env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture
def synced_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    assert _memclaw(home, "onboard").returncode == 0
    mem = home / "workspace" / "memory"
    (mem / "MEMORY.md").write_text(MEMORY, "utf-8")
    (mem / "HISTORY.md").write_text(HISTORY, "utf-8")
    r = _memclaw(home, "memory", "sync")
    assert r.returncode == 0, r.stderr
    return home


def _scope_dirs(home: Path) -> list[Path]:
    dirs = sorted(p for p in (home / "workspace" / ".memclaw-index" / "scopes").iterdir() if p.is_dir())
    assert dirs
    return dirs


def _attack(marker: Path) -> bytes:
    body = pickle.dumps(_RunsCode(f"touch {marker}"))
    return b"MEMCLAW-STATE-2\n" + hashlib.sha256(body).digest() + body


def _recall_works(home: Path) -> subprocess.CompletedProcess:
    r = _memclaw(home, "recall", "where does my sister live", "--json", "-k", "1")
    assert r.returncode == 0, r.stderr
    assert "Porto" in r.stdout
    return r


def test_a_crafted_pickle_state_runs_no_code(synced_home: Path, tmp_path: Path) -> None:
    """The exact attack of the issue: a pickle that calls os.system, with a valid sha256, at the state path of an
    index an older memclaw wrote. `memclaw recall` answers from the Markdown, says once that it rebuilds the index's
    state (keeping the vectors), and runs nothing."""
    marker = tmp_path / "pwned-old-path"
    for d in _scope_dirs(synced_home):
        for f in d.iterdir():  # the index as an older memclaw left it: its state files only
            f.unlink()
        (d / "state.pkl").write_bytes(_attack(marker))
        (d / "lexical.bm25").write_bytes(_attack(marker))
    r = _recall_works(synced_home)
    assert not marker.exists(), "code from the index ran"
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert "older" in lines[0] and "rebuil" in lines[0] and "corrupt" not in lines[0], lines
    for d in _scope_dirs(synced_home):  # read once, then gone: the next run says nothing
        assert not (d / "state.pkl").exists() and not (d / "lexical.bm25").exists()
    assert _recall_works(synced_home).stderr.strip() == ""
    assert not marker.exists()


def test_a_crafted_file_at_the_state_path_runs_no_code(synced_home: Path, tmp_path: Path) -> None:
    """The same payload written over whatever file holds the state now: it is damage, rebuilt, never executed; and
    planted beside a current state, under the old names: never read."""
    marker = tmp_path / "pwned-new-path"
    for d in _scope_dirs(synced_home):
        for f in d.iterdir():
            if f.is_file() and f.name != "DIRTY":
                f.write_bytes(_attack(marker))
    r = _recall_works(synced_home)
    assert "corrupted" in r.stderr and "rebuilding" in r.stderr
    assert not marker.exists(), "code from the index ran"
    for d in _scope_dirs(synced_home):
        (d / "state.pkl").write_bytes(_attack(marker))
        (d / "lexical.bm25").write_bytes(_attack(marker))
    assert _recall_works(synced_home).stderr.strip() == ""
    assert not marker.exists(), "code from the index ran"


def test_a_crafted_pickle_in_chromas_segment_runs_no_code(tmp_path: Path) -> None:
    """Chroma keeps `index_metadata.pickle` in each HNSW segment folder. Its Rust engine (the one memclaw's chromadb
    runs) decodes it as data only: a pickle naming os.system is refused as damage, and memclaw rebuilds the
    vectors from the Markdown. (HNSW segment files appear past 1,000 vectors; memclaw's deterministic hash-test
    embedder makes 1,100 quickly: the attack is on Chroma's files, not the model.)"""
    home = tmp_path / "home"
    home.mkdir()
    env = {"MEMCLAW_EMBEDDINGS__MODEL": "hash-test"}
    assert _memclaw(home, "onboard", env=env).returncode == 0
    facts = "".join(f"- Shelf {i} in the archive holds box {i * 7}\n" for i in range(1100))
    (home / "workspace" / "memory" / "MEMORY.md").write_text("# Archive\n" + facts + "- I work at Solaris Energy\n")
    assert _memclaw(home, "memory", "sync", env=env).returncode == 0
    marker = tmp_path / "pwned-chroma"
    chroma = home / "workspace" / ".memclaw-index" / "chroma"
    planted = [seg / "index_metadata.pickle" for seg in chroma.iterdir() if (seg / "index_metadata.pickle").is_file()]
    assert planted, "no HNSW segment on disk: Chroma's sync threshold changed?"
    for f in planted:
        f.write_bytes(pickle.dumps(_RunsCode(f"touch {marker}")))
    r = _memclaw(home, "recall", "where do I work", "--json", "-k", "1", env=env)
    assert r.returncode == 0 and "Solaris" in r.stdout, r.stderr
    said = " ".join(r.stderr.split())
    assert "damaged" in said and "rebuilt the index from the Markdown" in said
    assert not marker.exists(), "code from Chroma's files ran"


# ----- no loader can come back to pickle ------------------------------------------------------------------
_UNSAFE_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "joblib", "shelve", "marshal", "jsonpickle"}


def _sources() -> list[Path]:
    return sorted([*(REPO / "memclaw").rglob("*.py"), *(REPO / "benchmarks").rglob("*.py")])


def _call_name(node: ast.Call) -> str:
    f = node.func
    parts = []
    while isinstance(f, ast.Attribute):
        parts.append(f.attr)
        f = f.value
    if isinstance(f, ast.Name):
        parts.append(f.id)
    return ".".join(reversed(parts))


def _keyword_is(node: ast.Call, name: str, value: object) -> bool:
    return any(k.arg == name and isinstance(k.value, ast.Constant) and k.value.value is value for k in node.keywords)


def test_no_module_of_memclaw_can_unpickle() -> None:
    """No import of pickle (or a pickle-based loader) anywhere in memclaw/ or benchmarks/; np.load only with
    allow_pickle=False; torch.load only with weights_only=True; yaml only through safe_load; no eval/exec."""
    problems = []
    for path in _sources():
        tree = ast.parse(path.read_text("utf-8"), str(path))
        rel = path.relative_to(REPO)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                problems += [f"{rel}:{node.lineno} imports {a.name}" for a in node.names
                             if a.name.split(".")[0] in _UNSAFE_MODULES]  # fmt: skip
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in _UNSAFE_MODULES:
                problems.append(f"{rel}:{node.lineno} imports from {node.module}")
            elif isinstance(node, ast.Call):
                name = _call_name(node)
                if name.endswith(("np.load", "numpy.load")) and not _keyword_is(node, "allow_pickle", False):
                    problems.append(f"{rel}:{node.lineno} calls {name} without allow_pickle=False")
                if name.endswith("torch.load") and not _keyword_is(node, "weights_only", True):
                    problems.append(f"{rel}:{node.lineno} calls {name} without weights_only=True")
                if name in ("eval", "exec"):
                    problems.append(f"{rel}:{node.lineno} calls {name}")
                if name in ("yaml.load", "yaml.unsafe_load", "yaml.full_load", "yaml.load_all"):
                    problems.append(f"{rel}:{node.lineno} calls {name} (use yaml.safe_load)")
    assert not problems, "\n".join(problems)


def test_an_index_dir_holding_foreign_files_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    """`memory.index_dir = "/etc"` (here a temp folder holding files of its own): memclaw used to write manifest.json,
    chroma/, scopes/ and sync.lock among them. Refused in one line, exit 2, nothing written; memclaw's own is used."""
    home = tmp_path / "home"
    home.mkdir()
    assert _memclaw(home, "onboard").returncode == 0
    (home / "workspace" / "memory" / "MEMORY.md").write_text(MEMORY, "utf-8")
    etc = tmp_path / "etc"
    (etc / "ssh").mkdir(parents=True)
    (etc / "passwd").write_text("root:x:0:0::/root:/bin/sh\n", "utf-8")
    before = sorted(p.name for p in etc.rglob("*"))
    for args in (("memory", "sync"), ("recall", "where does my sister live")):
        r = _memclaw(home, *args, env={"MEMCLAW_MEMORY__INDEX_DIR": str(etc)})
        assert r.returncode == 2, r.stderr
        lines = [line for line in r.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and str(etc) in lines[0] and "memory.index_dir" in lines[0], r.stderr
    assert sorted(p.name for p in etc.rglob("*")) == before
    assert _memclaw(home, "memory", "sync").returncode == 0  # the default index folder is memclaw's own
    r = _memclaw(home, "memory", "sync", env={"MEMCLAW_MEMORY__INDEX_DIR": str(tmp_path / "new-index")})
    assert r.returncode == 0, r.stderr
    r = _memclaw(home, "memory", "sync", env={"MEMCLAW_MEMORY__INDEX_DIR": str(tmp_path / "new-index")})
    assert r.returncode == 0, r.stderr  # (a folder memclaw made is its own the next time)

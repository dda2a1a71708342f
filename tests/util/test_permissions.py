"""Issue 13.7: every path memclaw touches made unreadable, then read-only, in turn; every command run on it.

Each run must end in one line and a documented exit code: 0 (it worked, perhaps with a warning), or exactly one
line `Error: ...` on stderr with 2 (config / workspace) or 3 (memory file or index), never a traceback or exit 1.
The Markdown is never changed by a command that failed.

A memory file made read-only is left as it is by every command (a rename would replace it whatever its mode).

The commands run as the real console script in a child process. CI runs as root, whom file permissions do not
stop: the child then gives up root's file-permission override (CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH are
dropped from its capability bounding set before the exec, so the new program never has them), and the
permissions apply to it as to the files' owner. As a normal user the child runs as it is.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

PR_CAPBSET_DROP = 24
CAP_DAC_OVERRIDE = 1
CAP_DAC_READ_SEARCH = 2

INDEX = "workspace/.memclaw-index"
WRITTEN = [  # paths memclaw writes in (or replaces): made unreadable, then read-only
    ".",  # MEMCLAW_HOME
    "workspace",
    "workspace/memory",
    "workspace/memory/MEMORY.md",
    "workspace/memory/HISTORY.md",
    INDEX,
    f"{INDEX}/scopes",
    f"{INDEX}/chroma",
]
READ = ["config.toml", "workspace/AGENTS.md", f"{INDEX}/manifest.json"]  # only read (or replaced): unreadable
CASES = [(rel, "unreadable") for rel in WRITTEN + READ] + [(rel, "read-only") for rel in WRITTEN]
COMMANDS = [  # `memory stats` is part of `status`; `agent` and `chat` need a model server: their memory is this
    ["onboard"],
    ["recall", "where does my sister live"],
    ["memory", "sync"],
    ["memory", "add", "My bike is green", "--date", "2026-11-26"],
    ["status"],
    ["context", "where does my sister live"],
]
MEMORY = "# Family\n- My sister Lena lives in Porto\n"
HISTORY = "[2026-03-02 18:10] Talked about the trip to Porto in April.\n"


def _drop_file_permission_override() -> None:  # pragma: no cover - runs in the child between fork and exec
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


def memclaw(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "MEMCLAW_HOME": str(home), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "memclaw.cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_drop_file_permission_override if os.geteuid() == 0 else None,
    )


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> tuple[Path, Path]:
    """An onboarded, synced home (config, workspace, memory, the index) and a copy of it to restore it from: each
    case runs at the path the index was built at (a moved workspace is rebuilt, with a warning)."""
    base = tmp_path_factory.mktemp("perm")
    home = base / "home"
    home.mkdir()
    assert memclaw(home, "onboard").returncode == 0
    ws = home / "workspace"
    (ws / "memory" / "MEMORY.md").write_text(MEMORY, "utf-8")
    (ws / "memory" / "HISTORY.md").write_text(HISTORY, "utf-8")
    r = memclaw(home, "memory", "sync")
    assert r.returncode == 0, r.stderr
    for rel, _how in CASES:
        assert (home / rel).exists(), rel
    shutil.copytree(home, base / "copy", symlinks=True)
    return home, base / "copy"


def test_the_child_really_loses_the_override(tmp_path):
    """The premise of this file: a file with mode 000 cannot be read by the child, even when the test is root."""
    f = tmp_path / "secret"
    f.write_text("x")
    f.chmod(0)
    r = subprocess.run(
        ["cat", str(f)],
        capture_output=True,
        preexec_fn=_drop_file_permission_override if os.geteuid() == 0 else None,
    )
    assert r.returncode != 0 and b"Permission denied" in r.stderr


def _restrict(path: Path, how: str) -> int:
    old = stat.S_IMODE(path.stat().st_mode)
    if how == "unreadable":
        path.chmod(0)
    else:  # read-only
        path.chmod(0o555 if path.is_dir() else 0o444)
    return old


def _user_files(home: Path) -> dict[str, bytes]:
    ws = home / "workspace"
    return {p.name: p.read_bytes() for p in (ws / "memory" / "MEMORY.md", ws / "memory" / "HISTORY.md")}


@pytest.mark.parametrize(("rel", "how"), CASES)
def test_every_command_on_an_unusable_path_is_one_line_and_a_documented_exit_code(pristine, rel, how):
    home, copy = pristine
    shutil.rmtree(home)
    shutil.copytree(copy, home, symlinks=True)
    target = home / rel
    before = _user_files(home)
    old = _restrict(target, how)
    try:
        results = [(args, memclaw(home, *args)) for args in COMMANDS]
    finally:
        target.chmod(old)
    problems = []
    for args, r in results:
        shown = f"memclaw {' '.join(args)} [{rel} {how}] -> exit {r.returncode}: {r.stderr.strip()[-600:]!r}"
        lines = r.stderr.strip().splitlines()
        undocumented = "Traceback" in r.stderr or r.returncode not in (0, 2, 3)
        not_one_line = r.returncode != 0 and (len(lines) != 1 or not lines[0].startswith("Error: "))
        if undocumented or not_one_line:
            problems.append(shown)
        elif r.returncode and "permission" not in lines[0]:
            problems.append(shown + " (does not say it is about permissions)")
    assert not problems, "\n".join(problems)
    after = _user_files(home)
    add = dict((tuple(a), r) for a, r in results)[tuple(COMMANDS[3])]
    if rel.endswith("MEMORY.md"):  # a memory file made read-only (or unreadable) is left as it is
        assert add.returncode == 3 and str(target) in add.stderr, add.stderr
        assert after == before
    if after != before:  # only `memory add` writes the Markdown, and says so if the index then failed
        assert add.returncode == 0 or "the fact is saved in" in add.stderr, add.stderr
        assert (
            after["MEMORY.md"].endswith(b"- My bike is green (2026-11-26)\n")
            and after["HISTORY.md"] == before["HISTORY.md"]
        )


def test_a_read_only_memory_file_is_refused_by_every_writer(pristine):
    """A user who makes MEMORY.md or HISTORY.md read-only means it: `memory add` and `memory forget` (a fact, a
    history entry) leave it as it is (an atomic replace would rename over it), with one line naming the file and
    the chmod, exit 3; the same commands work once it is writable again."""
    home, copy = pristine
    shutil.rmtree(home)
    shutil.copytree(copy, home, symlinks=True)
    memory = home / "workspace" / "memory"
    listed = json.loads(memclaw(home, "memory", "list", "--json").stdout)
    ids = {row["kind"]: row["id"] for row in listed}
    for name, args in (
        ("MEMORY.md", ["memory", "add", "My bike is green", "--date", "2026-11-26"]),
        ("MEMORY.md", ["memory", "forget", ids["fact"]]),
        ("HISTORY.md", ["memory", "forget", ids["history"]]),
    ):
        path = memory / name
        before = _user_files(home), path.stat().st_ino
        path.chmod(0o444)
        r = memclaw(home, *args)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 3 and len(lines) == 1, (args, r.returncode, r.stderr)
        assert lines[0].startswith("Error: ") and str(path) in lines[0] and "read-only" in lines[0], lines[0]
        assert f"chmod u+w {path}" in lines[0], lines[0]
        assert (_user_files(home), path.stat().st_ino) == before and stat.S_IMODE(path.stat().st_mode) == 0o444
        path.chmod(0o644)
        r = memclaw(home, *args)
        assert r.returncode == 0 and _user_files(home) != before[0], r.stderr

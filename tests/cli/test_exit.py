"""How the console script ends. Background start-up work (the vector store opened by `recall` and `context`, the
model loaded early) is waited for on every exit path: a recall that has nothing to search ended while chromadb was
still being imported in its thread, and the interpreter's shutdown under it crashed the process (exit 139, 4 runs in
5). A reader that closes the output (`| head -1`) ends the command quietly with 141."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memclaw.cli.exits import BROKEN_PIPE_EXIT
from memclaw.service.facade import Prefetch
from memclaw.util.background import background_thread, wait_for_background

REPO = Path(__file__).resolve().parents[2]
RUNS = 5


def cli(home: Path, *args: str, stdout: int | None = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    """The console script in a child process, with MEMCLAW_HOME at the test's temp home."""
    env = dict(os.environ, MEMCLAW_HOME=str(home), COLUMNS="120")
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", LITELLM_LOCAL_MODEL_COST_MAP="True")
    return subprocess.run(
        [sys.executable, "-m", "memclaw.cli.main", *args],
        cwd=REPO,
        env=env,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=300,
    )


@pytest.fixture
def home(memclaw_home: Path) -> Path:
    """An onboarded MEMCLAW_HOME (the test's temp dir): the default workspace, with no memories."""
    p = cli(memclaw_home, "onboard")
    assert p.returncode == 0, p.stderr
    return memclaw_home


def test_background_threads_are_waited_for_and_are_not_daemons():
    done = threading.Event()
    thread = background_thread(lambda: (time.sleep(0.3), done.set()), "test-background")
    assert not thread.daemon  # the interpreter's own exit waits for it too
    thread.start()
    wait_for_background()
    assert done.is_set()
    prefetch = Prefetch(lambda: None, "test-prefetch")
    prefetch.start()
    wait_for_background()
    assert prefetch.join() is None


def test_every_exit_of_the_console_script_waits_for_background_work(home):
    """A usage error (click's, at once) while a background thread still runs: the thread finishes before the
    process ends. The thread ends only once the usage error is written, so the order holds on a loaded machine."""
    code = (
        "import sys, threading\n"
        "from memclaw.cli.main import main\n"
        "from memclaw.util.background import background_thread\n"
        "said = threading.Event()\n"
        "class Err:\n"
        "    def __init__(self, stream):\n"
        "        self._stream = stream\n"
        "    def write(self, text):\n"
        "        n = self._stream.write(text)\n"
        "        if 'argument' in text.lower():\n"
        "            said.set()\n"
        "        return n\n"
        "    def __getattr__(self, name):\n"
        "        return getattr(self._stream, name)\n"
        "sys.stderr = Err(sys.stderr)\n"
        "def work():\n"
        "    said.wait(120)\n"
        "    sys.stderr.write('background done\\n')\n"
        "t = background_thread(work, 'test')\n"
        "t.start()\n"
        "sys.argv = ['memclaw', 'recall']\n"
        "main()"
    )
    env = dict(os.environ, MEMCLAW_HOME=str(home))
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "Missing argument" in p.stderr, p.stderr
    # the thread's line is there: it finished before the process ended (before or after the error line: under load
    # the imports before the usage error can take longer than the thread's second)
    assert "background done\n" in p.stderr, p.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [("recall", "boat"), ("recall", "boat", "--json"), ("recall", "boat", "--mode", "vector"), ("context", "boat")],
)
def test_recall_and_context_on_an_empty_workspace_exit_0_every_time(home, args):
    for _ in range(RUNS):
        p = cli(home, *args)
        assert p.returncode == 0, (args, p.returncode, p.stderr)
        assert "Traceback" not in p.stderr


@pytest.mark.slow
def test_a_usage_error_while_the_model_loads_in_the_background_exits_2_every_time(home):
    for _ in range(RUNS):
        p = cli(home, "recall", "boat", "--k", "0")  # the model starts loading before the arguments are read
        assert p.returncode == 2, (p.returncode, p.stderr)


@pytest.mark.slow
@pytest.mark.parametrize("args", [("recall", "boat"), ("recall", "boat", "--json"), ("context", "x"), ("config",)])
def test_a_closed_stdout_ends_quietly_with_141(home, args):
    assert cli(home, "memory", "add", "the boat is blue").returncode == 0
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first write: every write meets EPIPE
    try:
        p = cli(home, *args, stdout=write)
    finally:
        os.close(write)
    assert (p.returncode, p.stderr) == (BROKEN_PIPE_EXIT, ""), args


def _with_stdout(home: Path, redirect: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The console script with its stdout redirected by the shell (`>&-` closes it, `>/dev/full` fills up)."""
    env = dict(os.environ, MEMCLAW_HOME=str(home), COLUMNS="120")
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", LITELLM_LOCAL_MODEL_COST_MAP="True")
    cmd = " ".join([sys.executable, "-m", "memclaw.cli.main", *(f"'{a}'" for a in args), redirect])
    return subprocess.run(["sh", "-c", cmd], cwd=REPO, env=env, stderr=subprocess.PIPE, text=True, timeout=300)


def test_a_closed_stdout_does_the_work_and_shows_nothing(home):
    """`memclaw memory add x >&-`: Python starts with sys.stdout None; the command runs as if sent to /dev/null."""
    p = _with_stdout(home, ">&-", "memory", "add", "The boat is blue")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    p = _with_stdout(home, ">&-", "recall", "boat")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert "The boat is blue" in (home / "workspace" / "memory" / "MEMORY.md").read_text("utf-8")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
@pytest.mark.parametrize("args", [("memory", "stats"), ("recall", "boat", "--json"), ("config",)])
def test_an_output_that_cannot_be_written_is_one_line_exit_1(home, args):
    p = _with_stdout(home, ">/dev/full", *args)
    assert p.returncode == 1, p.stderr
    lines = p.stderr.strip().splitlines()
    assert lines == [
        "Error: cannot write the output: No space left on device; free some space, or send the output elsewhere"
    ], p.stderr


@pytest.mark.slow
@pytest.mark.parametrize("json_out", [False, True])
def test_a_reader_that_leaves_a_long_list_halfway_ends_it_with_141(home, json_out):
    """`memory list | head -c 100` (issue 38.8): the list is larger than any pipe's buffer, so the command is inside
    its one large write when the reader goes; the write returns the part taken and Python drops the rest silently."""
    mem = home / "workspace" / "memory" / "MEMORY.md"
    facts = "".join(f"- Fact {i}: Anna planted tomatoes near shed {i % 7}\n" for i in range(20000))
    mem.write_text("# Garden\n" + facts, "utf-8")
    env = dict(os.environ, MEMCLAW_HOME=str(home), COLUMNS="120", HF_HUB_OFFLINE="1")
    args = ["memory", "list", *(["--json"] if json_out else [])]
    p = subprocess.Popen([sys.executable, "-m", "memclaw.cli.main", *args], cwd=REPO, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert p.stdout is not None and p.stderr is not None
    assert len(p.stdout.read(100)) == 100
    p.stdout.close()  # the reader goes away, as `head -c 100` does
    err = p.stderr.read()
    assert (p.wait(timeout=300), err) == (BROKEN_PIPE_EXIT, b"")

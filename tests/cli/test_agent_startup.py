"""`agent -m` imports litellm (~2.8 s) beside the turn's preparation, not inside the model call (issue 38.11).

In a fresh process: once the terminal's agent is made (config, memory, the agent), litellm is being imported in a
background thread (memclaw.util.background: the console script waits for it at exit), and nothing has asked the
model yet. Without the provider's key nothing is imported: that error stays instant. How long a turn takes is
measured in benchmarks/bench_agent_turn.py, not here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CHILD = r"""
import sys
from pathlib import Path
from memclaw.cli.agent_cmd import make_agent
from memclaw.errors import LLMError
from memclaw.util.background import wait_for_background
try:
    make_agent(Path(sys.argv[1]), need_key=True)
except LLMError as e:
    print("LLMError", e)
wait_for_background()
print("litellm imported" if "litellm" in sys.modules else "litellm not imported")
"""


def _child(root: Path, **env: str) -> str:
    full = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    full.update(MEMCLAW_AGENT__MODEL="openai/gpt-4o-mini", LITELLM_LOCAL_MODEL_COST_MAP="True", HF_HUB_OFFLINE="1",
                MEMCLAW_RECALL__MODE="bm25", **env)  # fmt: skip
    p = subprocess.run([sys.executable, "-c", CHILD, str(root)], env=full, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.fixture
def root(tmp_path) -> Path:
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "MEMORY.md").write_text("# Home\n- I live in Lyon\n", "utf-8")
    return root


def test_making_the_agent_starts_importing_litellm(root):
    assert _child(root, OPENAI_API_KEY="sk-test-not-a-real-key").splitlines()[-1] == "litellm imported"


def test_without_a_key_litellm_is_not_imported(root):
    out = _child(root).splitlines()
    assert out[0].startswith("LLMError") and "OPENAI_API_KEY" in out[0]
    assert out[-1] == "litellm not imported"

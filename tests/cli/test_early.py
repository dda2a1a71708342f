"""The embedding model starts loading before the CLI framework, pydantic and the config for `recall` and `context`
(memclaw.cli.early): which commands and arguments start it, that its cheap reading of the settings never names
another model than the validated config does (any environment and config file), and, through the console script,
that the model's libraries come before pydantic while a command that will not embed a query loads none of them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memclaw.cli.early import EarlyChoice, early_choice, load_model_early
from memclaw.config import ContextConfig, EmbeddingsConfig, RecallConfig, load_config
from memclaw.defaults import CONTEXT_RECALL_K, EMBEDDINGS_BACKEND, EMBEDDINGS_MODEL, RECALL_MODE
from memclaw.errors import ConfigError
from tests.service.test_memory_service import make_workspace

DEFAULT = EarlyChoice()


def test_the_guess_starts_from_the_configs_defaults():
    cfg = EmbeddingsConfig()
    assert (DEFAULT.model, DEFAULT.backend, DEFAULT.cache_dir) == (cfg.model, cfg.backend, cfg.cache_dir)
    assert (RecallConfig().mode, ContextConfig().recall_k) == (RECALL_MODE, CONTEXT_RECALL_K)


def test_the_early_guess_holds_no_default_of_its_own():
    """One source of each default: the guess reads memclaw.defaults, the module the config builds its fields from."""
    import memclaw.cli.early as early

    source = Path(early.__file__).read_text("utf-8")
    for value in (EMBEDDINGS_MODEL, EMBEDDINGS_BACKEND, RECALL_MODE):
        assert repr(value) not in source and f'"{value}"' not in source, value
    assert not re.search(rf"\b{CONTEXT_RECALL_K}\b", source)


@pytest.mark.parametrize(
    ("argv", "starts"),
    [
        (["recall", "where does my sister live"], True),
        (["-vv", "recall", "x", "-k", "3"], True),
        (["--verbose", "context", "what should I cook"], True),
        (["recall", "x", "--mode", "vector"], True),
        (["recall", "x", "--mode", "bm25"], False),  # BM25 alone embeds nothing
        (["recall", "x", "--mode=bm25"], False),
        (["recall", "--help"], False),
        (["--version"], False),
        (["status"], False),
        (["agent", "-m", "hi"], False),  # the API key is checked first
        (["memory", "add", "x"], False),
        (["--unknown", "recall", "x"], False),
        ([], False),
    ],
)
def test_which_commands_start_the_model_early(argv, starts):
    assert (early_choice(argv, {}) == DEFAULT) is starts


def test_the_settings_come_from_the_environment_then_the_file(memclaw_home):
    (memclaw_home / "config.toml").write_text(
        '[embeddings]\nmodel = "paraphrase-MiniLM-L3-v2"\n[context]\nrecall_k = 0\n'
    )
    assert early_choice(["recall", "x"], {}) == EarlyChoice("paraphrase-MiniLM-L3-v2")
    assert early_choice(["context", "x"], {}) is None  # auto-recall is off
    env = {"memclaw_embeddings": '{"Model": "a", "backend": "onnx"}', "MEMCLAW_EMBEDDINGS__MODEL": "b"}
    assert early_choice(["recall", "x"], env) == EarlyChoice("b", "onnx")
    assert early_choice(["recall", "x"], {"MEMCLAW_RECALL__MODE": "bm25"}) is None
    assert early_choice(["recall", "x", "--mode", "hybrid"], {"MEMCLAW_RECALL__MODE": "bm25"}) == EarlyChoice(
        "paraphrase-MiniLM-L3-v2"
    )
    (memclaw_home / "config.toml").write_text("[embeddings\n")  # unclear: nothing starts early
    assert early_choice(["recall", "x"], {}) is None
    (memclaw_home / "config.toml").unlink()
    (memclaw_home / "config.toml").mkdir()  # not a file: the command says so, the guess does not start
    assert early_choice(["recall", "x"], {}) is None


def test_a_guess_never_fails_the_command(memclaw_home, monkeypatch):
    monkeypatch.setenv("MEMCLAW_HOME", str(memclaw_home / "missing"))
    monkeypatch.setattr("memclaw.cli.early.config_path", lambda: (_ for _ in ()).throw(PermissionError(13, "no")))
    assert early_choice(["recall", "x"], {}) is None  # an unreadable home: no guess
    monkeypatch.setattr("memclaw.cli.early.early_choice", lambda argv, environ: 1 / 0)
    assert load_model_early(["recall", "x"]) is False  # anything else: no early load, and no exception


GOOD = {
    ("embeddings", "model"): ["all-MiniLM-L6-v2", "paraphrase-MiniLM-L3-v2", "hash-test"],
    ("embeddings", "backend"): ["auto", "onnx", "torch"],
    ("embeddings", "cache_dir"): ["/tmp/a", "/tmp/b"],
    ("recall", "mode"): ["hybrid", "bm25", "vector"],
}


@st.composite
def some_settings(draw: st.DrawFn, max_size: int) -> dict[tuple[str, str], object]:
    """A few of the settings the guess reads, with good values (now and then one the config refuses)."""
    keys = draw(st.lists(st.sampled_from(list(GOOD)), max_size=max_size, unique=True))
    return {k: draw(st.sampled_from(GOOD[k]) if draw(st.integers(0, 9)) else st.integers(0, 3)) for k in keys}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    file=some_settings(3),
    nested=some_settings(2),
    section_json=some_settings(2),
    recall_k=st.sampled_from([None, "0", "5", 0, 7]),
    upper=st.booleans(),
)
def test_the_guess_never_names_another_model_than_the_validated_config(
    memclaw_home, file, nested, section_json, recall_k, upper
):
    tables: dict[str, dict[str, object]] = {}
    for (section, key), value in file.items():
        tables.setdefault(section, {})[key] = value
    if isinstance(recall_k, int):
        tables.setdefault("context", {})["recall_k"] = recall_k
    (memclaw_home / "config.json").write_text(json.dumps(tables))
    env = {f"MEMCLAW_{s.upper()}__{k.upper()}": str(v) for (s, k), v in nested.items()}
    by_section: dict[str, dict[str, object]] = {}
    for (section, key), value in section_json.items():
        by_section.setdefault(section, {})[key.upper() if upper else key] = value
    env |= {f"MEMCLAW_{s.upper()}": json.dumps(t) for s, t in by_section.items()}
    if isinstance(recall_k, str):
        env["MEMCLAW_CONTEXT__RECALL_K"] = recall_k
    for command in ("recall", "context"):
        guess = early_choice([command, "x"], env)
        with mock.patch.dict(os.environ, env):
            try:
                cfg = load_config()
            except ConfigError:
                continue  # the command fails at once: any guess only costs a load
        embeds = cfg.recall.mode != "bm25" and (command == "recall" or cfg.context.recall_k > 0)
        if guess is None:
            continue  # unclear, or no query to embed: the validated config starts the load
        assert embeds, (command, env, tables)
        got = (guess.model, guess.backend, guess.cache_dir)
        assert got == (cfg.embeddings.model, cfg.embeddings.backend, cfg.embeddings.cache_dir), (env, tables)


def _imports(args: list[str], root: Path) -> list[str]:
    """The top-level packages the console script imported, in order (python -X importtime)."""
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    p = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "memclaw.cli.main", *args, "-w", str(root)],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    names = [m.group(1) for m in re.finditer(r"^import time:.*\|\s*([\w.]+)$", p.stderr, re.M)]
    return list(dict.fromkeys(n.split(".")[0] for n in names))


@pytest.mark.slow
def test_through_the_console_script_the_model_comes_before_pydantic_and_bm25_loads_no_model(tmp_path):
    root = make_workspace(tmp_path / "ws").root
    subprocess.run(  # index it first: the timed path is a recall of an indexed workspace
        [sys.executable, "-m", "memclaw.cli.main", "memory", "sync", "-w", str(root)], check=True, capture_output=True
    )
    for args in (["recall", "where does my sister live"], ["context", "where does my sister live"]):
        order = _imports(args, root)
        assert order.index("onnxruntime") < order.index("pydantic") < order.index("chromadb_rust_bindings"), order
    for args in (["recall", "sister", "--mode", "bm25"], ["status"]):
        assert "onnxruntime" not in _imports(args, root), args

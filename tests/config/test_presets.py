"""Recall's tuning constants are a named preset, not config keys: one source for each value, a typed seam for the
benchmarks and the lab, and a config that still sets a retired key either loads (same value: one warning) or
fails with one line naming the new way (another value: exit 2)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from dataclasses import asdict
from typing import get_args

import pytest
from pydantic import ValidationError

from memclaw.config import Config, RecallConfig, load_config
from memclaw.config.presets import DEFAULT, PRESETS, TUNING_KEYS, PresetName
from memclaw.errors import ConfigError
from memclaw.recall.search import rank_settings


def _memclaw(home, *args: str, **env: str) -> subprocess.CompletedProcess:
    """The console script's entry point in its own process, with this MEMCLAW_HOME."""
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("MEMCLAW_")}
    return subprocess.run([sys.executable, "-m", "memclaw.cli.main", *args], capture_output=True, text=True,
                          env={**clean, "MEMCLAW_HOME": str(home), **env}, timeout=120)  # fmt: skip


def test_a_retired_key_with_another_value_is_one_line_and_exit_2(memclaw_home):
    (memclaw_home / "config.toml").write_text("[recall]\nk = 5\nrrf_k = 30\n")
    r = _memclaw(memclaw_home, "config")
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "'recall.rrf_k'" in lines[0] and "config.toml" in lines[0] and "recall.preset" in lines[0]
    assert "default has rrf_k = 60" in lines[0] and "remove the key" in lines[0]
    # the same from the environment names the variable
    (memclaw_home / "config.toml").write_text("[recall]\nk = 5\n")
    r = _memclaw(memclaw_home, "config", MEMCLAW_RECALL__DATE_WEIGHT="0")
    assert r.returncode == 2 and "MEMCLAW_RECALL__DATE_WEIGHT" in r.stderr and "recall.preset" in r.stderr


def test_a_retired_key_with_the_presets_value_loads_with_one_warning(memclaw_home, monkeypatch, caplog):
    """The config `memclaw config --defaults` printed before loses nothing: recall ranks as it did."""
    (memclaw_home / "config.toml").write_text('[recall]\nk = 5\nfusion = "adaptive"\nkeep_factor = 3\nmin_bm25 = 0\n')
    monkeypatch.setenv("MEMCLAW_RECALL__DATE_WEIGHT", "0.5")
    monkeypatch.setenv("MEMCLAW_RECALL__EXCERPT_AGENT_WORDS", "25")
    with caplog.at_level(logging.WARNING):
        cfg = load_config()
    assert cfg.recall.k == 5 and cfg.recall.tuning == DEFAULT
    assert rank_settings(cfg.recall) == rank_settings(RecallConfig())
    for key in ("fusion", "keep_factor", "min_bm25", "date_weight", "excerpt_agent_words"):
        said = [r.getMessage() for r in caplog.records if f"recall.{key} " in r.getMessage()]
        assert len(said) <= 1 and all("recall.preset" in s and "remove the key" in s for s in said)
    r = _memclaw(memclaw_home, "config")
    assert r.returncode == 0, r.stderr
    warned = [line for line in r.stderr.splitlines() if "recall.preset" in line]
    assert len(warned) == 3 and all("sets the same value; remove the key" in w for w in warned)
    assert '"preset": "default"' in r.stdout and "keep_factor" not in r.stdout


def test_a_retired_key_is_compared_with_the_preset_it_names():
    rc = Config(recall={"preset": "plain-rrf", "keep_factor": 0, "link_sessions": False}).recall
    assert rc.tuning == PRESETS["plain-rrf"]
    with pytest.raises(ValidationError, match="plain-rrf has keep_factor = 0"):
        Config(recall={"preset": "plain-rrf", "keep_factor": 3})


def test_the_user_keys_are_few_and_the_tuning_is_a_preset():
    assert set(RecallConfig.model_fields) == {
        "k", "mode", "max_query_chars", "min_similarity", "archive_min_similarity", "recency_half_life_days",
        "preset", "rerank",
    }  # fmt: skip
    assert not TUNING_KEYS & set(RecallConfig.model_fields)
    assert set(get_args(PresetName)) == set(PRESETS) and RecallConfig().tuning is DEFAULT
    assert Config(recall={"preset": "plain-rrf"}).recall.tuning.fusion == "rrf"
    with pytest.raises(ValidationError, match="preset"):
        Config(recall={"preset": "fast"})


def test_the_seam_changes_tuning_typed_and_validated():
    rc = RecallConfig(k=4)
    tuned = rc.with_tuning(rrf_k=30, keep_factor=0)
    assert (tuned.k, tuned.tuning.rrf_k, tuned.tuning.keep_factor) == (4, 30, 0)
    assert rc.tuning is DEFAULT and tuned.with_tuning().tuning == tuned.tuning
    assert rank_settings(tuned).fusion.rrf_k == 30
    with pytest.raises(ValueError, match="no tuning value rrfk"):
        rc.with_tuning(rrfk=30)
    with pytest.raises(ValueError, match="0 \\(off\\) or at least 2"):
        rc.with_tuning(keep_factor=1)
    with pytest.raises(ValueError, match="agent_turn_weight"):
        rc.with_tuning(agent_turn_weight=1.5)


def test_the_benchmarks_tuning_variable_reaches_every_system(monkeypatch):
    from memclaw.bench.run_config import bench_config
    from memclaw.bench.systems import SYSTEMS, system_config

    monkeypatch.setenv("MEMCLAW_BENCH_TUNING", '{"rrf_k": 30, "date_weight": 0.2}')
    base = bench_config()
    assert (base.recall.tuning.rrf_k, base.recall.tuning.date_weight) == (30, 0.2)
    hybrid = system_config(base, SYSTEMS["hybrid"]).recall.tuning
    assert hybrid == base.recall.tuning
    nodate = system_config(base, SYSTEMS["hybrid-nodate"]).recall.tuning
    assert (nodate.rrf_k, nodate.date_weight) == (30, 0.0)
    # a system that names its preset starts from it
    assert system_config(base, SYSTEMS["hybrid-rrf-plain"]).recall.tuning == PRESETS["plain-rrf"]
    monkeypatch.setenv("MEMCLAW_BENCH_TUNING", '{"rrf": 30}')
    with pytest.raises(ConfigError, match="MEMCLAW_BENCH_TUNING.*no tuning value rrf"):
        bench_config()
    monkeypatch.setenv("MEMCLAW_BENCH_TUNING", "rrf_k=30")
    with pytest.raises(ConfigError, match="MEMCLAW_BENCH_TUNING"):
        bench_config()


def test_the_systems_rank_as_they_did():
    """Each benchmark system's settings, as the config keys it set before the presets, spelt out."""
    from memclaw.bench.systems import SYSTEMS, system_config

    base = Config()
    plain = system_config(base, SYSTEMS["hybrid-rrf-plain"]).recall.tuning
    before = {"fusion": "rrf", "link_sessions": False, "date_weight": 0.0, "bm25_weight": 1.0, "vector_weight": 1.0,
              "keep_factor": 0, "agent_turn_weight": 1.0, "agent_asked_weight": 1.0}  # fmt: skip
    assert asdict(plain) == {**asdict(DEFAULT), **before}
    head = system_config(base, SYSTEMS["vector-head"]).recall
    assert head.mode == "vector" and head.tuning.vector_signal == "head" and not head.tuning.link_sessions
    assert system_config(base, SYSTEMS["hybrid-recency"]).recall.recency_half_life_days == 30.0

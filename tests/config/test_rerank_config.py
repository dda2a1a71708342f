"""`recall.rerank`: off by default, strict like every section, a kind that needs a model says so, and its key is a
secret (masked in the effective config and in every later message)."""

from __future__ import annotations

import json

import pytest

from memclaw.config import Config, config_secrets, dump_config, load_config
from memclaw.errors import ConfigError


def test_off_by_default() -> None:
    r = Config().recall.rerank
    assert (r.kind, r.model, r.top_n) == ("off", None, 30)


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ('kind = "provider"', "needs recall.rerank.model"),
        ('kind = "cross_encoder"', "needs recall.rerank.model"),
        ('kind = "rerank-all"', "recall.rerank.kind"),
        ('kind = "chat"\ntopn = 5', "unknown key"),
        ('kind = "chat"\ntop_n = 1', "recall.rerank.top_n"),
    ],
)
def test_a_bad_rerank_table_is_one_config_error(tmp_path, table, says) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f"[recall.rerank]\n{table}\n", "utf-8")
    with pytest.raises(ConfigError) as e:
        load_config(path=path)
    assert says in str(e.value) and "\n" not in str(e.value) and e.value.exit_code == 2


def test_the_rerank_key_is_a_secret(tmp_path) -> None:
    path = tmp_path / "config.toml"
    key = "co-live-4f9a8b7c6d5e"
    path.write_text(f'[recall.rerank]\nkind = "provider"\nmodel = "cohere/rerank-v3.5"\napi_key = "{key}"\n', "utf-8")
    cfg = load_config(path=path)
    assert key in config_secrets(cfg)
    assert key not in json.dumps(dump_config(cfg))
    assert cfg.recall.rerank.api_key is not None and cfg.recall.rerank.api_key.get_secret_value() == key

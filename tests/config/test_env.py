"""The environment's config overrides read without pydantic-settings (memclaw.config.env.env_values), checked
against pydantic-settings itself: a reference model, the same fields on pydantic-settings' BaseSettings with the
environment source memclaw used before (its values typed by typed_env_values), must come out the same as `Config`
for any set of MEMCLAW_* variables (names in any case, nested to any depth, JSON or not, empty, in any order) and
keyword values: the same config, or the same validation errors, or both refusing JSON that does not parse."""

from __future__ import annotations

import json
import os
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError, create_model
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict, SettingsError

from memclaw.config import Config, EmbeddingsConfig
from memclaw.config.env import ENV_PREFIX, env_values, typed_env_values
from memclaw.errors import ConfigError


class _ReferenceSource(EnvSettingsSource):
    def __call__(self) -> dict[str, Any]:
        return typed_env_values(self.settings_cls, super().__call__())


class _ReferenceBase(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid", validate_assignment=True
    )

    @classmethod
    def settings_customise_sources(
        cls, settings_cls, init_settings, env_settings, dotenv_settings, file_secret_settings
    ):  # noqa: ANN001, ANN206, E501
        return (_ReferenceSource(settings_cls), init_settings)


Reference = create_model(  # `Config` as it was: its fields on pydantic-settings, reading the environment
    "Reference", __base__=_ReferenceBase, **{n: (f.annotation, f) for n, f in Config.model_fields.items()}
)


def test_the_reference_has_configs_fields():
    assert {n: f.annotation for n, f in Reference.model_fields.items()} == {
        n: f.annotation for n, f in Config.model_fields.items()
    }
    assert Reference().model_dump() == Config().model_dump()  # (no MEMCLAW_* variable here: the defaults)


def _keys(section: str) -> list[str]:
    field = Config.model_fields.get(section)
    return list(getattr(field.annotation, "model_fields", {})) + ["bogus"] if field else []


# variable names: a path of config keys (real ones, and some that name nothing), each part in any case
_DEEPER: dict[tuple[str, ...], list[str]] = {
    ("owners",): ["discord", "cli"],
    ("memory", "chroma_headers"): ["authorization", "X-Key"],
    ("agent", "model_overrides"): ["ollama/llama3", "m"],
    ("agent", "model_overrides", "m"): ["context_window", "temperature"],
    ("channels",): ["discord", "bogus"],
    ("channels", "discord"): ["token", "guilds", "allow_from", "bogus"],
}


@st.composite
def variable_name(draw: st.DrawFn) -> str:
    path = [draw(st.sampled_from([*Config.model_fields, "bogus"]))]
    while True:
        here = tuple(path)
        options = _DEEPER.get(here) or (_keys(path[0]) if len(path) == 1 and path[0] != "owners" else None)
        if not options or not draw(st.booleans()):
            break
        path.append(draw(st.sampled_from(options)))
    cased = [draw(st.sampled_from([p, p.upper(), p.capitalize()])) for p in path]
    return ENV_PREFIX + "__".join(cased)


VALUES = st.sampled_from(
    [
        "3", "0.5", "-1", "true", "no", "", " 7 ", "x", "null", "{bad", "8192", "[1]", '["1", "2"]',
        '{"k": 3}', '{"K": "4", "mode": "bm25"}', '{"model": "hash-test"}', '{"discord": {"token": "t"}}',
        '{"Discord": {"GUILDS": ["1"]}}', '{"context_window": 8192}', '{"m": {"a": 1}}', '{"discord": ["9"]}',
    ]
) | st.text(alphabet="ab1{}[]\":, ", max_size=6)  # fmt: skip

KEYWORDS = st.sampled_from(
    [
        {},
        {"workspace": "/tmp/somewhere"},
        {"recall": {"k": 5, "mode": "bm25"}},
        {"embeddings": EmbeddingsConfig(model="hash-test")},
        {"agent": {"model_overrides": {"m": {"a": 1}}}, "owners": {"discord": ["1"]}},
        {"channels": {"discord": {"guilds": ["2"]}}},
        {"recall": {"kk": 1}},
        {"Recall": {"k": 2}},
        {"recall": {"k": 3}, "RECALL": {"mode": "bm25"}},
        {"Recall": {"mode": "bm25"}, "RECALL": {"k": 3}, "recall": {"k": 4}},
        {"Recall": {"mode": "bm25"}, "RECALL": {"k": 3}},
    ]
)


def _outcome(make: Any) -> tuple[str, Any]:
    try:
        return "ok", make().model_dump()
    except ValidationError as e:
        return "invalid", [(err["loc"], err["type"]) for err in e.errors()]
    except (SettingsError, ConfigError):
        return "not json", None


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    variables=st.lists(st.tuples(variable_name(), VALUES), max_size=5, unique_by=lambda v: v[0]),
    keywords=KEYWORDS,
)
@example(variables=[("MEMCLAW_RECALL", '{"K": "4", "mode": "bm25"}')], keywords={})  # keys in any case, typed
@example(variables=[("MEMCLAW_CHANNELS", '{"Discord": {"GUILDS": ["1"]}}')], keywords={})
@example(variables=[("MEMCLAW_CHANNELS__DISCORD__GUILDS", "{bad")], keywords={})  # a list's JSON must parse
@example(variables=[("MEMCLAW_OWNERS__DISCORD__X", "1")], keywords={})  # below a table: JSON if it parses
@example(variables=[("MEMCLAW_AGENT__MODEL_OVERRIDES__M__CONTEXT_WINDOW", "8192")], keywords={})
@example(  # the later variable for a key replaces the earlier one, or (a table) takes its keys in
    variables=[("MEMCLAW_CHANNELS__DISCORD__TOKEN", "t"), ("MEMCLAW_CHANNELS__DISCORD", '{"guilds": ["1"]}')],
    keywords={},
)
@example(
    variables=[("MEMCLAW_CHANNELS__DISCORD", '{"guilds": ["1"]}'), ("MEMCLAW_CHANNELS__DISCORD__TOKEN", "t")],
    keywords={},
)
@example(variables=[("MEMCLAW_RECALL__K", "3")], keywords={"embeddings": EmbeddingsConfig(model="hash-test")})
@example(variables=[("MEMCLAW_EMBEDDINGS__BATCH_SIZE", "8")], keywords={"embeddings": EmbeddingsConfig(model="x")})
def test_the_environment_reads_as_pydantic_settings_read_it(variables, keywords):
    environ = {k: v for k, v in os.environ.items() if not k.upper().startswith(ENV_PREFIX)}
    with mock.patch.dict(os.environ, environ | dict(variables), clear=True):
        ours = _outcome(lambda: Config(**keywords))
    with mock.patch.dict(os.environ, environ | {k: _as_json_list(k, v) for k, v in variables}, clear=True):
        assert ours == _outcome(lambda: Reference(**keywords)), variables


_LIST_KEYS = {"guilds", "allow_from", "channels", "always_answer_channels"}


def _as_json_list(name: str, value: str) -> str:
    """A list key's comma-separated value as the JSON list pydantic-settings reads the same way (memclaw reads both;
    text that starts with `[` or `{` is JSON for both)."""
    path = name[len(ENV_PREFIX) :].lower().split("__")
    is_list = (path[0] == "owners" and len(path) == 2) or (
        path[:2] == ["channels", "discord"] and len(path) == 3 and path[2] in _LIST_KEYS
    )
    if not is_list or value.lstrip()[:1] in ("[", "{"):
        return value
    return json.dumps([item.strip() for item in value.split(",") if item.strip()])


def test_a_list_from_the_environment_is_comma_separated_or_json(monkeypatch):
    """Issue 38 (papercuts): `MEMCLAW_OWNERS__DISCORD=111` failed with "Input should be a valid list"."""
    for k in [k for k in os.environ if k.upper().startswith(ENV_PREFIX)]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("MEMCLAW_OWNERS__DISCORD", "111")
    monkeypatch.setenv("MEMCLAW_CHANNELS__DISCORD__GUILDS", " 1, 2 ,")
    monkeypatch.setenv("MEMCLAW_CHANNELS__DISCORD__ALLOW_FROM", '["7", "8"]')
    monkeypatch.setenv("MEMCLAW_CHANNELS__DISCORD__CHANNELS", "")
    cfg = Config()
    assert cfg.owners == {"discord": ["111"]}
    assert (cfg.channels.discord.guilds, cfg.channels.discord.allow_from) == (["1", "2"], ["7", "8"])
    assert cfg.channels.discord.channels == []
    monkeypatch.setenv("MEMCLAW_CHANNELS__DISCORD__GUILDS", "[1, 2")  # meant as JSON: it must parse
    with pytest.raises(ConfigError, match="not valid JSON"):
        Config()


def test_examples_from_the_readme(monkeypatch):
    for k in [k for k in os.environ if k.upper().startswith(ENV_PREFIX)]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("MEMCLAW_RECALL__K", "3")
    monkeypatch.setenv("memclaw_agent__model", "ollama/llama3")
    monkeypatch.setenv("MEMCLAW_MEMORY__CHROMA_HEADERS", '{"Authorization": "Bearer t"}')
    monkeypatch.setenv("MEMCLAW_CHANNELS__DISCORD__GUILDS", '["1", "2"]')
    monkeypatch.setenv("MEMCLAW_OWNERS__DISCORD", '["42"]')
    cfg = Config(recall={"k": 5, "mode": "bm25"})
    assert (cfg.recall.k, cfg.recall.mode, cfg.agent.model) == (3, "bm25", "ollama/llama3")
    assert cfg.memory.chroma_headers["Authorization"].get_secret_value() == "Bearer t"
    assert (cfg.channels.discord.guilds, cfg.owners) == (["1", "2"], {"discord": ["42"]})
    assert env_values(Config, {"MEMCLAW_RECALL": '{"K": 4}', "MEMCLAW_RECALL__MODE": "vector"}) == {
        "recall": {"k": 4, "mode": "vector"}
    }
    monkeypatch.setenv("MEMCLAW_CHANNELS", "{not json")
    with pytest.raises(ConfigError, match="MEMCLAW_CHANNELS / MEMCLAW_CHANNELS__DISCORD__GUILDS is not valid JSON"):
        Config()

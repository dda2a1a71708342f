"""Issue 18.6 and 19.11-12: strict config, validated at load, environment overrides typed and checked by name, one
reading of sender ids, and an onboard hint that creates the workspace asked for. Through the console script's
entry point in-process (as test_bad_input does) and load_config itself."""

from __future__ import annotations

import json
import types
import typing

import pytest
from pydantic import BaseModel

from memclaw.config import Config, load_config
from memclaw.errors import ConfigError, InvalidSenderError
from memclaw.markdown.units import sender_scope
from tests.cli import test_bad_input
from tests.cli.test_bad_input import assert_error, user_files

cli, ws = test_bad_input.cli, test_bad_input.ws  # the in-process console script and an onboarded workspace

MAX_SENDER_ID_CHARS = 200  # memclaw.markdown.units.MAX_SENDER_ID_CHARS, the one limit (tested below to be that)


def scalar_fields() -> list[tuple[str, str, type, object]]:
    """(section, key, int|float|bool, default) for every number and switch of every config section."""
    out = []
    for section, f in Config.model_fields.items():
        if not (isinstance(f.annotation, type) and issubclass(f.annotation, BaseModel)):
            continue
        for key, kf in f.annotation.model_fields.items():
            ann = kf.annotation
            if typing.get_origin(ann) in (typing.Union, types.UnionType):
                args = [a for a in typing.get_args(ann) if a is not type(None)]
                ann = args[0] if len(args) == 1 else ann
            if ann in (int, float, bool):
                out.append((section, key, ann, kf.default))
    return out


SCALARS = scalar_fields()


def test_there_are_numbers_and_switches_to_check():
    kinds = {k for _s, _k, k, _d in SCALARS}
    assert kinds == {int, float, bool} and len(SCALARS) > 30


@pytest.mark.parametrize(("section", "key", "kind", "default"), SCALARS, ids=[f"{s}.{k}" for s, k, _, _ in SCALARS])
def test_every_number_and_switch_is_strict_in_the_file(memclaw_home, section, key, kind, default):
    """`recall.k = true` is not 1, `auto_sync = 1` is not True, `"8"` is not 8."""
    wrong = ["true", '"1"'] if kind is not bool else ["1", '"true"']
    if kind is int:
        wrong.append("3.0")
    for value in wrong:
        (memclaw_home / "config.toml").write_text(f"[{section}]\n{key} = {value}\n")
        with pytest.raises(ConfigError, match=rf"'{section}\.{key}'"):
            load_config()


@pytest.mark.parametrize(
    ("section", "key", "kind", "default"),
    [s for s in SCALARS if s[3] is not None],
    ids=[f"{s}.{k}" for s, k, _, d in SCALARS if d is not None],
)
def test_every_number_and_switch_still_reads_from_the_environment(monkeypatch, section, key, kind, default):
    """An environment variable is text: MEMCLAW_RECALL__K=3 is 3, =false a switch off, =0.5 a number."""
    text = str(default).lower() if kind is bool else str(default)
    monkeypatch.setenv(f"MEMCLAW_{section.upper()}__{key.upper()}", f" {text} ")
    got = getattr(getattr(load_config(), section), key)
    assert got == default and type(got) is kind
    if kind is bool:
        monkeypatch.setenv(f"MEMCLAW_{section.upper()}__{key.upper()}", "off" if default else "yes")
        assert getattr(getattr(load_config(), section), key) is (not default)
        monkeypatch.setenv(f"MEMCLAW_{section.upper()}__{key.upper()}", "maybe")
    else:
        monkeypatch.setenv(f"MEMCLAW_{section.upper()}__{key.upper()}", "true")  # not a number, even as JSON
    with pytest.raises(ConfigError, match=f"MEMCLAW_{section.upper()}__{key.upper()}"):
        load_config()


def test_environment_numbers_the_file_writes_as_ints(monkeypatch, memclaw_home):
    (memclaw_home / "config.toml").write_text("[memory]\nchroma_timeout_s = 5\n[recall]\narchive_min_similarity = 0\n")
    monkeypatch.setenv("MEMCLAW_AGENT__TEMPERATURE", "0")
    monkeypatch.setenv("MEMCLAW_RECALL__MIN_SIMILARITY", "-0.5")
    monkeypatch.setenv("MEMCLAW_EMBEDDINGS__DIMENSIONS", "512")
    cfg = load_config()
    assert cfg.memory.chroma_timeout_s == 5.0 and cfg.recall.archive_min_similarity == 0.0
    assert cfg.agent.temperature == 0.0 and cfg.recall.min_similarity == -0.5 and cfg.embeddings.dimensions == 512
    monkeypatch.setenv("MEMCLAW_RECALL__ARCHIVE_MIN_SIMILARITY", "nan")
    with pytest.raises(ConfigError, match="MEMCLAW_RECALL__ARCHIVE_MIN_SIMILARITY"):
        load_config()
    monkeypatch.delenv("MEMCLAW_RECALL__ARCHIVE_MIN_SIMILARITY")
    (memclaw_home / "config.toml").write_text("[recall]\narchive_min_similarity = nan\n")  # TOML has NaN: no floor is
    with pytest.raises(ConfigError, match="'recall.archive_min_similarity'.*finite"):
        load_config()


# ----- validated at load: the time zone and the Chroma URL -------------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [["status"], ["recall", "what did I do last week"], ["context", "hi"], ["memory", "add", "x"], ["config"]],
)
def test_a_bad_time_zone_fails_every_command_at_load(cli, ws, memclaw_home, args):
    (memclaw_home / "config.toml").write_text('[context]\ntimezone = "Mars/Olympus"\n')
    before = user_files(memclaw_home)
    assert_error(cli(*args), 2, "'context.timezone'", "IANA")
    assert user_files(memclaw_home) == before


def test_a_good_time_zone_loads(memclaw_home, monkeypatch):
    monkeypatch.setenv("MEMCLAW_CONTEXT__TIMEZONE", "Europe/Berlin")
    assert load_config().context.timezone == "Europe/Berlin"
    monkeypatch.setenv("MEMCLAW_CONTEXT__TIMEZONE", "../../etc/passwd")
    with pytest.raises(ConfigError, match="MEMCLAW_CONTEXT__TIMEZONE"):
        load_config()


@pytest.mark.parametrize("url", ["not a url", "ftp://x", "http://", "127.0.0.1:8000", "http://h:port", "http://h:0"])
def test_a_bad_chroma_url_is_a_config_error(cli, ws, memclaw_home, url):
    (memclaw_home / "config.toml").write_text(f'[memory]\nchroma_url = "{url}"\n')
    for args in (["recall", "Porto"], ["memory", "sync"], ["status"]):
        line = assert_error(cli(*args), 2, "'memory.chroma_url'", "http://127.0.0.1:8000")
        assert "Value error, the URL" in line


def test_a_good_or_empty_chroma_url_loads(memclaw_home, monkeypatch):
    monkeypatch.setenv("MEMCLAW_MEMORY__CHROMA_URL", "https://chroma.example:8443/")
    assert load_config().memory.chroma_url == "https://chroma.example:8443/"
    monkeypatch.setenv("MEMCLAW_MEMORY__CHROMA_URL", "")
    assert load_config().memory.chroma_url is None


# ----- environment variable names (issue 19.12) -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "needles"),
    [
        ("MEMCLAW_RECAL__K", ["MEMCLAW_RECAL__K", "no config section 'recal'", "recall"]),
        ("memclaw_recal__k", ["memclaw_recal__k", "no config section"]),
        ("MEMCLAW_RECALL_K", ["MEMCLAW_RECALL_K", "two underscores", "MEMCLAW_RECALL__K"]),
        ("MEMCLAW_CHANNELS_DISCORD__TOKEN", ["MEMCLAW_CHANNELS_DISCORD__TOKEN", "no config section"]),
    ],
)
def test_a_variable_for_no_config_key_is_an_error(cli, ws, memclaw_home, monkeypatch, name, needles):
    monkeypatch.setenv(name, "3")
    before = user_files(memclaw_home)
    for args in (["status"], ["recall", "last week"], ["memory", "add", "x"]):
        assert_error(cli(*args), 2, *needles, "unset it")
    assert user_files(memclaw_home) == before


def test_memclaws_own_variables_and_other_programs_are_left_alone(cli, ws, memclaw_home, monkeypatch):
    monkeypatch.setenv("MEMCLAW_DISCORD_TOKEN", "x")
    monkeypatch.setenv("MEMCLAW_TEST_CHROMA_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("MEMCLAW_UPDATE_SNAPSHOTS", "0")  # no config section's name: not an override
    monkeypatch.setenv("MEMCLAW_RECALL__K", "3")
    monkeypatch.setenv("MEMCLAW_WORKSPACE", str(ws))
    r = cli("recall", "Porto", "--json")
    assert r.code == 0 and len(json.loads(r.out)) >= 1


# ----- sender ids: one reading, one limit ------------------------------------------------------------------------
def test_surrounding_whitespace_is_dropped_once(cli, ws, memclaw_home):
    """`--sender " owner"` used to say "invalid scope 'people/owner'"."""
    r = cli("memory", "list", "--sender", " owner", "--json")
    assert r.code == 0 and {u["scope"] for u in json.loads(r.out)} == {"owner"}
    assert cli("memory", "add", "I collect stamps", "--sender", " discord:6666 ", "--date", "2026-11-26").code == 0
    for args in (
        ["memory", "list", "--sender", "discord:6666", "--json"],
        ["memory", "list", "--sender", "\tdiscord:6666", "--json"],
    ):
        r = cli(*args)
        assert r.code == 0 and [u["text"] for u in json.loads(r.out)] == ["I collect stamps (2026-11-26)"]
    for sender, channel in (("discord: 6666", "cli"), (" 6666", "discord")):
        r = cli("context", "stamps", "--sender", sender, "--channel", channel, "--json")
        assert r.code == 0 and json.loads(r.out)["scope"] == "people/discord:6666", r.err


def test_one_length_limit_for_every_command(cli, ws, memclaw_home):
    ok = "discord:" + "9" * (MAX_SENDER_ID_CHARS - len("discord:"))
    too_long = ok + "9"
    assert cli("memory", "add", "fits", "--sender", ok).code == 0
    assert cli("recall", "fits", "--sender", ok).code == 0
    assert cli("context", "fits", "--sender", ok).code == 0
    before = user_files(memclaw_home)
    for args in (
        ["memory", "add", "x", "--sender", too_long],
        ["memory", "list", "--sender", too_long],
        ["recall", "x", "--sender", too_long],
        ["context", "x", "--sender", too_long],
        ["context", "x", "--channel", "discord", "--sender", too_long.removeprefix("discord:")],
    ):
        line = assert_error(cli(*args), 2, "invalid sender id", f"{MAX_SENDER_ID_CHARS + 1} characters long")
        assert "'discord:999" in line  # the id as given, shortened
    assert user_files(memclaw_home) == before


def test_a_sender_id_whose_folder_name_would_be_too_long(cli, ws, memclaw_home):
    """100 emoji are 100 characters but a 1,200-byte folder name: refused as an id, not an OSError later."""
    line = assert_error(cli("memory", "add", "x", "--sender", "discord:" + "😀" * 100), 2, "invalid sender id")
    assert "folder name" in line


def test_the_error_shows_the_id_as_typed():
    from memclaw.markdown.units import MAX_SENDER_ID_CHARS as limit
    from memclaw.markdown.units import normalize_sender_id

    assert limit == MAX_SENDER_ID_CHARS
    with pytest.raises(InvalidSenderError, match=r"'a\\x00b'"):
        sender_scope("a\x00b")
    with pytest.raises(InvalidSenderError, match="it is empty"):
        normalize_sender_id("  ")
    assert sender_scope(" owner ") == "owner" and sender_scope(" bob\t") == "people/bob"


# ----- onboard hint (issue 19.11) ----------------------------------------------------------------------------------
def test_missing_workspace_names_the_onboard_command_that_creates_it(cli, memclaw_home, tmp_path):
    missing = tmp_path / "path that" / "does not exist"
    line = assert_error(cli("recall", "x", "-w", str(missing)), 2, "no workspace at")
    assert f"memclaw onboard -w '{missing}'" in line
    (memclaw_home / "config.toml").write_text(f'workspace = "{tmp_path / "configured"}"\n')
    line = assert_error(cli("recall", "x"), 2, f"memclaw onboard -w {tmp_path / 'configured'}")
    (memclaw_home / "config.toml").write_text("")
    line = assert_error(cli("recall", "x"), 2, "run `memclaw onboard`")  # the default one: no -w needed
    # and that command does create it
    assert cli("onboard", "-w", str(missing)).code == 0 and (missing / "memory" / "MEMORY.md").is_file()
    assert cli("recall", "x", "-w", str(missing)).code == 0


def test_the_demo_path_under_either_home_names_memclaw_demo(cli, memclaw_home, tmp_path, monkeypatch):
    """Issue 38.9: with MEMCLAW_HOME set, `-w ~/.memclaw/demo` (the demo's place under the default home) advised
    `memclaw onboard -w ~/.memclaw/demo`, an empty workspace in the wrong home. It names `memclaw demo`, and where
    the demo is; the demo's place under MEMCLAW_HOME names `memclaw demo` too, which then creates it."""
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    default_home_demo = tmp_path / "user" / ".memclaw" / "demo"
    line = assert_error(cli("recall", "x", "-w", str(default_home_demo)), 2, "run `memclaw demo`")
    assert f"(MEMCLAW_HOME is set: the demo is {memclaw_home / 'demo'})" in line and "onboard" not in line
    demo = memclaw_home / "demo"
    line = assert_error(cli("recall", "x", "-w", str(demo)), 2, "run `memclaw demo`")
    assert "onboard" not in line and "MEMCLAW_HOME is set" not in line
    assert cli("demo").code == 0
    assert cli("recall", "x", "-w", str(demo)).code == 0

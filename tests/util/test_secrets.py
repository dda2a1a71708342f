"""Secrets (issue 7): a Discord token, an agent api_key and a Chroma auth header, set in the config file and in
the environment, never appear in `memclaw status` (table or JSON), `memclaw context`, `memclaw config`, error
messages, or the logs (captured at DEBUG), including against a real Chroma server that receives the header."""

from __future__ import annotations

import json
import logging
import sys

import pytest

from memclaw.cli.main import run

DISCORD_TOKEN = "MTIzNDU2Nzg5MDEyMzQ1Njc4.GsEcRt.discord-SECRET-token-xyz"
API_KEY = "sk-proj-SECRET-api-key-0123456789abcdef"
CHROMA_AUTH = "Bearer chroma-SECRET-header-42"
ENV_DISCORD = "env-discord-SECRET-token-77"
ENV_API_KEY = "sk-env-SECRET-api-key-88"
SECRETS = (DISCORD_TOKEN, API_KEY, CHROMA_AUTH, ENV_DISCORD, ENV_API_KEY)
FRAGMENTS = ("SECRET", "GsEcRt", "0123456789abcdef")  # no piece of a secret either


@pytest.fixture
def cli(monkeypatch, capsys, caplog):
    caplog.set_level(logging.DEBUG)

    def invoke(*args: str) -> tuple[int, str]:
        monkeypatch.setattr(sys, "argv", ["memclaw", *args])
        code = 0
        try:
            run()
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        out, err = capsys.readouterr()
        return code, out + err

    return invoke


def assert_clean(text: str) -> None:
    for s in (*SECRETS, *FRAGMENTS):
        assert s not in text, f"secret {s!r} leaked"


def write_config(home, *, chroma_url: str | None = None, extra: str = "") -> None:
    (home / "config.toml").write_text(
        f'workspace = "{home / "workspace"}"\n'
        f"{extra}"
        f'[agent]\napi_key = "{API_KEY}"\n'
        f"[memory]\n" + (f'chroma_url = "{chroma_url}"\n' if chroma_url else "") + "[memory.chroma_headers]\n"
        f'Authorization = "{CHROMA_AUTH}"\n'
        f'[channels.discord]\ntoken = "{DISCORD_TOKEN}"\n'
    )


@pytest.fixture
def home(cli, memclaw_home, monkeypatch):
    assert cli("onboard")[0] == 0
    ws = memclaw_home / "workspace"
    (ws / "memory" / "MEMORY.md").write_text("- I live in Lyon\n- My sister Lena lives in Porto\n")
    return memclaw_home


@pytest.mark.parametrize("backend", ["embedded", "server"])
def test_status_context_and_config_never_show_secrets(cli, home, caplog, monkeypatch, request, backend):
    url = request.getfixturevalue("chroma_server").url if backend == "server" else None
    write_config(home, chroma_url=url)
    outputs = []
    for args in (
        ["status"],
        ["status", "--json"],
        ["-vv", "status"],
        ["config"],
        ["context", "hi"],
        ["context", "where does my sister live", "--json"],
        ["-vv", "recall", "sister"],
        ["memory", "stats", "--json"],
    ):
        code, out = cli(*args)
        assert code == 0, out
        outputs.append(out)
    status = json.loads(outputs[1])
    assert status["channels"]["discord"]["configured"]
    assert "Lena" in outputs[5]  # the context really recalled through the store that got the header
    # The environment beats the file; those values must not show either.
    monkeypatch.setenv("MEMCLAW_DISCORD_TOKEN", ENV_DISCORD)
    monkeypatch.setenv("MEMCLAW_AGENT__API_KEY", ENV_API_KEY)
    for args in (["status", "--json"], ["status"], ["config"], ["context", "hi", "--json"]):
        code, out = cli(*args)
        assert code == 0, out
        outputs.append(out)
    assert_clean("\n".join(outputs))
    assert_clean(caplog.text)
    assert_clean("\n".join(repr(r.args) for r in caplog.records))


@pytest.mark.parametrize(
    "extra",
    [
        '[recall]\nk = "many"\n',  # a wrong type elsewhere in the file
        "tokn = 1\n",  # an unknown key next to the secrets
    ],
)
def test_config_errors_with_secrets_present_do_not_echo_them(cli, home, caplog, extra):
    write_config(home, extra=extra)
    code, out = cli("status")
    assert code == 2 and out.startswith("Error: ")
    assert_clean(out)
    assert_clean(caplog.text)


@pytest.mark.parametrize(
    ("section", "bad"),
    [
        ("[channels.discord]", f'token = ["{DISCORD_TOKEN}"]'),  # a secret of the wrong type
        ("[agent]", f"api_key = {{ value = '{API_KEY}' }}"),
        ("[memory.chroma_headers]", f'Authorization = ["{CHROMA_AUTH}"]'),
    ],
)
def test_a_secret_of_the_wrong_type_is_named_not_shown(cli, home, caplog, section, bad):
    (home / "config.toml").write_text(f"{section}\n{bad}\n")
    code, out = cli("status")
    assert code == 2 and out.startswith("Error: ") and "invalid config key" in out
    assert_clean(out)
    assert_clean(caplog.text)


def test_secret_in_an_env_section_that_is_not_json(cli, home, caplog, monkeypatch):
    monkeypatch.setenv("MEMCLAW_MEMORY__CHROMA_HEADERS", CHROMA_AUTH)  # meant as a JSON object
    code, out = cli("status")
    assert code == 2 and "MEMCLAW_MEMORY__CHROMA_HEADERS" in out
    assert_clean(out)
    assert_clean(caplog.text)


def test_gateway_refusing_a_bad_token_does_not_echo_it(cli, home, caplog, monkeypatch):
    monkeypatch.setenv("MEMCLAW_DISCORD_TOKEN", "discord SECRET with spaces")
    code, out = cli("gateway")
    assert code == 2 and out.startswith("Error: ") and "MEMCLAW_DISCORD_TOKEN" in out
    assert_clean(out)
    assert_clean(caplog.text)


def test_unreachable_chroma_error_does_not_show_the_header(cli, home, caplog):
    from tests.chroma_server import free_port

    write_config(home, chroma_url=f"http://127.0.0.1:{free_port()}")
    for args in (["recall", "sister", "--mode", "vector"], ["memory", "sync"]):
        code, out = cli(*args)
        assert code in (0, 4) and "unreachable" in out  # recall warns and answers from nothing; sync fails
        assert_clean(out)
    assert_clean(out)
    assert_clean(caplog.text)

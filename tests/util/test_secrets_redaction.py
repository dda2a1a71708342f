"""Issue 18.3: no secret is printed. (a) Credentials in a URL (`chroma_url = "http://user:TOKEN@host"`, `memory
migrate --to http://u:SECRET@...`) never reach stdout, stderr or the index's files, on the success paths and on the
error paths (a closed port, so the warnings and errors fire), through the real console script in a subprocess.
(b) The `exec` tool's environment holds no variable whose value is a secret memclaw knows, or carries URL
credentials, whatever its name. (c) `-vv` turns on memclaw's debug lines, never third-party request dumps: a
secret a tool read is not on stderr (litellm over real HTTP to the scripted server). memclaw.util.redact unit cases
last."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
from pathlib import Path

import pytest

from memclaw.config import Config
from memclaw.util.redact import (
    RedactingFilter,
    environment_without_secrets,
    has_url_credentials,
    redact_text,
    redact_url,
)
from tests.chroma_server import free_port
from tests.cli.test_agent_cli import memclaw as run_memclaw
from tests.llm_server import scripted_server

TOKEN = "TOKEN-url-secret-5521"
MIGRATE_SECRET = "SECRET-migrate-pass-7734"
MEMORY = "- My sister Lena lives in Porto\n- I live in Lyon\n"


def memclaw(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The console script's entry point in a fresh process (tests.test_agent_cli's runner), on this MEMCLAW_HOME."""
    return run_memclaw(*args, MEMCLAW_HOME=str(home), COLUMNS="200", **env)


@pytest.fixture
def home(memclaw_home) -> Path:
    from memclaw.workspace import onboard

    onboard(memclaw_home)
    (memclaw_home / "workspace" / "memory" / "MEMORY.md").write_text(MEMORY)
    return memclaw_home


def everything_under(home: Path) -> bytes:
    """Every byte memclaw wrote under MEMCLAW_HOME (the index, its manifest, sessions), not the config itself."""
    return b"".join(p.read_bytes() for p in sorted(home.rglob("*")) if p.is_file() and p.name != "config.toml")


def test_url_credentials_never_shown_by_any_command(home):
    port = free_port()  # nothing listens: recall warns, sync/add/migrate fail, each naming the server
    (home / "config.toml").write_text(f'[memory]\nchroma_url = "http://user:{TOKEN}@127.0.0.1:{port}"\n')
    runs = {
        "status": memclaw(home, "status"),
        "status --json": memclaw(home, "status", "--json"),
        "config": memclaw(home, "config"),
        "memory stats --json": memclaw(home, "memory", "stats", "--json"),
        "recall": memclaw(home, "recall", "sister"),
        "-vv recall": memclaw(home, "-vv", "recall", "sister", "--json"),
        "memory sync": memclaw(home, "memory", "sync"),
        "memory add": memclaw(home, "memory", "add", "I keep bees"),
    }
    for name, p in runs.items():
        assert TOKEN not in p.stdout + p.stderr, name
        assert "Traceback" not in p.stderr, (name, p.stderr)
    # the URL is shown, its credentials masked; the error paths really fired
    status = json.loads(runs["status --json"].stdout)
    assert status["memory"]["store"] == f"http://***@127.0.0.1:{port}"
    assert status["config"]["memory"]["chroma_url"] == f"http://***@127.0.0.1:{port}"
    assert json.loads(runs["memory stats --json"].stdout)["store"] == f"http://***@127.0.0.1:{port}"
    assert runs["recall"].returncode == 0 and "unreachable" in runs["recall"].stderr
    assert "http://***@127.0.0.1" in runs["recall"].stderr
    assert runs["memory sync"].returncode == 4 and "http://***@127.0.0.1" in runs["memory sync"].stderr
    assert runs["memory add"].returncode == 4 and "the fact is saved" in runs["memory add"].stderr
    assert TOKEN.encode() not in everything_under(home)  # nor in the index manifest or any file memclaw wrote


def test_a_key_in_a_urls_query_is_never_shown(home):
    """Issue 39.3: `api_base = "http://...?api_key=QUERYSECRET"` was printed by `config` and `status --json`."""
    port = free_port()
    (home / "config.toml").write_text(
        f'[agent]\napi_base = "http://127.0.0.1:{port}/v1?api_key=QUERYSECRET&v=1"\n\n'
        f'[embeddings]\napi_base = "http://127.0.0.1:{port}/v1?token=EMBEDSECRET"\n'
    )
    runs = {
        "config": memclaw(home, "config"),
        "status": memclaw(home, "status"),
        "status --json": memclaw(home, "status", "--json"),
        "agent -m": memclaw(home, "agent", "-m", "hi", MEMCLAW_AGENT__MAX_RETRIES="0"),
    }
    for name, p in runs.items():
        assert "QUERYSECRET" not in p.stdout + p.stderr and "EMBEDSECRET" not in p.stdout + p.stderr, name
        assert "Traceback" not in p.stderr, (name, p.stderr)
    shown = json.loads(runs["status --json"].stdout)["config"]
    assert shown["agent"]["api_base"] == f"http://127.0.0.1:{port}/v1?api_key=***&v=1"
    assert shown["embeddings"]["api_base"] == f"http://127.0.0.1:{port}/v1?token=***"
    assert json.loads(runs["config"].stdout)["agent"]["api_base"] == shown["agent"]["api_base"]
    assert runs["agent -m"].returncode == 5  # the model was asked, at the closed port, and its error is masked


def test_migrate_never_shows_the_target_credentials(home):
    port = free_port()
    url = f"http://admin:{MIGRATE_SECRET}@127.0.0.1:{port}"
    p = memclaw(home, "memory", "migrate", "--to", url)
    assert p.returncode == 4 and f"http://***@127.0.0.1:{port}" in p.stderr, p.stderr
    assert MIGRATE_SECRET not in p.stdout + p.stderr
    bad = memclaw(home, "memory", "migrate", "--to", f"ftp://admin:{MIGRATE_SECRET}@127.0.0.1:{port}")
    assert bad.returncode == 2 and "ftp://***@127.0.0.1" in bad.stderr and MIGRATE_SECRET not in bad.stderr
    assert MIGRATE_SECRET.encode() not in everything_under(home)


def test_chroma_url_credentials_in_the_environment_are_masked_too(home):
    port = free_port()
    p = memclaw(home, "status", "--json", MEMCLAW_MEMORY__CHROMA_URL=f"https://{TOKEN}@127.0.0.1:{port}/")
    assert p.returncode == 0 and TOKEN not in p.stdout + p.stderr
    assert json.loads(p.stdout)["config"]["memory"]["chroma_url"] == f"https://***@127.0.0.1:{port}/"


def test_a_manifest_written_before_the_fix_does_not_show_its_credentials(home, embedder):
    """An index built by an older memclaw recorded the server's URL with its credentials: stats mask them too."""
    from memclaw.index import layout as ix
    from memclaw.service.facade import MemoryService
    from memclaw.workspace import Workspace

    mem = MemoryService(Workspace(home / "workspace"), Config(), embedder=embedder)
    mem.sync()
    manifest = ix.read_manifest(mem.layout)
    manifest["store"] = f"server http://user:{TOKEN}@127.0.0.1:1"
    ix.write_manifest(mem.layout, manifest)
    fresh = MemoryService(Workspace(home / "workspace"), Config(), embedder=embedder)
    stats = json.dumps(fresh.stats())
    assert TOKEN not in stats and "server http://***@127.0.0.1:1" in stats
    mem.close()
    fresh.close()


# ----- (b) the exec tool's environment -------------------------------------------------------------------------
HEADER = "Bearer hdr-SECRET-token-9911"
API_KEY = "sk-proj-agent-SECRET-4455"


def test_exec_environment_drops_every_known_secret_whatever_its_name(tmp_path, monkeypatch):
    from memclaw.tools.base import ToolContext
    from memclaw.tools.registry import ToolRegistry

    cfg = Config(
        agent={"api_key": API_KEY, "exec_enabled": True, "exec_sandbox": "none"},  # bwrap clears the whole env
        memory={"chroma_headers": {"Authorization": HEADER}},
        channels={"discord": {"token": "discord-bot-SECRET-token-31"}},
    )
    (tmp_path / "memory").mkdir()
    ctx = ToolContext(root=tmp_path, config=cfg, scope="owner", is_owner=True)
    leaks = {
        "MEMCLAW_MEMORY__CHROMA_HEADERS": json.dumps({"Authorization": HEADER}),  # a name without KEY/TOKEN
        "DATABASE_URL": "postgres://app:DBPASS-6677@db.internal:5432/app",  # URL credentials
        "MY_SETTING": API_KEY,  # the agent's key under an innocent name
        "BOT": "discord-bot-SECRET-token-31",
        "MEMCLAW_CHANNELS__DISCORD__TOKEN": "discord-bot-SECRET-token-31",
        "GITHUB_TOKEN": "ghp_" + "x" * 36,
    }
    for k, v in leaks.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("PLAIN_SETTING", "kept-value-123")
    monkeypatch.setenv("SERVICE_URL", "http://127.0.0.1:8000/api")  # a URL without credentials is kept
    r = asyncio.run(ToolRegistry().execute("exec", {"command": "env"}, ctx))
    assert r.ok, r.content
    for k, v in leaks.items():
        assert v not in r.content and f"{k}=" not in r.content, k
    for s in ("DBPASS", "hdr-SECRET", "agent-SECRET", "bot-SECRET"):
        assert s not in r.content
    assert "PLAIN_SETTING=kept-value-123" in r.content and "SERVICE_URL=http://127.0.0.1:8000/api" in r.content


# ----- (c) -vv and third-party request dumps ---------------------------------------------------------------------
FILE_SECRET = "sk-live-FILE-SECRET-0042"
BODY_MARKER = "marker-of-the-request-body-8812"


@pytest.fixture
def llm_server(monkeypatch):
    with scripted_server(monkeypatch) as s:
        yield s


def test_debug_logging_never_dumps_requests_or_secrets(tmp_path, llm_server):
    """A tool reads a file holding the agent's API key and a database URL; the next request carries that tool
    result. At -vv memclaw's debug lines are there, the OpenAI SDK's and httpx's request dumps are not, and neither
    secret is on stderr (nor the key litellm sends in its header)."""
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "MEMORY.md").write_text(MEMORY)
    (root / "creds.txt").write_text(
        f"api key: {FILE_SECRET}\ndb: postgres://app:DBPASS-6677@db/app\nnote: {BODY_MARKER}\n"
    )
    llm_server.tool_call("read_file", {"path": "creds.txt"})
    llm_server.reply("I read the file.")
    p = memclaw(
        tmp_path / "home",
        "-vv",
        "agent",
        "-m",
        "read creds.txt",
        "-w",
        str(root),
        MEMCLAW_AGENT__MODEL="openai/gpt-4o-mini",
        MEMCLAW_AGENT__MAX_RETRIES="0",
        MEMCLAW_AGENT__API_KEY=FILE_SECRET,
        OPENAI_API_BASE=llm_server.url,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "I read the file."
    sent = json.dumps(llm_server.requests[1])
    assert BODY_MARKER in sent  # the tool result really went out in a request body (a dump would show it)
    assert FILE_SECRET not in sent and "DBPASS" not in sent and "api key: ***" in sent  # masked (issue 39.1)
    assert "INFO memclaw.agent.loop: tool read_file -> ok" in p.stderr  # -vv shows memclaw's own lines
    assert FILE_SECRET not in p.stderr and "DBPASS" not in p.stderr and BODY_MARKER not in p.stderr
    assert "openai._base_client" not in p.stderr and "Request options" not in p.stderr
    assert "HTTP Request:" not in p.stderr  # httpx's request lines stay off too


# ----- memclaw.util.redact --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://user:TOKEN@host:8000", "http://***@host:8000"),
        ("https://TOKEN@github.com/x.git", "https://***@github.com/x.git"),
        ("http://u:p@ss@h/x?a=b@c", "http://***@h/x?a=b@c"),  # an unencoded @ in the password
        ("postgres://app:pw@db:5432/app", "postgres://***@db:5432/app"),
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("http://host/a@b", "http://host/a@b"),  # an @ in the path is not userinfo
        ("mail me at a@b.example", "mail me at a@b.example"),
        ("http://127.0.0.1:18999/v1?api_key=QUERYSECRET", "http://127.0.0.1:18999/v1?api_key=***"),
        ("https://h/x?v=2&apiKey=abc123&sig=ZZ%2Fz#frag", "https://h/x?v=2&apiKey=***&sig=***#frag"),
        (
            "https://h/o?X-Amz-Credential=AK%2F1&X-Amz-Signature=dead",
            "https://h/o?X-Amz-Credential=***&X-Amz-Signature=***",
        ),
        (
            "https://h/cb?code=1&access_token=tok&TOKEN=T2&client_secret=s",
            "https://h/cb?code=1&access_token=***&TOKEN=***&client_secret=***",
        ),
        (
            "https://h/search?q=token+usage&keyword=monkey&page=2",
            "https://h/search?q=token+usage&keyword=monkey&page=2",
        ),
    ],
)
def test_redact_url(url, shown):
    assert redact_url(url) == shown
    assert has_url_credentials(url) == (url != shown)


def test_redact_text_masks_urls_inside_text_and_known_secrets(monkeypatch):
    monkeypatch.setenv("SOME_API_KEY", "env-provider-key-123456")
    text = "Chroma at 'http://u:pw@h:1' failed; key env-provider-key-123456 and x"
    assert redact_text(text, ["and x"]) == "Chroma at 'http://***@h:1' failed; key *** ***"
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")  # a name like a secret, a value that is not one
    assert redact_text("flag false") == "flag false"


def test_environment_filter_keeps_ordinary_variables():
    env = {"PATH": "/usr/bin", "HOME": "/home/x", "URL": "http://h/x", "DB": "mysql://root:pw@h/db", "API_KEY": "k"}
    assert environment_without_secrets(env) == {"PATH": "/usr/bin", "HOME": "/home/x", "URL": "http://h/x"}


def test_redacting_filter_masks_message_arguments_and_tracebacks(monkeypatch):
    from memclaw.util.redact import remember_secrets

    remember_secrets(["remembered-SECRET-value"])
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(self.format(record))

    h = Keep()
    h.addFilter(RedactingFilter())
    h.setFormatter(logging.Formatter("%(message)s"))
    log = logging.getLogger("memclaw.test-redaction")
    log.addHandler(h)
    try:
        log.warning("to %s with %s", "http://u:pw-1@h", "remembered-SECRET-value")
        try:
            raise RuntimeError("failed at http://u:pw-2@h")
        except RuntimeError:
            log.exception("boom remembered-SECRET-value")
    finally:
        log.removeHandler(h)
    text = "\n".join(records)
    assert "pw-1" not in text and "pw-2" not in text and "remembered-SECRET" not in text
    assert "to http://***@h with ***" in text and "RuntimeError: failed at http://***@h" in text

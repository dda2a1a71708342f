"""memclaw.llm.providers knows litellm's providers and key variables without importing litellm (issue 19, items 2 and
5):
its tables are checked here against the pinned litellm itself, so an upgrade that changes them fails here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memclaw.llm import providers
from memclaw.llm.client import litellm_module

# every variable either side could read for a key, cleared before each comparison
_ALL_VARS = sorted(
    {n for k in providers.KEYS.values() for n in (*k.names, *k.accepted)}
    | {"AZURE_API_BASE", "AZURE_API_VERSION", "VERTEXAI_PROJECT", "VERTEXAI_LOCATION", "OLLAMA_API_BASE"}
    | {"CLOUDFLARE_API_BASE", "CLOUDFLARE_ACCOUNT_ID", "AWS_ROLE_ARN", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE"}
    | {"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"}
)
# providers whose name resolution in litellm reaches for the network (GitHub's device login)
_NETWORK = {"github_copilot"}


@pytest.fixture
def no_keys(monkeypatch):
    for n in _ALL_VARS:
        monkeypatch.delenv(n, raising=False)
    return monkeypatch


def _litellm_keys(model: str) -> list[str]:
    missing = litellm_module().validate_environment(model)["missing_keys"]
    return [n for n in missing if "KEY" in n or "TOKEN" in n]


def test_the_provider_list_is_litellms():
    lib = litellm_module()
    assert {str(getattr(p, "value", p)) for p in lib.provider_list} == providers.PROVIDERS


def test_each_providers_key_variables_are_the_ones_litellm_reports_missing(no_keys):
    for provider in sorted(providers.PROVIDERS - _NETWORK):
        model = f"{provider}/some-model"
        expected = _litellm_keys(model)
        names, missing = providers.key_vars(model)
        if expected:
            assert (names, missing) == (expected, True), provider
        else:  # no key litellm knows of: never "missing", the message's guess is PROVIDER_API_KEY
            assert not missing and names == [f"{provider.upper()}_API_KEY"], provider


def test_each_accepted_variable_satisfies_litellm_too(no_keys):
    for provider, key in providers.KEYS.items():
        model = f"{provider}/some-model"
        others = [n for n in litellm_module().validate_environment(model)["missing_keys"] if n not in key.names]
        for alternative in (*key.names, *key.accepted):
            for n in _ALL_VARS:
                no_keys.delenv(n, raising=False)
            for n in others:  # litellm's other requirements (a base URL, an API version)
                no_keys.setenv(n, "x")
            pair = key.names if provider in ("sagemaker", "bedrock") else ()
            for n in (alternative, *pair):
                no_keys.setenv(n, "sk-x")
            assert _litellm_keys(model) == [], (provider, alternative)
            assert providers.key_vars(model)[1] is False, (provider, alternative)


def test_bare_openai_names_and_unknown_models(no_keys):
    assert providers.provider_of("gpt-4o-mini") == "openai" == providers.provider_of("text-embedding-3-small")
    assert providers.key_vars("gpt-4o-mini") == (["OPENAI_API_KEY"], True)
    assert _litellm_keys("gpt-4o-mini") == ["OPENAI_API_KEY"]
    assert providers.provider_of("my-local-model") is None and providers.key_vars("my-local-model") == ([], False)
    assert not providers.is_provider_model("all-MiniLM-L6-v2") and not providers.is_provider_model("notaprovider/x")
    assert providers.is_provider_model("openai/text-embedding-3-small")


def test_a_missing_key_is_one_line_naming_the_variable_and_required_only_where_nothing_else_authenticates(no_keys):
    note = providers.missing_key("gemini/text-embedding-004", None, "embeddings.api_key")
    assert note == (
        "no API key for gemini/text-embedding-004: set GOOGLE_API_KEY or GEMINI_API_KEY in the environment "
        "(or embeddings.api_key)"
    )
    assert providers.missing_key("gemini/x", "sk-configured", "embeddings.api_key") is None
    no_keys.setenv("GEMINI_API_KEY", "sk-x")
    assert providers.missing_key("gemini/x", None, "embeddings.api_key") is None
    assert providers.key_required("openai/gpt-4o") and providers.key_required("anthropic/claude-3-5-haiku-latest")
    # other ways to authenticate (IAM roles, Azure AD), a local server, an unknown provider: never refused up front
    for model in ("bedrock/anthropic.claude-v2", "azure/gpt-4o", "ollama/llama3", "hosted_vllm/x", "my-model"):
        assert not providers.key_required(model), model
    assert os.environ.get("OPENAI_API_KEY") is None


def test_a_key_in_the_env_file_litellm_loads_counts(tmp_path):
    """litellm (in its default DEV mode) loads the first `.env` walking up from its package folder; a key that only
    lives there is a key. A stand-in `litellm` package under a folder holding a `.env` shows where memclaw looks."""
    site = tmp_path / "project" / "site"
    (site / "litellm").mkdir(parents=True)
    (site / "litellm" / "__init__.py").write_text("raise ImportError('not to be imported')\n")
    (tmp_path / "project" / ".env").write_text("OPENAI_API_KEY=sk-from-dotenv\n")
    code = (
        "from memclaw.llm import providers; import sys; "
        "print(providers.key_vars('openai/gpt-4o')[1], providers.key_vars('anthropic/claude-3-5-haiku-latest')[1]); "
        "assert 'litellm' not in sys.modules"
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(Path(__file__).resolve().parents[2])])
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert (p.returncode, p.stdout) == (0, "False True\n"), p.stderr
    env["LITELLM_MODE"] = "PRODUCTION"  # litellm loads no .env then
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert (p.returncode, p.stdout) == (0, "True True\n"), p.stderr

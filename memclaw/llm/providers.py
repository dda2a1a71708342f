"""Which provider a litellm model string names, and which environment variable holds its API key, without
importing litellm (a 3-8 s import): `status`, a missing key and the embedding model's kind are known at once.

The tables mirror litellm (the pinned version): `PROVIDERS` is `litellm.provider_list`, `KEYS` the key variables
`litellm.validate_environment` reports missing for "<provider>/<model>"; tests/llm/test_providers.py checks both
against litellm, so an upgrade that changes them fails there.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

PROVIDERS = frozenset(
    (
        "openai", "chatgpt", "openai_like", "jina_ai", "xai", "zai", "custom_openai", "text-completion-openai",
        "cohere", "cohere_chat", "clarifai", "anthropic", "anthropic_text", "bytez", "replicate", "reducto",
        "aws_textract", "runwayml", "aws_polly", "transcribe", "huggingface", "together_ai", "openrouter",
        "datarobot", "vertex_ai", "vertex_ai_beta", "gemini", "ai21", "baseten", "black_forest_labs", "azure",
        "azure_text", "azure_ai", "sagemaker", "sagemaker_chat", "sagemaker_nova", "bedrock", "vllm",
        "nlp_cloud", "petals", "oobabooga", "ollama", "ollama_chat", "deepinfra", "perplexity", "typesafe",
        "strands_decider", "mistral", "milvus", "groq", "a2a", "gigachat", "nvidia_nim", "nvidia_riva",
        "soniox", "cerebras", "nadir", "ai21_chat", "volcengine", "codestral", "text-completion-codestral",
        "dashscope", "qwencloud", "qwen_ai_platform", "modelscope", "moonshot", "publicai", "v0", "morph",
        "lambda_ai", "inception", "text-completion-inception", "deepseek", "sambanova", "maritalk", "voyage",
        "cloudflare", "xinference", "fireworks_ai", "friendliai", "featherless_ai", "watsonx", "watsonx_text",
        "triton", "predibase", "databricks", "empower", "github", "ragflow", "compactifai",
        "docker_model_runner", "custom", "litellm_proxy", "hosted_vllm", "tencent", "llamafile", "lm_studio",
        "galadriel", "nebius", "infinity", "deepgram", "elevenlabs", "novita", "aiohttp_openai", "langfuse",
        "humanloop", "topaz", "sap", "assemblyai", "azure_speech", "charity_engine", "github_copilot",
        "snowflake", "gradient_ai", "meta_llama", "nscale", "pg_vector", "s3_vectors", "valkey", "mongodb",
        "helicone", "hyperbolic", "recraft", "fal_ai", "stability", "heroku", "aiml", "cometapi", "oci",
        "auto_router", "vercel_ai_gateway", "edenai", "dotprompt", "manus", "wandb", "ovhcloud", "scaleway",
        "lemonade", "amazon_nova", "a2a_agent", "langgraph", "langflow", "minimax", "synthetic", "apertis",
        "nano-gpt", "poe", "chutes", "neosantara", "parasail", "xiaomi_mimo", "tensormesh", "libertai",
        "pinstripes", "cognition", "cortecs", "scx-ai", "prism", "darkbloom", "meta", "sail", "reka",
        "litellm_agent", "cursor", "bedrock_mantle", "gdc",
    )
)  # fmt: skip
"""Every provider prefix litellm knows (litellm.provider_list)."""


@dataclass(frozen=True)
class KeySpec:
    # what a message names (litellm's missing_keys, keys and tokens only)
    names: tuple[str, ...]
    # other variables litellm accepts instead
    accepted: tuple[str, ...] = ()
    # False: the provider has other ways to authenticate (IAM roles, Azure AD tokens)
    required: bool = True


def _k(*names: str, accepted: tuple[str, ...] = (), required: bool = True) -> KeySpec:
    return KeySpec(names, accepted, required)


KEYS: dict[str, KeySpec] = {
    "openai": _k("OPENAI_API_KEY"),
    "xai": _k("XAI_API_KEY"),
    "cohere": _k("COHERE_API_KEY"),
    "anthropic": _k("ANTHROPIC_API_KEY", accepted=("ANTHROPIC_AUTH_TOKEN",)),
    "replicate": _k("REPLICATE_API_KEY"),
    "huggingface": _k("HUGGINGFACE_API_KEY"),
    "together_ai": _k("TOGETHERAI_API_KEY"),
    "openrouter": _k("OPENROUTER_API_KEY"),
    "datarobot": _k("DATAROBOT_API_TOKEN"),
    "gemini": _k("GOOGLE_API_KEY", "GEMINI_API_KEY"),
    "ai21": _k("AI21_API_KEY"),
    "ai21_chat": _k("AI21_API_KEY"),
    "baseten": _k("BASETEN_API_KEY"),
    "azure": _k("AZURE_API_KEY", required=False),
    "sagemaker": _k("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", required=False),
    "bedrock": _k("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", required=False),
    "nlp_cloud": _k("NLP_CLOUD_API_KEY"),
    "deepinfra": _k("DEEPINFRA_API_KEY"),
    "perplexity": _k("PERPLEXITYAI_API_KEY"),
    "mistral": _k("MISTRAL_API_KEY"),
    "groq": _k("GROQ_API_KEY"),
    "nvidia_nim": _k("NVIDIA_NIM_API_KEY"),
    "cerebras": _k("CEREBRAS_API_KEY"),
    "nadir": _k("NADIR_API_KEY"),
    "volcengine": _k("VOLCENGINE_API_KEY"),
    "codestral": _k("CODESTRAL_API_KEY"),
    "text-completion-codestral": _k("CODESTRAL_API_KEY"),
    "dashscope": _k("DASHSCOPE_API_KEY"),
    "qwencloud": _k("QWENCLOUD_API_KEY", accepted=("DASHSCOPE_API_KEY",)),
    "qwen_ai_platform": _k("QWEN_AI_PLATFORM_API_KEY", accepted=("DASHSCOPE_API_KEY",)),
    "modelscope": _k("MODELSCOPE_API_KEY"),
    "moonshot": _k("MOONSHOT_API_KEY"),
    "inception": _k("INCEPTION_API_KEY"),
    "text-completion-inception": _k("INCEPTION_API_KEY"),
    "deepseek": _k("DEEPSEEK_API_KEY"),
    "voyage": _k("VOYAGE_API_KEY"),
    "cloudflare": _k("CLOUDFLARE_API_KEY"),
    "fireworks_ai": _k(
        "FIREWORKS_AI_API_KEY", accepted=("FIREWORKS_API_KEY", "FIREWORKSAI_API_KEY", "FIREWORKS_AI_TOKEN")
    ),
    "featherless_ai": _k("FEATHERLESS_AI_API_KEY"),
    "tencent": _k("TENCENT_API_KEY"),
    "nebius": _k("NEBIUS_API_KEY"),
    "infinity": _k("INFINITY_API_KEY"),
    "novita": _k("NOVITA_API_KEY"),
    "vercel_ai_gateway": _k("VERCEL_AI_GATEWAY_API_KEY"),
    "edenai": _k("EDENAI_API_KEY"),
    "wandb": _k("WANDB_API_KEY"),
}
# Bare model names litellm resolves to OpenAI ("gpt-4o-mini", "text-embedding-3-small"); other bare names need
# litellm's model lists, and are left unknown here.
_OPENAI_BARE = ("gpt-", "chatgpt-", "o1", "o3", "o4", "text-embedding-", "davinci", "babbage", "ft:gpt")


@lru_cache(maxsize=1)
def _litellm_dotenv() -> frozenset[str]:
    """The variables set in the `.env` file litellm loads when imported (in its default DEV mode): the first one
    found walking up from litellm's package folder (python-dotenv's search from the importing file). A key that
    only lives there is a key, as it is for litellm."""
    if os.environ.get("LITELLM_MODE", "DEV") != "DEV":
        return frozenset()
    import importlib.util

    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return frozenset()
    here = Path(next(iter(spec.submodule_search_locations))).resolve()
    for folder in (here, *here.parents):
        env = folder / ".env"
        if env.is_file():
            try:
                from dotenv import dotenv_values

                return frozenset(k for k, v in dotenv_values(env).items() if v)
            # unreadable: litellm would not get a key from it either
            except Exception:
                return frozenset()
    return frozenset()


def _is_set(name: str) -> bool:
    return bool(os.environ.get(name)) or name in _litellm_dotenv()


def provider_of(model: str) -> str | None:
    """The litellm provider `model` names ("openai/gpt-4o" -> "openai"); a bare OpenAI model name counts as
    openai; None when unknown."""
    head, sep, rest = model.partition("/")
    if sep and rest and head in PROVIDERS:
        return head
    return "openai" if not sep and model.lower().startswith(_OPENAI_BARE) else None


def is_provider_model(name: str) -> bool:
    """True for "<provider>/<model>" with a provider litellm knows (openai, gemini, ollama, ...)."""
    head, sep, rest = name.partition("/")
    return bool(sep and rest and head in PROVIDERS)


def key_vars(model: str) -> tuple[list[str], bool]:
    """The environment variables `model`'s key is read from, and whether none of them is set. A provider without
    a known key variable: the PROVIDER_API_KEY guess (never "missing"); an unknown provider: ([], False)."""
    provider = provider_of(model)
    if provider is None:
        return [], False
    key = KEYS.get(provider)
    if key is None:
        return [f"{provider.upper()}_API_KEY"], False
    missing = not any(_is_set(n) for n in key.names + key.accepted)
    # a pair, or one of the role-based credentials
    if provider in ("sagemaker", "bedrock"):
        pair = all(_is_set(n) for n in key.names)
        roles = ("AWS_ROLE_ARN", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
        missing = not pair and not any(_is_set(n) for n in (*roles, "AWS_CONTAINER_CREDENTIALS_FULL_URI"))
    return list(key.names), missing


def key_required(model: str) -> bool:
    """Whether a request to `model` cannot succeed without one of its key variables (or a configured key): False
    for providers with other ways to authenticate (AWS roles, Azure AD) and for providers without a known key."""
    provider = provider_of(model)
    key = KEYS.get(provider or "")
    return key is not None and key.required


def one_of(names: list[str]) -> str:
    """GEMINI_API_KEY or GOOGLE_API_KEY (alternatives), AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (a pair)."""
    return (" or " if all(n.endswith("_API_KEY") for n in names) else " and ").join(names)


def key_env_names(model: str) -> str:
    """The environment variable(s) that hold `model`'s API key, as a message names them ("OPENAI_API_KEY",
    "GOOGLE_API_KEY or GEMINI_API_KEY"); "" when the provider is unknown."""
    return one_of(key_vars(model)[0])


def missing_key(model: str, configured: str | None, setting: str) -> str | None:
    """One line when `model` has no key (none configured as `setting`, none in the environment), else None:
    "no API key for openai/gpt-4o-mini: set OPENAI_API_KEY in the environment (or agent.api_key in config.toml)"."""
    if configured:
        return None
    names, missing = key_vars(model)
    if not missing:
        return None
    return f"no API key for {model}: set {one_of(names) or 'the provider API key'} in the environment (or {setting})"


def required_key_missing(model: str, configured: str | None, setting: str) -> str | None:
    """`missing_key`, for a provider that cannot answer without a key (`key_required`): the line a request would
    end with, said before it is made."""
    return missing_key(model, configured, setting) if key_required(model) else None


LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0"})
"""Hosts that are this machine: a server there (llama.cpp, vLLM, LM Studio, Ollama) takes any key or none."""


def is_local_url(url: str | None) -> bool:
    """Whether `url` points at this machine (loopback, `localhost` or a name under `.localhost`)."""
    if not url:
        return False
    from urllib.parse import urlsplit

    try:
        host = (urlsplit(url if "//" in url else "//" + url).hostname or "").lower()
    except ValueError:
        return False
    return host in LOCAL_HOSTS or host.endswith(".localhost") or host.startswith("127.")


def env_api_base(model: str) -> str | None:
    """The endpoint litellm takes from the environment for `model`'s provider (`OPENAI_API_BASE` for openai/...),
    when the config names none."""
    provider = provider_of(model)
    if provider is None:
        return None
    return os.environ.get(f"{provider.upper()}_API_BASE") or None

"""Configuration: pydantic models, a TOML or JSON file under MEMCLAW_HOME, and environment overrides.

Precedence, highest first: environment (`MEMCLAW_<SECTION>__<KEY>`, e.g. `MEMCLAW_AGENT__MODEL`), the config
file (`$MEMCLAW_HOME/config.toml` or `config.json`), defaults. Unknown keys and wrong types fail loudly with
the key and the file named; nothing silently falls back to a default.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from memclaw.config.env import ENV_PREFIX, check_env_names, env_values, merged
from memclaw.config.presets import PRESETS, RETIRED_KEY, PresetName, RecallTuning, tuned, without_retired
from memclaw.defaults import CONTEXT_RECALL_K, EMBEDDINGS_BACKEND, EMBEDDINGS_MODEL, RECALL_MODE
from memclaw.errors import ConfigError
from memclaw.util.home import config_path

# the place other modules import it from
from memclaw.util.home import memclaw_home as memclaw_home
from memclaw.util.safepath import NotRegularFileError, read_regular


class _Section(BaseModel):
    # strict: `k = true` or `k = "8"` in the file is an error, not 1 or 8 (the environment's text is typed first,
    # see memclaw.config.env); NaN and infinity are no setting's value
    model_config = ConfigDict(extra="forbid", validate_assignment=True, strict=True, allow_inf_nan=False)


def http_url_problem(url: str) -> str | None:
    """Why `url` cannot be a Chroma server's address (said without the URL: it may hold credentials), or None."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url.strip())
        # ValueError for a port that is not a number
        port = parts.port
    except ValueError:
        return "is not a valid URL; use e.g. http://127.0.0.1:8000"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "is not an http(s) URL with a host; use e.g. http://127.0.0.1:8000"
    if port == 0:
        return "has port 0; use the port the server listens on, e.g. http://127.0.0.1:8000"
    return None


class EmbeddingsConfig(_Section):
    model: str = EMBEDDINGS_MODEL
    """A name from embeddings/registry.toml, any sentence-transformers model name or local path (on this machine),
    or "<provider>/<model>" for the provider's embeddings through litellm, e.g. openai/text-embedding-3-small
    (memories then leave the machine)."""
    backend: Literal["auto", "onnx", "torch"] = EMBEDDINGS_BACKEND
    """auto: the cached ONNX export when present (fast start), else sentence-transformers (torch)."""
    batch_size: int = Field(64, ge=1, le=4096)
    cache_dir: Path | None = Field(None, strict=False)
    """Where ONNX exports (default: the repository's embeddings/cache, else $MEMCLAW_HOME/models) and a provider's
    query embeddings (default: $MEMCLAW_HOME/cache) are cached."""
    api_base: str | None = None
    """Provider models: the endpoint (else the provider's variable, e.g. OPENAI_API_BASE, or its default)."""
    api_key: SecretStr | None = None
    """Provider models: the API key (else the provider's variable, e.g. OPENAI_API_KEY); never printed."""
    timeout_s: float = Field(30.0, gt=0, le=600)
    """Provider models: how long one request may take."""
    max_retries: int = Field(3, ge=0, le=10)
    """Provider models: retries on 429, 5xx, timeouts and connection errors (never on a rejected key)."""
    dimensions: int | None = Field(None, ge=1)
    """Provider models that can shorten their vectors (text-embedding-3-*): the size to ask for."""
    max_input_tokens: int | None = Field(None, ge=16)
    """Provider models: cut each input to this many tokens; default: litellm's model info, else 8191."""


class MemoryConfig(_Section):
    chroma_url: str | None = None
    """Use a Chroma server (chromadb.HttpClient) instead of the embedded store, e.g. http://127.0.0.1:8000."""
    chroma_headers: dict[str, SecretStr] = Field(default_factory=dict)
    """Extra HTTP headers for the Chroma server (e.g. Authorization); never printed."""
    chroma_timeout_s: float = Field(30.0, gt=0, le=600)
    """With chroma_url: how long one request may wait for the server (connecting is bounded at 3 s). A frozen
    server then costs recall this long once, and recall answers from BM25 with a warning."""
    index_dir: Path | None = Field(None, strict=False)
    """Where the derived index lives; default <workspace>/.memclaw-index."""
    auto_sync: bool = True
    """Sync the index from the Markdown before recall when the files changed."""
    archive: bool = True
    """Keep what consolidation reads verbatim, one Markdown file per day (memory/archive/YYYY-MM-DD.md, secrets
    masked); false: nothing is archived, consolidation writes only facts and history."""
    agent_reply_vectors: Literal["passages", "head"] = "passages"
    """How the agent's archived replies are embedded. passages: like every unit, a long one as passages of 60 words
    plus its head. head: the head alone, one vector of the whole reply, which the model reads to 256 word pieces
    (about 3x fewer vectors per turn: docs/decisions/0043-ingest-speed.md). With recall.vector_signal = "passages"
    a long reply then has no vector signal. Changing it rebuilds the index."""
    small_scope_vectors: int = Field(1000, ge=0, le=100_000)
    """An outsider's scope with at most this many vectors keeps them in one small file, searched exactly, instead
    of a Chroma collection (which holds 4 open files and ~2.6 MiB for the life of the process); past it the scope
    moves into Chroma. Embedded store only; 0: every scope in Chroma. Scopes indexed before this existed stay in
    Chroma until `memclaw memory reindex`."""
    outsider_facts: int = Field(200, ge=0, le=1_000_000)
    """An outsider's scope holds at most this many facts written by `remember`; past it the tool refuses."""
    outsider_fact_chars: int = Field(40_000, ge=0, le=100_000_000)
    """An outsider's scope holds at most this many characters of facts (MEMORY.md) written by `remember`."""
    open_scopes: int = Field(256, ge=1, le=100_000)
    """At most this many scopes' unit tables and BM25 indexes stay loaded in a process (the owner's always among
    them); the least recently used other scope is read again from its state file at its next use."""

    @field_validator("chroma_url")
    @classmethod
    def _chroma_url(cls, v: str | None) -> str | None:
        if v is None or not v.strip():
            # "" unsets it
            return None
        problem = http_url_problem(v)
        if problem:
            raise ValueError(f"the URL {problem}")
        return v.strip()


class RerankConfig(_Section):
    """`recall.rerank`: a re-ranker that reorders the first `top_n` fused hits (off by default).
    See docs/recall.md and docs/decisions/0042-a-re-ranking-seam.md."""

    kind: Literal["off", "provider", "cross_encoder", "chat"] = "off"
    """provider: a rerank API through litellm, `model` e.g. cohere/rerank-v3.5, jina_ai/jina-reranker-v2-base-en or
    voyage/rerank-2; a local server by `api_base`: infinity/<name>, or huggingface/<name> for TEI. cross_encoder: a
    sentence-transformers CrossEncoder saved in the local directory `model`. chat: a chat model (`model`, default
    agent.model) orders them, costing tokens."""
    model: str | None = None
    """provider: "<provider>/<model>"; cross_encoder: a local directory (never downloaded); chat: a litellm model
    name (default: agent.model, with its endpoint and key)."""
    top_n: int = Field(30, ge=2, le=200)
    """How many of the first fused hits are re-ranked; the hits after them keep their fused order."""
    api_base: str | None = None
    """provider: the endpoint (e.g. a local Infinity or TEI server); else the provider's variable or default."""
    api_key: SecretStr | None = None
    """provider: the API key (else the provider's variable, e.g. COHERE_API_KEY); never printed."""
    timeout_s: float = Field(10.0, gt=0, le=120)
    """How long one re-ranking request may take. A failure is not retried: recall keeps the fused order, and the
    re-ranker is not asked again for a minute after it failed."""
    max_chars: int = Field(1000, ge=50, le=20_000)
    """Each candidate's text is cut to this many characters before it is sent (it bounds the cost of a request)."""

    @field_validator("model")
    @classmethod
    def _model(cls, v: str | None) -> str | None:
        return (v.strip() or None) if v is not None else None

    @model_validator(mode="after")
    def _model_named(self) -> RerankConfig:
        if self.kind in ("provider", "cross_encoder") and self.model is None:
            example = "cohere/rerank-v3.5" if self.kind == "provider" else "a local directory"
            raise ValueError(f"kind {self.kind!r} needs recall.rerank.model (e.g. {example})")
        return self


class RecallConfig(_Section):
    """The recall keys a user sets. The ranking's tuning constants are a named preset (memclaw.config.presets)."""

    k: int = Field(8, ge=1, le=200)
    """How many memories the recall command and memory_search return unless asked for another number."""
    mode: Literal["hybrid", "bm25", "vector"] = RECALL_MODE
    """hybrid: words (BM25) and meaning (the embedding) fused; bm25: words alone, no model loaded; vector: meaning
    alone."""
    max_query_chars: int = Field(2000, ge=1)
    """A recall query (the recall command, a message's auto-recall, memory_search) longer than this is cut to it,
    with a note: the work of recall grows with the query, and a hostile one can be megabytes."""
    min_similarity: float = Field(0.15, ge=-1, le=1)
    """Vector hits below this cosine similarity are not evidence of relevance. Its scale is the embedding model's:
    another model may need another floor."""
    archive_min_similarity: float = Field(0.2, ge=-1, le=1)
    """An archived turn that shares no word with the query needs at least this cosine similarity: a short chat line
    sits near almost any query. 0 turns it off; docs/decisions/0030-retries-and-the-archive-floor.md."""
    recency_half_life_days: float | None = Field(None, gt=0)
    """If set, history entries (never facts) are boosted by recency with this half-life."""
    preset: PresetName = "default"
    """The ranking's tuning constants, by name: `default`, or `plain-rrf` (reciprocal-rank fusion of the two
    signals alone, no session links, dates or agent's-turn weight). Their values: the presets table below."""

    rerank: RerankConfig = Field(default_factory=RerankConfig)
    """A re-ranker of the first fused hits (off by default)."""

    _tuning: RecallTuning | None = PrivateAttr(None)

    @model_validator(mode="before")
    @classmethod
    def _retired_keys(cls, data: Any) -> Any:
        return without_retired(data) if isinstance(data, dict) else data

    @property
    def tuning(self) -> RecallTuning:
        """The tuning constants recall ranks with: the preset's, or those `with_tuning` set."""
        return self._tuning if self._tuning is not None else PRESETS[self.preset]

    def with_tuning(self, **changes: Any) -> RecallConfig:
        """A copy that ranks with these tuning values over its own: the benchmarks', the lab's and the tests' seam.
        ValueError for a name RecallTuning has not."""
        copy = self.model_copy()
        copy._tuning = tuned(self.tuning, changes)
        return copy


class AgentConfig(_Section):
    model: str = "openai/gpt-4o-mini"
    api_base: str | None = None
    api_key: SecretStr | None = None
    transport: Literal["auto", "litellm"] = "auto"
    """`auto`: an `openai/` model at a server you named (`api_base`, `OPENAI_BASE_URL`) is asked over plain HTTP,
    without importing litellm; every other model goes through litellm. `litellm`: every model through litellm."""
    timeout_s: float = Field(60.0, gt=0)
    max_retries: int = Field(3, ge=0, le=10)
    max_tool_iterations: int = Field(20, ge=1, le=200)
    memory_window: int = Field(50, ge=4)
    consolidation_tokens: int = Field(16_000, ge=1_000, le=10_000_000)
    """Token budget of one consolidation prompt. It shows every fact of the scope when all fit, else the facts the
    conversation recalls, best first. A longer conversation is consolidated a part at a time; a turn too long for it
    is kept in the session, with one warning."""
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int = Field(2048, ge=16)
    context_window: int | None = Field(None, ge=512)
    """Override the model's context window (tokens)."""
    model_overrides: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Per-model settings, e.g. {"ollama/llama3": {"context_window": 8192}}."""
    name: str = "memclaw"
    exec_timeout_s: float = Field(30.0, gt=0)
    exec_enabled: bool = False
    """Offer the owner's model the `exec` tool: any shell command, run in the workspace. Off by default: a prompt
    injection that reaches the owner's model (a web page, a file, a pasted text) can then run commands as you."""
    exec_sandbox: Literal["bwrap", "none"] = "bwrap"
    """bwrap: each command runs in a bubblewrap sandbox that sees the system's programs and the workspace, never
    memclaw's process, home, config or environment, nor your home (exec refuses to run without bwrap). none:
    unsafe, the command runs as you and can read every file you can, memclaw's config and environment included."""
    exec_network: bool = False
    """Let exec's sandboxed commands use the network (off: they see no network at all)."""
    restrict_to_workspace: bool = True
    turn_facts: int = Field(5, ge=0, le=10_000)
    """At most this many `remember` calls write a fact in one outsider's turn; later calls are refused (the model
    reads why) and write nothing."""
    turn_fact_chars: int = Field(4000, ge=0, le=10_000_000)
    """At most this many characters of facts are written by `remember` in one outsider's turn."""
    owner_turn_facts: int = Field(50, ge=0, le=10_000)
    """`turn_facts` for the owner's turns."""
    owner_turn_fact_chars: int = Field(50_000, ge=0, le=10_000_000)
    """`turn_fact_chars` for the owner's turns."""


class ContextConfig(_Section):
    recall_k: int = Field(CONTEXT_RECALL_K, ge=0, le=200)
    """At most this many recalled memories are offered to the memory section (0 turns auto-recall off)."""
    memory_tokens: int = Field(1024, ge=0)
    """Token budget of the recalled memories in the prompt: the best-ranked memories that fit, whatever their
    count (how the default was chosen: docs/decisions/0002-the-memory-budget.md)."""
    reply_reserve: int = Field(2048, ge=0)
    timezone: str | None = None
    """IANA name (e.g. Europe/Berlin); default: the machine's local zone."""

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, v: str | None) -> str | None:
        if v is None:
            return None
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError("unknown time zone: use an IANA name such as Europe/Berlin or UTC") from None
        return v

    followup_max_words: int = Field(4, ge=0)
    """Messages this short are recalled together with the previous user turn ("and then?")."""


class DiscordConfig(_Section):
    token: SecretStr | None = None
    allow_from: list[str] = Field(default_factory=list)
    guilds: list[str] = Field(default_factory=list)
    channels: list[str] = Field(default_factory=list)
    always_answer_channels: list[str] = Field(default_factory=list)


class ChannelsConfig(_Section):
    discord: DiscordConfig = Field(default_factory=DiscordConfig)


class Config(BaseModel):
    """The whole configuration. Made with keyword values (the config file's, or a caller's), which the environment
    overrides key by key (`MEMCLAW_<SECTION>__<KEY>`: memclaw.config.env)."""

    model_config = ConfigDict(
        extra="forbid",
        validate_assignment=True,
        validate_default=True,
        # not strict here: the sections are, and the environment's text is typed for them (memclaw.config.env)
    )

    workspace: Path | None = Field(None, strict=False)
    """Default workspace; default $MEMCLAW_HOME/workspace."""
    owners: dict[str, list[str]] = Field(default_factory=dict)
    """Owner ids per channel, e.g. {"discord": ["123456789"]}. The CLI is always the owner."""
    embeddings: EmbeddingsConfig = Field(default_factory=EmbeddingsConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    recall: RecallConfig = Field(default_factory=RecallConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    context: ContextConfig = Field(default_factory=ContextConfig)
    channels: ChannelsConfig = Field(default_factory=ChannelsConfig)

    def __init__(self, **values: Any) -> None:
        fields = {name.lower(): name for name in type(self).model_fields}
        # top-level keys in any case (two spellings of one: the first)
        spelt: dict[str, Any] = {}
        for key, value in values.items():
            spelt.setdefault(fields.get(key.lower(), key), value)
        super().__init__(**merged(spelt, env_values(type(self))))


def _read_file(path: Path) -> dict[str, Any]:
    try:
        raw = read_regular(path, follow=True)
    except IsADirectoryError as e:
        raise ConfigError(f"config {path} is a directory; remove it or make it a config file") from e
    except NotRegularFileError as e:
        raise ConfigError(f"config {path}: {e.strerror}; make it a config file") from e
    except OSError as e:
        raise ConfigError(f"cannot read config {path}: {e.strerror}; fix its permissions") from e
    try:
        text = raw.decode("utf-8")
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except UnicodeDecodeError as e:
        raise ConfigError(f"config {path} is not UTF-8 text; re-save it as UTF-8") from e
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"config {path} is not valid {path.suffix[1:].upper()}: {e}; fix the syntax there") from e
    except RecursionError:
        raise ConfigError(
            f"config {path} nests arrays or tables too deeply to read; fix the syntax there (memclaw's keys nest at "
            "most a few levels)"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"config {path} must hold a table/object at the top level")
    return data


def _env_var_for(loc: tuple) -> str | None:
    """The MEMCLAW_* variable that set the key at `loc` (or a section holding it), if one is set."""
    names = {k.upper(): k for k in os.environ}
    parts = [str(p) for p in loc]
    for n in range(len(parts), 0, -1):
        name = ENV_PREFIX + "__".join(parts[:n]).upper()
        if name in names:
            return names[name]
    return None


def _describe(err: ValidationError, file_origin: str | None) -> str:
    first = err.errors()[0]
    loc = tuple(first["loc"])
    if first["type"] == RETIRED_KEY:
        loc += (first["ctx"]["key"],)
    key = ".".join(str(p) for p in loc) or "(top level)"
    # never the value: it may be a secret
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        msg = "unknown key (check the spelling against `memclaw config --defaults`)"
    more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    # the environment beats the file, so a set variable is the culprit
    env = _env_var_for(loc)
    origin = f"environment variable {env}" if env is not None else file_origin or "the environment"
    if first["type"] == RETIRED_KEY:
        return f"config key '{key}' from {origin} {msg}"
    if env is not None:
        return f"invalid config key '{key}' from {origin}: {msg}{more}; fix or unset it"
    return f"invalid config key '{key}' in {origin}: {msg}{more}; fix the value or remove the key"


def load_config(home: Path | None = None, *, path: Path | None = None) -> Config:
    """Load and validate the config. Raises ConfigError naming the key and the file (or variable)."""
    if path is None:
        path = config_path(home)
        if path is not None and path.suffix == ".toml" and path.with_suffix(".json").exists():
            raise ConfigError(
                f"both {path} and {path.with_suffix('.json')} exist and memclaw reads only the first; "
                "merge them into one and remove the other"
            )
    data = _read_file(path) if path else {}
    check_env_names({name: _is_section(f.annotation) for name, f in Config.model_fields.items()})
    try:
        # a section, table or list set by a variable that is not JSON: ConfigError, said there
        cfg = Config(**data)
    except ValidationError as e:
        raise ConfigError(_describe(e, str(path) if path else None)) from None
    from memclaw.util.redact import remember_secrets

    # masked in every later error, warning and log line
    remember_secrets(config_secrets(cfg))
    return cfg


def _is_section(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def dump_config(cfg: Config) -> dict[str, Any]:
    """The effective config as plain data, secrets masked (URL credentials too)."""
    from memclaw.util.redact import redact_url

    return json.loads(redact_url(cfg.model_dump_json()))


def config_secrets(config: Config) -> list[str]:
    """Every secret value `config` holds: API keys, Chroma headers, the Discord token, URL credentials (userinfo
    and secret query parameters)."""
    from memclaw.util.redact import secret_pieces, url_secrets

    vals: list[str] = []
    for v in (
        config.agent.api_key,
        config.embeddings.api_key,
        config.channels.discord.token,
        config.recall.rerank.api_key,
        *config.memory.chroma_headers.values(),
    ):
        if v is not None:
            vals += secret_pieces(v.get_secret_value())
    for url in (
        config.memory.chroma_url,
        config.agent.api_base,
        config.embeddings.api_base,
        config.recall.rerank.api_base,
    ):
        if url:
            vals += url_secrets(url)
    return vals

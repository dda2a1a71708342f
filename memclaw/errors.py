"""Every error memclaw raises on purpose. Each message names the fix.

The CLI turns these into a one-line message and the exit code below, in one place (memclaw.cli.main).
"""

from __future__ import annotations


class MemclawError(Exception):
    """Base class. `exit_code` is what the CLI exits with."""

    exit_code = 1


class ConfigError(MemclawError):
    """The config file or an environment override is invalid."""

    exit_code = 2


class WorkspaceError(MemclawError):
    """No workspace, or it cannot be read or written."""

    exit_code = 2


class InvalidSenderError(MemclawError):
    """A sender id that cannot name a memory scope safely."""

    exit_code = 2


class MemoryFileError(MemclawError):
    """A memory Markdown file cannot be read or written."""

    exit_code = 3


class EmbeddingError(MemclawError):
    """The embedding model is missing, unverifiable or failed."""

    exit_code = 3


class DerivedIndexError(MemclawError):
    """The derived index cannot be opened or updated (it can always be rebuilt from the Markdown)."""

    exit_code = 3


class VectorStoreCorrupted(DerivedIndexError):
    """The vector store's files are damaged (e.g. chroma.sqlite3 overwritten, an HNSW segment truncated).

    The vectors are derived data: memclaw warns, drops them and rebuilds them from the Markdown."""

    exit_code = 3


class ServiceUnreachable(MemclawError):
    """A service memclaw needs cannot be reached over the network (exit 4)."""

    exit_code = 4


class VectorStoreUnavailable(ServiceUnreachable):
    """The vector store (e.g. a Chroma server) cannot be reached."""

    exit_code = 4


class DiscordUnreachable(ServiceUnreachable):
    """Discord cannot be reached (no network, DNS, a proxy or firewall in the way): `memclaw gateway` stops."""

    exit_code = 4


class SkillError(MemclawError):
    """A SKILL.md file is broken (skipped with a warning, never fatal)."""

    exit_code = 2


class LLMError(MemclawError):
    """The LLM stayed unavailable or kept returning junk."""

    exit_code = 5


class EmbeddingProviderError(LLMError):
    """The embedding provider (embeddings.model = "<provider>/<model>", through litellm) refused a request."""

    exit_code = 5


class EmbeddingAuthError(EmbeddingProviderError):
    """The embedding provider rejected the API key (never retried)."""

    exit_code = 5


class EmbeddingUnavailable(EmbeddingProviderError):
    """The embedding provider stayed unreachable (429/5xx/timeouts after retries). Recall falls back to BM25 and
    sync leaves the vectors pending until it is back."""

    exit_code = 5


class EmbeddingKeyMissing(EmbeddingUnavailable):
    """The embedding provider needs an API key and none is set: known before any request, never retried. Sync
    leaves the vectors pending (as for an outage); the message names the variable to set."""

    exit_code = 5


class ConsolidationError(LLMError):
    """The model's memory update (consolidation JSON) stayed unusable after the retry; nothing was written."""

    exit_code = 5


class ConsolidationOverBudget(ConsolidationError):
    """A consolidation prompt cannot fit `agent.consolidation_tokens`; nothing was asked or written."""


class RerankError(MemclawError):
    """The configured re-ranker (recall.rerank) failed: unreachable, too slow, or its answer unusable. Recall keeps
    the fused order and says so; a command never fails for it."""

    exit_code = 5


class SessionError(MemclawError):
    """A session file cannot be read or written."""

    exit_code = 3


class UsageError(MemclawError):
    """The command was called with arguments that cannot work."""

    exit_code = 2


class ImportSourceError(UsageError):
    """A file to import cannot be read as its format says: broken, too large, or a symlink (exit 2, nothing written)."""


class NothingToRecall(UsageError):
    """A recall query with nothing to search for: empty, or only stop words ("the and of"). Auto-recall recalls
    nothing for it, silently; a command says so (exit 2)."""

    def __init__(self) -> None:
        super().__init__(
            'empty query: nothing to search for (only words like "the" and "of" count as none); say what to '
            'recall, e.g. memclaw recall "where does Anna work"'
        )


def rebuild_hint(index_root: object) -> str:
    """The advice after "fix its permissions" for a path of the index: delete the index folder (memclaw rebuilds it)
    only if memclaw made it, which its manifest says; nothing else (never delete what memclaw did not make)."""
    import os
    import stat
    from pathlib import Path

    try:
        ours = stat.S_ISREG(os.stat(Path(str(index_root)) / "manifest.json").st_mode)
    except OSError:
        ours = False
    return f", or delete {index_root} (memclaw rebuilds it from the Markdown)" if ours else ""

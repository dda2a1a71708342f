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


class IndexError_(MemclawError):
    """The derived index cannot be opened or updated (it can always be rebuilt from the Markdown)."""

    exit_code = 3


class VectorStoreCorrupted(IndexError_):
    """The vector store's files are damaged (e.g. chroma.sqlite3 overwritten, an HNSW segment truncated).

    The vectors are derived data: memclaw warns, drops them and rebuilds them from the Markdown."""

    exit_code = 3


class VectorStoreUnavailable(MemclawError):
    """The vector store (e.g. a Chroma server) cannot be reached."""

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


class SessionError(MemclawError):
    """A session file cannot be read or written."""

    exit_code = 3


class UsageError(MemclawError):
    """The command was called with arguments that cannot work."""

    exit_code = 2


def from_permission_error(e: PermissionError) -> MemclawError:
    """The CLI's last resort for a PermissionError that no code path said in its own words: one line naming the path
    and the fix; an IndexError_ (exit 3) inside the index folder, a MemoryFileError (3) inside memory/, else a
    WorkspaceError (2)."""
    from pathlib import Path

    from memclaw.workspace import INDEX_DIRNAME

    path = e.filename or "a file"
    parts = Path(str(path)).parts
    if INDEX_DIRNAME in parts:
        return IndexError_(
            f"cannot use the index: {path}: permission denied; fix its permissions, or delete {INDEX_DIRNAME} "
            "(it is rebuilt from the Markdown)"
        )
    cls = MemoryFileError if "memory" in parts else WorkspaceError
    return cls(f"cannot access {path}: permission denied; fix its permissions")

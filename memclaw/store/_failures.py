"""Chroma's failures said as memclaw's errors: a missing collection, damaged files, files it may not use, an
unreachable or slow server (`translate`), each naming its fix."""

from __future__ import annotations

from pathlib import Path

from memclaw.errors import DerivedIndexError, MemclawError, VectorStoreCorrupted, VectorStoreUnavailable

# What chromadb / SQLite / the HNSW reader say about damaged files (versions differ in the wording).
_CORRUPTION_MARKERS = (
    "not a database",
    "malformed",
    "corrupt",
    "no such table",
    "error deserializing",
    "hnsw segment",
    "error finding id",
    "eof while parsing",
    "unexpected end of file",
    "failed to fill whole buffer",
)


def is_not_found(e: Exception) -> bool:
    name = type(e).__name__
    text = str(e).lower()
    return "NotFound" in name or "does not exist" in text or "not found" in text


def is_corruption(e: Exception) -> bool:
    text = str(e).lower()
    return not isinstance(e, OSError) and any(m in text for m in _CORRUPTION_MARKERS)


def is_permission(e: Exception) -> bool:
    """Chroma's files cannot be read or written (permissions, a read-only folder): not damage, a rebuild fails too."""
    text = str(e).lower()
    return isinstance(e, PermissionError) or "readonly database" in text or "permission denied" in text


def permission_error(e: Exception, where: str | Path) -> DerivedIndexError:
    first = str(e).splitlines()[0] if str(e) else type(e).__name__
    return DerivedIndexError(f"Chroma cannot use its files at {where} ({first}): fix the folder's permissions")


def translate(e: Exception, where: str) -> Exception:
    from memclaw.util.redact import redact_text

    name = type(e).__name__
    # a server's URL may carry credentials
    text, where = redact_text(str(e)), redact_text(where)
    if isinstance(e, MemclawError):
        # already said in memclaw's words
        return e
    if is_permission(e):
        return permission_error(e, where)
    if is_corruption(e):
        return VectorStoreCorrupted(
            f"Chroma at {where} is damaged ({name}: {text.splitlines()[0]}); "
            "run `memclaw memory reindex` to rebuild it from the Markdown"
        )
    if "Timeout" in name and "Connect" not in name:
        return VectorStoreUnavailable(
            f"Chroma at {where} did not answer in time ({name}); check the server, or raise memory.chroma_timeout_s"
        )
    if any(s in name for s in ("ConnectError", "ConnectionError", "Timeout", "RemoteProtocolError")) or any(
        s in text for s in ("Could not connect", "Connection refused", "connect to tenant")
    ):
        return VectorStoreUnavailable(f"Chroma at {where} is unreachable ({name}); start it or unset memory.chroma_url")
    return DerivedIndexError(
        f"Chroma at {where} failed: {name}: {text.splitlines()[0] if text else ''}; "
        "run `memclaw memory reindex` to rebuild it from the Markdown"
    )

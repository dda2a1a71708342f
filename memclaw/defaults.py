"""The config defaults that the start-up reads before pydantic is imported.

memclaw.config builds its fields from these names, and memclaw.cli.early guesses the model to load from them. This
module imports nothing, so reading it costs nothing at start-up; it is the one source of each value it holds.

See docs/decisions/0034-one-source-of-ranking-defaults.md.
"""

from __future__ import annotations

EMBEDDINGS_MODEL = "all-MiniLM-L6-v2"
"""`embeddings.model`."""
EMBEDDINGS_BACKEND = "auto"
"""`embeddings.backend`."""
RECALL_MODE = "hybrid"
"""`recall.mode`."""
CONTEXT_RECALL_K = 40
"""`context.recall_k`."""

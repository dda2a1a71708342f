"""Stage 2, derived state: the index folder's layout and manifest, each scope's state (SQLite), the BM25 index and
its tokenizer, the unit table and the passages a long unit is embedded as. Rebuildable from the Markdown.

See ARCHITECTURE.md for the layers and the rule each import follows."""

"""Stage 1, the source of truth: memory units parsed from MEMORY.md and HISTORY.md (grammar, formats, incremental
parse of appends), and every edit memclaw makes to those files. Pure text in, units out; no index here.

See ARCHITECTURE.md for the layers and the rule each import follows."""

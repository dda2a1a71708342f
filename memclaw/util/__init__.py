"""Foundation helpers with no memclaw dependencies above errors: durable file writes, literal text for terminals,
secret redaction, symlink-safe paths, progress lines, small text and JSON helpers.

See ARCHITECTURE.md for the layers and the rule each import follows."""

"""Stage 5, the turn: the agent loop and its commands, sessions, consolidation of old turns into memory.

See ARCHITECTURE.md for the layers and the rule each import follows."""

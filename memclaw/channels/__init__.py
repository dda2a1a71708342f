"""Stage 6, where people talk to it: the per-conversation queue, message chunking, who may talk (access), and
Discord (`channels.discord`, the only place that imports discord.py).

See ARCHITECTURE.md for the layers and the rule each import follows."""

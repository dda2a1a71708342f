"""memclaw: a personal AI assistant with real long-term memory."""

__version__ = "0.1.0"

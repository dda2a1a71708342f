"""The `memclaw` command: thin command functions over the packages below.

See ARCHITECTURE.md for the layers and the rule each import follows."""

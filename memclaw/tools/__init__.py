"""The tools the model may call in a turn: files, exec, memory search, remember; which are the owner's only.

See ARCHITECTURE.md for the layers and the rule each import follows."""

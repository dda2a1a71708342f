"""The facade that wires the stages for one workspace (MemoryService: sync, recall, add, forget), migration
between vector stores, and what the owner has forgotten.

See ARCHITECTURE.md for the layers and the rule each import follows."""

"""Stage 4, what the model sees: the sender-aware context builder, the priority-ordered token budget, the memory
section fill, skills, and the views that show recall and context to a person.

See ARCHITECTURE.md for the layers and the rule each import follows."""

"""Other assistants' memory brought into memclaw (`memclaw import`): readers per source (`sources`), the writer
that turns them into consolidation records (`run`), and the model pass of `--consolidate` (`consolidate`)."""

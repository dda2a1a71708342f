"""The vector-store seam: the only package that imports chromadb. One collection per scope; Chroma's own file
layout (embedded or server) stays in here.

See ARCHITECTURE.md for the layers and the rule each import follows."""

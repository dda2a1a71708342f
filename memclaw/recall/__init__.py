"""Stage 3, query -> explained hits: result types, the fusion of the vector and BM25 signals, and the dates a query
names.

See ARCHITECTURE.md for the layers and the rule each import follows."""

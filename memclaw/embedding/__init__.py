"""The embedding seam: the only package that imports sentence-transformers, transformers, onnx, onnxruntime,
tokenizers or torch. The model registry, the bundled model (ONNX fast path), provider models via litellm, and
the query-embedding cache.

See ARCHITECTURE.md for the layers and the rule each import follows."""

"""The LLM seam: the only package that imports litellm (and openai). The client with its retry policy, token
counting, model capabilities and which provider key a model needs (known without importing litellm).

See ARCHITECTURE.md for the layers and the rule each import follows."""

"""LLM and embedding clients (the Embedder now; the LLMClient comes with the LLM layer)."""

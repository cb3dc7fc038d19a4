"""Models: the LLMClient and Embedder protocols, the OpenAI-compatible client, the response cache, the usage
meter, the local SmolLM2 server, the ONNX embedder and a scripted client for tests."""

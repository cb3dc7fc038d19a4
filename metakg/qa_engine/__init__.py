"""The metacognitive QA engine: llm_only, kg_rag, MetaKGRAG, MedCoG, RoboData (issues 7 and later).

It reaches data only through the GraphStore protocol and the LLMClient/Embedder protocols.
"""

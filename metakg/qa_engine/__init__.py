"""The metacognitive QA engine: strategies as plugins over a GraphStore, and the evaluation harness.

- :mod:`~metakg.qa_engine.core`: questions and answers (evidence, support sets, trace, usage).
- :mod:`~metakg.qa_engine.strategy`: the strategy contract and the retrieve-then-answer base.
- :mod:`~metakg.qa_engine.registry` and :mod:`~metakg.qa_engine.strategies`: strategies by name.
- :mod:`~metakg.qa_engine.context` and :mod:`~metakg.qa_engine.services`: what a strategy works with.
- :mod:`~metakg.qa_engine.primitives` and :mod:`~metakg.qa_engine.walk`: shared retrieval steps; each method's
  own parts live in its folder under :mod:`~metakg.qa_engine.strategies` (MedCoG's monitor, RoboData's agent).
- :mod:`~metakg.qa_engine.evaluate`: runs strategies over a benchmark and compares them.

It reaches data only through the GraphStore protocol, models only through the LLMClient and Embedder
protocols, and other services through the protocols of :mod:`metakg.schemas.knowledge_source`.
"""

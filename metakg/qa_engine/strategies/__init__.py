"""The built-in strategies, one module each, and the registry that holds them (:data:`REGISTRY`)."""

from __future__ import annotations

from metakg.qa_engine.registry import StrategyRegistry
from metakg.qa_engine.strategies.kg_rag import KGRag
from metakg.qa_engine.strategies.llm_only import LLMOnly
from metakg.qa_engine.strategies.medcog import MedCoG
from metakg.qa_engine.strategies.metakgrag import MetaKGRAG
from metakg.qa_engine.strategies.robodata import RoboData

#: the strategies metakg ships
REGISTRY = StrategyRegistry([LLMOnly, KGRag, MetaKGRAG, MedCoG, RoboData])

__all__ = ["REGISTRY", "KGRag", "LLMOnly", "MedCoG", "MetaKGRAG", "RoboData"]

"""The built-in strategies, one module each, and the registry that holds them with the installed ones
(:data:`REGISTRY`)."""

from __future__ import annotations

from metakg.qa_engine.registry import StrategyRegistry
from metakg.qa_engine.strategies.kg_rag import KGRag
from metakg.qa_engine.strategies.llm_only import LLMOnly
from metakg.qa_engine.strategies.medcog.strategy import MedCoG
from metakg.qa_engine.strategies.metakgrag.strategy import MetaKGRAG
from metakg.qa_engine.strategies.robodata.strategy import RoboData

#: the strategies metakg ships
BUILT_IN = (LLMOnly, KGRag, MetaKGRAG, MedCoG, RoboData)
#: the strategies metakg ships, and those installed packages name in the ``metakg.strategies`` group
REGISTRY = StrategyRegistry(BUILT_IN)
#: the installed strategies that could not be loaded, one line each (each was logged as a warning)
PLUGIN_PROBLEMS = REGISTRY.load_entry_points()

__all__ = ["BUILT_IN", "PLUGIN_PROBLEMS", "REGISTRY", "KGRag", "LLMOnly", "MedCoG", "MetaKGRAG", "RoboData"]

"""Adapters for the libraries a Neo4j user reaches for: embedders that embed queries as metakg embedded the
nodes' names (the same model, pooling and normalisation), so their vector search over a graph metakg loaded
compares like with like. Each module imports its library, and is imported only by the user's code:
:mod:`metakg.integrations.neo4j_graphrag` (neo4j-graphrag) and :mod:`metakg.integrations.langchain`
(LangChain)."""

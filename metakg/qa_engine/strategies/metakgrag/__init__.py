"""MetaKGRAG (Yuan et al., arXiv 2508.09460): the strategy (:mod:`.strategy`); the greedy walk it shares
with the other graph strategies is :mod:`metakg.qa_engine.walk`."""

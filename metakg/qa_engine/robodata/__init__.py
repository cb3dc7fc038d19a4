"""RoboData (Musumeci, Suriani, Nardi, Wikidata workshop at ISWC 2025): an agent that grows a local KG from a
remote knowledge base and answers with a checked support set per claim.

Landed so far: answer support sets and their verification (:mod:`.support`), the orchestrator's state
machine (:mod:`.fsm`) and the tool protocol (:mod:`.tools`). The strategy itself is not registered yet.
"""

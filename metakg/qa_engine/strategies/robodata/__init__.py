"""RoboData (Musumeci, Suriani, Nardi, Wikidata workshop at ISWC 2025): an agent that grows a local KG from a
remote knowledge base and answers with a checked support set per claim. The strategy (:mod:`.strategy`), the
agent loop (:mod:`.agent`), its state machine (:mod:`.fsm`), the tool protocol (:mod:`.tools`), the remote
read-only tools (:mod:`.remote`), the update tools (:mod:`.update`) and the support sets (:mod:`.support`).
"""

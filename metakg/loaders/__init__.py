"""Stores and writers: the GraphStore protocol, the embedded store, RDF export (Neo4j store later)."""

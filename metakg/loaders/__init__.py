"""Stores and writers: the embedded store, the Neo4j store and loader (with neo4j-admin import files), RDF
export."""

"""Structured sources into the common schema (triple files now; PrimeKG, Wikidata and datasets later)."""

"""LLM triple extraction: prompts, parsing, normalisation, entity resolution and linking."""

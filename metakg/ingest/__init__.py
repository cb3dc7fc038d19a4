"""Sources into the common schema: triple files, PrimeKG (and a synthetic generator), Wikidata over SPARQL,
and the readers of QA sets and documents."""

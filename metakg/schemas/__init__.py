"""The common schema: table schemas, CURIE ids, the type vocabulary, the KG bundle, validation, RDF mapping."""

"""The HTTP API's routes by topic, each a router over the served graph: the graph (reads and the one
write), questions, evaluations, and the pages (the web page, the API reference, the validation report)."""

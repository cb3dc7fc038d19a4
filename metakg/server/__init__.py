"""``metakg serve``: the HTTP API over the graph a process holds open (FastAPI; the only module that imports
it). Like the CLI, it calls only :mod:`metakg.api`."""

from metakg.server.app import create_app, serve

__all__ = ["create_app", "serve"]

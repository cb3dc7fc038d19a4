"""metakg: build, validate, load and question knowledge graphs.

The package does nothing at import time. Start from :mod:`metakg.api` (library use) or the ``metakg``
command line (:mod:`metakg.cli`).
"""

__version__ = "0.1.0"

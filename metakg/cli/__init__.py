"""The ``metakg`` command line: a thin typer layer over :mod:`metakg.api`."""

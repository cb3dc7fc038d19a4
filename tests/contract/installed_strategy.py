"""A registry holding the built-in strategies and those of the example package installed under
``plugin_site`` (a ``.dist-info`` with a ``metakg.strategies`` entry point, as pip leaves it), read as metakg
reads any installed package's strategies."""

from __future__ import annotations

import sys
from pathlib import Path

from metakg.qa_engine.registry import StrategyRegistry
from metakg.qa_engine.strategies import BUILT_IN

SITE = Path(__file__).resolve().parent / "plugin_site"


def installed_registry() -> tuple[StrategyRegistry, list[str]]:
    """The built-ins plus the example package's strategies, and the problems of those that did not load."""
    if str(SITE) not in sys.path:
        sys.path.append(str(SITE))  # as if pip had installed the package into site-packages
    registry = StrategyRegistry(BUILT_IN)
    return registry, registry.load_entry_points()


INSTALLED_REGISTRY, INSTALLED_PROBLEMS = installed_registry()

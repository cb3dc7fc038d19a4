"""Strategies by name: a registry that validates names, settings sections and switches, and builds strategies.

The built-in strategies are registered in :mod:`metakg.qa_engine.strategies`; a new one is a module with a
:class:`~metakg.qa_engine.strategy.Strategy` subclass, registered with :meth:`StrategyRegistry.register`
(tests register their own on a copy of the registry), or shipped in a package of its own that names it in
the :data:`ENTRY_POINTS` entry-point group, which :meth:`StrategyRegistry.load_entry_points` reads.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from importlib.metadata import entry_points
from typing import Any

from pydantic import ValidationError

from metakg.config import QASettings
from metakg.errors import ConfigError, UsageError
from metakg.qa_engine.strategy import Strategy, switch_setting

StrategyClass = type[Strategy[Any]]
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
#: the entry-point group a package names its strategies in (``name = "package.module:StrategyClass"``)
ENTRY_POINTS = "metakg.strategies"
logger = logging.getLogger("metakg.strategies")


class StrategyRegistry:
    """Strategy classes by name."""

    def __init__(self, classes: Iterable[StrategyClass] = ()) -> None:
        """A registry holding ``classes``."""
        self._classes: dict[str, StrategyClass] = {}
        for cls in classes:
            self.register(cls)

    def register(self, cls: StrategyClass) -> StrategyClass:
        """Add ``cls`` under its ``name`` (usable as a class decorator).

        Raises:
            ValueError: the name is not snake_case, already taken, or clashes with a shared ``[qa]`` setting;
                a switch is not a boolean setting of the strategy.
        """
        name = getattr(cls, "name", "")
        if not _NAME.match(name):
            raise ValueError(f"strategy name {name!r} must be snake_case")
        if name in self._classes:
            raise ValueError(f"a strategy named {name!r} is already registered")
        if name in QASettings.model_fields:
            raise ValueError(f"strategy name {name!r} clashes with the [qa] setting of that name")
        fields = cls.Settings.model_fields
        bad = [
            s
            for s in cls.switches()
            if switch_setting(s)[0] not in fields or ("=" not in s and fields[s].annotation is not bool)
        ]
        if bad:
            raise ValueError(
                f"{name}: switches {bad} are neither boolean settings nor key=value of {cls.Settings.__name__}"
            )
        self._classes[name] = cls
        return cls

    def load_entry_points(self, group: str = ENTRY_POINTS) -> list[str]:
        """Register the strategies installed packages name in the entry-point ``group``. A strategy that cannot
        be loaded or registered is left out with a warning; returns those problems, one line each."""
        problems: list[str] = []
        for point in sorted(entry_points(group=group), key=lambda p: p.name):
            where = f"entry point {point.name!r} ({point.value}"
            where += f", from {point.dist.name})" if point.dist is not None else ")"
            try:
                cls = point.load()
                if not (isinstance(cls, type) and issubclass(cls, Strategy)):
                    raise ValueError(f"it names {cls!r}, not a Strategy subclass")
                if getattr(cls, "name", None) != point.name:
                    raise ValueError(f"its strategy is named {getattr(cls, 'name', None)!r}, not {point.name!r}")
                self.register(cls)
            except Exception as e:  # a broken plugin must not stop the toolkit: it is reported and left out
                problems.append(f"{where}: {type(e).__name__}: {e}")
                logger.warning("strategy left out: %s", problems[-1])
        return problems

    def copy(self) -> StrategyRegistry:
        """A new registry with the same strategies (to register more without touching this one)."""
        return StrategyRegistry(self._classes.values())

    @property
    def names(self) -> tuple[str, ...]:
        """The registered names, in registration order."""
        return tuple(self._classes)

    def retrieval_only(self) -> str:
        """What to choose to measure retrieval without an LLM: the names of the strategies that can, listed."""
        return ", ".join(n for n in self.names if self._classes[n].retrieves_alone())

    def get(self, name: str) -> StrategyClass:
        """The class registered as ``name``.

        Raises:
            UsageError: no strategy has that name (the message lists the names).
        """
        try:
            return self._classes[name]
        except KeyError:
            raise UsageError(f"unknown strategy {name!r}; choose from {', '.join(self.names)}.") from None

    def check(self, qa: QASettings) -> None:
        """Validate the settings: the default strategy exists and every ``[qa.<name>]`` section is valid.

        Raises:
            ConfigError: an unknown default strategy or section, or a bad value (the message names it).
        """
        if qa.strategy not in self._classes:
            raise ConfigError(f"qa.strategy {qa.strategy!r} is not a strategy; choose from {', '.join(self.names)}.")
        for section in qa.sections():
            if section not in self._classes:
                raise ConfigError(
                    f"[qa.{section}] names no strategy; the sections are {', '.join(f'[qa.{n}]' for n in self.names)}."
                )
            self.settings(section, qa)

    def settings(self, name: str, qa: QASettings, switches: Sequence[str] = ()) -> Any:
        """The settings of strategy ``name``: its ``[qa.<name>]`` section with ``switches`` turned on.

        Raises:
            UsageError: an unknown name or switch.
            ConfigError: a value in the section is invalid.
        """
        cls = self.get(name)
        unknown = [s for s in switches if s not in cls.switches()]
        if unknown:
            offered = ", ".join(cls.switches()) or "none"
            raise UsageError(f"{name} has no switch {', '.join(unknown)}; it offers: {offered}.")
        values = qa.section(name) | dict(switch_setting(s) for s in switches)
        try:
            return cls.Settings.model_validate(values)
        except ValidationError as e:
            problems = "; ".join(
                f"qa.{name}.{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors(include_url=False)
            )
            raise ConfigError(f"invalid strategy settings ({problems}).") from e

    def create(self, name: str, qa: QASettings | None = None, switches: Sequence[str] = ()) -> Strategy[Any]:
        """A strategy ``name`` with its settings from ``qa`` (defaults when None) and ``switches`` on.

        Raises:
            UsageError: an unknown name or switch; ConfigError: an invalid settings section.
        """
        return self.get(name)(self.settings(name, qa or QASettings(), switches))

    def describe(self) -> list[dict[str, Any]]:
        """Every strategy with its summary, switches and settings (name, type, default, description)."""
        described = []
        for name, cls in self._classes.items():
            settings = [
                {
                    "key": key,
                    "type": getattr(field.annotation, "__name__", str(field.annotation)),
                    "default": field.get_default(call_default_factory=True),
                    "description": field.description or "",
                }
                for key, field in cls.Settings.model_fields.items()
            ]
            described.append(
                {
                    "name": name,
                    "summary": cls.summary,
                    "section": f"qa.{name}",
                    "uses_graph": cls.uses_graph,
                    "needs_llm": cls.needs_llm,
                    "switches": list(cls.switches()),
                    "settings": settings,
                }
            )
        return described

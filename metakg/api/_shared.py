"""What the api modules share: the progress callback types."""

from __future__ import annotations

from collections.abc import Callable

from metakg.errors import UsageError

Progress = Callable[[str], None]
Counter = Callable[[int, int], None]  # (done, total)


def quiet(_message: str) -> None:
    """A progress callback that says nothing."""
    return None


def at_least_one(name: str, value: int | None) -> None:
    """Raises :class:`UsageError` naming ``name`` when ``value`` is given and below 1."""
    if value is not None and value < 1:
        raise UsageError(f"{name} must be at least 1, got {value}.")

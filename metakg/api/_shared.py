"""What the api modules share: the progress callback types."""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[str], None]
Counter = Callable[[int, int], None]  # (done, total)


def quiet(_message: str) -> None:
    """A progress callback that says nothing."""
    return None

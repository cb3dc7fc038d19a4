"""The progress callbacks long jobs take, one vocabulary for every layer: :data:`Progress` receives a line
for a person ("loading the store"), :data:`Tick` a labelled count after each item, :data:`Counter` a bare
count; :func:`quiet` says nothing."""

from __future__ import annotations

from collections.abc import Callable

#: a line of progress for a person
Progress = Callable[[str], None]
#: (label, done, total) after each item of a labelled run ("metakgrag[no_cycle]", 12, 100)
Tick = Callable[[str, int, int], None]
#: (done, total)
Counter = Callable[[int, int], None]


def quiet(_message: str) -> None:
    """A progress callback that says nothing."""
    return None

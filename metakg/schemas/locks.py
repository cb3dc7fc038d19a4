"""Exclusive locks for everything a command writes (bundles, the evaluation folder, the Wikidata state), and
the unique temporary names writers write under before renaming.

A lock is an advisory ``flock`` on a small file next to (or inside) what is written, held for the whole
command, so a second writer started meanwhile fails at once with a clear message instead of interleaving
its files with the first one's. The lock file stays; the operating system releases the lock when the
process ends, however it ends.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import inspect
import os
import re
import stat
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import ParamSpec, TextIO, TypeVar

from metakg.errors import OutputError, ResourceBusy, UsageError

LOCK_FILE = ".metakg.lock"
P = ParamSpec("P")
R = TypeVar("R")


@contextmanager
def exclusive(target: Path, what: str, *, directory: bool = True) -> Iterator[None]:
    """Hold an exclusive lock on ``target`` for the block: a directory (created if needed; the lock file is
    inside it) or, with ``directory=False``, a file or a folder replaced whole (the lock file is beside it,
    ``.<name>.lock``).

    Raises:
        UsageError: ``target`` should be a folder and is a file.
        ResourceBusy: another process holds the lock.
        OutputError: the lock file cannot be made (a folder without write permission, a file on the way).
    """
    if directory:
        require_folder(target, what)
    lock_path = target / LOCK_FILE if directory else target.with_name(f".{target.name}.lock")
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise OutputError(
            f"cannot make the lock file {lock_path} for {what} {target}: {e.strerror or e}. Check that the folder "
            "can be written."
        ) from e
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ResourceBusy(
                f"another metakg process is writing {what} {target}; wait for it to finish, or write elsewhere."
            ) from None
        try:
            yield
        finally:
            if not directory and not target.exists():  # nothing was written (a failed first write): no lock left
                with contextlib.suppress(OSError):  # unlinked while held, so no waiting writer holds a stale one
                    lock_path.unlink()
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def holding(
    param: str, hold: Callable[[Path], AbstractContextManager[object]]
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A decorator: the call runs inside ``hold(path)``, ``path`` being its argument ``param``."""

    def wrap(function: Callable[P, R]) -> Callable[P, R]:
        signature = inspect.signature(function)

        @functools.wraps(function)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            with hold(Path(signature.bind(*args, **kwargs).arguments[param])):
                return function(*args, **kwargs)

        return run

    return wrap


def locked(param: str, what: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A decorator: the call holds :func:`exclusive` on its argument ``param`` (a path) while it runs."""
    return holding(param, lambda target: exclusive(target, what))


def require_folder(target: Path, what: str) -> None:
    """Refuse ``target`` as the folder for ``what`` when it is a file.

    Raises:
        UsageError: ``target`` is a file.
    """
    if target.exists() and not target.is_dir():
        raise UsageError(f"{target} is a file; give a folder (for {what}) instead.")


def remove_stale_temps(path: Path) -> None:
    """Remove the temporary files :func:`unique_temp_name` made beside ``path`` for processes that are gone (a
    writer killed before its rename); those of a live process are its own to finish."""
    pattern = re.compile(rf"^{re.escape(path.name)}\.(\d+)-[0-9a-f]{{8}}\.tmp$")
    try:
        entries = list(path.parent.iterdir())
    except OSError:
        return
    for entry in entries:
        found = pattern.match(entry.name)
        if found is not None and int(found.group(1)) != os.getpid() and not process_running(int(found.group(1))):
            entry.unlink(missing_ok=True)


def process_running(pid: int) -> bool:
    """Whether a process ``pid`` runs (another user's included); a pid that cannot be asked about counts as
    running, so nothing of it is removed."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True
    return True


def unique_temp_name(path: Path) -> Path:
    """A temporary name beside ``path`` that no other writer uses (write there, then rename onto ``path``)."""
    return path.with_name(f"{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")


def _link(path: Path) -> OutputError:
    return OutputError(
        f"{path} is a symbolic link: an output is written in its folder, never through a link. Remove the "
        "link, or give another output folder."
    )


def _special(path: Path) -> OutputError:
    return OutputError(f"{path} is not a regular file: remove it, or give another output folder.")


#: the names a bundle folder's own files take (its tables, manifest and validation report)
_BUNDLE_NAMES = ("manifest.json", "validation.json", "validation.html")


def _a_bundles_own(path: Path) -> bool:
    """Whether ``path`` names one of the files of a bundle folder (a folder holding a ``manifest.json``)."""
    name = path.name
    own = name in _BUNDLE_NAMES or name.endswith(".parquet")
    return own and os.path.lexists(path.parent / "manifest.json")


def check_replaceable(path: Path) -> None:
    """Refuse ``path`` as an output written beside it and renamed onto it when it is a symbolic link (the
    rename would replace the link, not write where it points) or a FIFO, device or folder (the rename would
    replace it: as root, ``-o /dev/null`` would no longer be the null device).

    Raises:
        OutputError: naming ``path`` and what it is.
    """
    if _a_bundles_own(path):
        raise OutputError(
            f"{path} is a file of the metakg bundle {path.parent}: writing there would break the bundle; give an "
            "output outside it (or another name)."
        )
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as e:
        raise OutputError(f"cannot write {path}: {e.strerror or e}.") from e
    if stat.S_ISLNK(mode):
        raise _link(path)
    if stat.S_ISDIR(mode):
        raise OutputError(f"{path} is a folder: give the name of a file to write.")
    if not stat.S_ISREG(mode):
        raise _special(path)


def open_output(path: Path) -> TextIO:
    """``path`` opened to be written from its start (UTF-8 text), as a regular file of its folder: never through
    a symbolic link (which could point anywhere: an output folder is the user's to fill), never a FIFO or a
    device (which would block or swallow the output).

    Raises:
        OutputError: ``path`` is a link or not a regular file (naming it), or cannot be written.
    """
    if _a_bundles_own(path):
        raise OutputError(f"{path} is a file of the metakg bundle {path.parent}: give an output outside it.")
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise _link(path) from None
        if e.errno == errno.ENXIO:  # a FIFO nobody reads: opened non-blocking, it refuses at once
            raise OutputError(f"{path} is a FIFO, not a file: remove it, or give another output folder.") from None
        raise OutputError(f"cannot write {path}: {e.strerror or e}.") from e
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _special(path)
    os.set_blocking(fd, True)
    os.ftruncate(fd, 0)
    return os.fdopen(fd, "w", encoding="utf-8")


def write_output(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` as :func:`open_output` opens it.

    Raises:
        OutputError: as :func:`open_output`.
    """
    with open_output(path) as fh:
        fh.write(text)

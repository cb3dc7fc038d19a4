"""Where a bundle lives on disk: versions swapped in whole, reads of one version, and the lock writers hold.

A bundle directory is only ever replaced whole. A writer builds the new version in a staging folder beside
it (``.<name>.new-<pid>-<random>``): the tables and reports it writes, the files of the old version it keeps
(hard links), the manifest last; everything is flushed to disk, then one ``renameat2(RENAME_EXCHANGE)`` swaps
the staging folder with the bundle and the old version is removed. A kill, a Ctrl-C or a full disk at any
moment leaves the old version or the new one under the bundle's name, never neither, and at most a staging or
retired folder beside it, which the next writer removes.

A reader opens the folder once (:class:`Version`) and reads every file through that handle, so all it reads
belongs to one version even while a writer swaps in the next; a read that loses the race (the old version was
removed before it opened a table) starts again.

Where the exchange is not supported (not Linux or macOS, or a file system without it), the swap is two
renames; a crash between them leaves the old version beside the bundle under ``.<name>.old-...``, which the
next writer puts back and a reader names in its error.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import hashlib
import os
import re
import shutil
import stat
import sys
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, ParamSpec, TypeVar

from metakg.errors import BundleChanged, BundleError, UsageError
from metakg.schemas.locks import exclusive, holding, process_running

#: the swap flag of renameat2 (Linux) and renamex_np (macOS)
_RENAME_EXCHANGE = 2
_RENAME_SWAP = 2
_AT_FDCWD = -100
_STAGING = "new"
_RETIRED = "old"
P = ParamSpec("P")
R = TypeVar("R")


def sibling(path: Path, kind: str) -> Path:
    """A fresh name beside ``path`` for a staging (``new``) or retired (``old``) version, owned by this process."""
    return path.with_name(f".{path.name}.{kind}-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def _siblings(path: Path, kind: str) -> list[Path]:
    prefix = f".{path.name}.{kind}-"
    try:
        return sorted(p for p in path.parent.iterdir() if p.name.startswith(prefix))
    except OSError:
        return []


def _owner_alive(folder: Path) -> bool:
    """Whether the process that named ``folder`` (``...-<pid>-<random>``) still runs (not this one's)."""
    try:
        pid = int(folder.name.rsplit("-", 2)[-2])
    except (IndexError, ValueError):
        return False
    return pid != os.getpid() and process_running(pid)


def bundle_path(path: Path) -> Path:
    """The real folder a bundle path names (a symbolic link is followed, so the folder it points at is the one
    swapped), absolute.

    Raises:
        UsageError: the path cannot be resolved (a loop of symbolic links), or is the root of the file system.
    """
    try:
        real = path.expanduser().resolve()
    except (RuntimeError, OSError) as e:  # Python's own error for a loop of links is a RuntimeError
        raise UsageError(f"{path} cannot be a bundle folder: it cannot be resolved ({e}).") from None
    if real.parent == real:
        raise UsageError(f"{path} is the root of the file system: give a folder below it for the bundle.")
    return real


def mounts_under(folder: Path) -> list[Path]:
    """The mount points strictly inside ``folder`` (Linux: every mount of the process, bind mounts included;
    elsewhere, the entries of the folder that are mount points)."""
    table = Path("/proc/self/mountinfo")
    try:
        lines = table.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        try:
            return [entry for entry in folder.iterdir() if entry.is_dir() and os.path.ismount(entry)]
        except OSError:
            return []
    found = []
    for line in lines:
        fields = line.split(" ")
        if len(fields) > 4:  # the fifth field is the mount point, with blanks and others as octal escapes
            point = Path(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4]))
            if point != folder and point.is_relative_to(folder):
                found.append(point)
    return sorted(found)


def check_bundle_folder(path: Path, real: Path) -> None:
    """The checks of a folder a bundle is written to: not a file, not a folder of other files without a bundle
    (a user's data, which a new version would replace), and no mount point inside it (a rewrite builds a whole
    new version and removes the old one, which must never reach into a mounted file system).

    Raises:
        UsageError: naming what is in the way.
    """
    if real.exists() and not real.is_dir():
        raise UsageError(f"{path} is a file, not a bundle directory: give a new or existing bundle directory.")
    if not real.is_dir():
        return
    foreign = _foreign_entries(real)
    if foreign and not (real / "manifest.json").is_file():
        shown = ", ".join(sorted(foreign)[:3])
        raise UsageError(
            f"{path} holds other files ({shown}) and no bundle: give a new or empty directory, or a bundle."
        )
    inside = mounts_under(real)
    if inside:
        raise UsageError(
            f"{path} holds a mount point ({inside[0]}): a bundle is rewritten as a whole new version, which cannot "
            "carry a mounted folder. Unmount it, or move it out of the bundle folder."
        )


@contextmanager
def writing(path: Path) -> Iterator[Path]:
    """Hold the lock of the bundle at ``path`` (a file beside it, ``.<name>.lock``) for the block, after the
    checks every writer needs; yields the bundle's real path. An interrupted earlier write is tidied up first.

    Raises:
        UsageError: ``path`` is a file, a folder that holds other files and no bundle, or a folder holding a
            mount point (:func:`check_bundle_folder`).
        ResourceBusy: another metakg process is writing the bundle.
    """
    real = bundle_path(path)
    if real.exists() and not real.is_dir():
        raise UsageError(f"{path} is a file, not a bundle directory: give a new or existing bundle directory.")
    with exclusive(real, "the bundle", directory=False):
        recover(real)
        check_bundle_folder(path, real)
        yield real


#: names a bundle folder may hold that metakg writes itself (kept or replaced by each version)
MANAGED = frozenset(
    {
        "manifest.json",
        "nodes.parquet",
        "edges.parquet",
        "rejects.parquet",
        "embeddings.parquet",
        "extraction.parquet",
        "history_nodes.parquet",
        "history_edges.parquet",
        "validation.json",
        "validation.html",
    }
)


#: a temporary file of metakg's (:func:`metakg.schemas.locks.unique_temp_name`: ``<name>.<pid>-<8 hex>.tmp``)
_OWN_TEMP = re.compile(r"\.\d+-[0-9a-f]{8}\.tmp$")


def _managed(name: str) -> bool:
    """Whether metakg wrote the entry: a bundle file, its lock, or a temporary file of its own (``nodes.parquet
    .tmp`` as earlier versions named them too); a user's ``draft.tmp`` is the user's."""
    own_temp = bool(_OWN_TEMP.search(name)) or (name.endswith(".tmp") and name[: -len(".tmp")] in MANAGED)
    return name in MANAGED or name.startswith(".metakg.lock") or own_temp


def _foreign_entries(folder: Path) -> set[str]:
    """Entries of ``folder`` metakg did not write (a user's notes kept in a bundle folder)."""
    try:
        return {entry.name for entry in folder.iterdir() if not _managed(entry.name)}
    except OSError:
        return set()


def recover(path: Path) -> None:
    """Tidy up after interrupted writes of the bundle at ``path``: put back a version retired by a two-rename
    swap that did not finish, and remove staging and retired folders whose writer is gone."""
    if not path.exists():
        retired = [p for p in _siblings(path, _RETIRED) if not _owner_alive(p) and (p / "manifest.json").is_file()]
        if retired:
            os.rename(retired[-1], path)
    for folder in _siblings(path, _STAGING) + _siblings(path, _RETIRED):
        if not _owner_alive(folder):
            remove_tree(folder)


def _exchange(a: Path, b: Path) -> bool:
    """Swap the folders ``a`` and ``b`` in one step; False when the platform or file system cannot."""
    libc = _libc()
    if libc is None:
        return False
    if sys.platform.startswith("linux") and hasattr(libc, "renameat2"):
        rc = libc.renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    elif sys.platform == "darwin" and hasattr(libc, "renamex_np"):
        rc = libc.renamex_np(os.fsencode(a), os.fsencode(b), _RENAME_SWAP)
    else:
        return False
    if rc == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


_LIBC: list[ctypes.CDLL | None] = []


def _libc() -> ctypes.CDLL | None:
    if not _LIBC:
        try:
            _LIBC.append(ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True))
        except OSError:
            _LIBC.append(None)
    return _LIBC[0]


def _fsync(path: Path, *, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_tree(folder: Path) -> None:
    """Remove ``folder`` and what it holds, never crossing into a mounted file system or through a link: a
    mount point found inside is left in place (with the folders above it), not emptied."""
    mounts = set(mounts_under(folder))

    def clear(directory: Path) -> bool:
        whole = True
        try:
            entries = list(os.scandir(directory))
        except OSError:
            return False
        for entry in entries:
            target = Path(entry.path)
            try:
                if entry.is_dir(follow_symlinks=False):
                    if target in mounts or os.path.ismount(target) or not clear(target):
                        whole = False
                        continue
                    target.rmdir()
                else:
                    target.unlink()
            except OSError:
                whole = False
        return whole

    if folder.is_dir() and not folder.is_symlink() and folder not in mounts and clear(folder):
        with contextlib.suppress(OSError):
            folder.rmdir()


def _link_or_copy(source: str | Path, target: str | Path) -> None:
    try:
        os.link(source, target, follow_symlinks=False)
    except OSError:
        shutil.copy2(source, target, follow_symlinks=False)


def _carry(old: Path, new: Path, names: Iterable[str]) -> None:
    """Put the entries ``names`` of the version at ``old`` into the staging folder ``new`` (hard links; a
    folder as a tree of them), so the new version keeps them unchanged."""
    for name in names:
        source = old / name
        if source.is_dir() and not source.is_symlink():
            shutil.copytree(source, new / name, symlinks=True, copy_function=_link_or_copy)
        elif source.exists() or source.is_symlink():
            _link_or_copy(source, new / name)


def replace(
    path: Path,
    build: Callable[[Path], None],
    *,
    keep: Iterable[str] = (),
    expect: str | None = None,
    writes: Collection[str] = (),
) -> None:
    """Write a new version of the bundle folder ``path`` (the writer holds :func:`writing`): ``build`` fills a
    staging folder beside it, which then replaces ``path`` in one swap.

    Args:
        path: the bundle folder (it may not exist yet).
        build: writes the new version's files into the folder it is given (the manifest last). The files kept
            are already there, as hard links to the old version's: ``build`` must not write to those names.
        keep: names of the current version's files the new one keeps unchanged (hard-linked, not written).
        expect: the token (:func:`token_of`) of the version the writer read; when the bundle now holds
            another one, nothing is written.
        writes: names ``build`` writes besides a bundle's own files; the other files metakg does not manage (a
            user's notes in the folder) are kept.

    Raises:
        BundleChanged: ``expect`` is not the current version.
        OSError: a file cannot be written (the bundle is left as it was).
    """
    staging = sibling(path, _STAGING)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging.mkdir()
    try:
        if path.is_dir():
            kept = (set(keep) | _foreign_entries(path)) - set(writes)
            _carry(path, staging, sorted(name for name in kept if (path / name).exists()))
        build(staging)
        for entry in staging.iterdir():
            if entry.is_file() and not entry.is_symlink():
                _fsync(entry)
        _fsync(staging, directory=True)
        if expect is not None and token_of(path) != expect:
            raise BundleChanged(
                f"{path} changed since it was read (another process wrote a new version); nothing was written. "
                "Read it again and repeat the change."
            )
        if not path.exists():
            os.rename(staging, path)
        elif _exchange(staging, path):
            remove_tree(staging)  # the old version, now under the staging name
        else:
            retired = sibling(path, _RETIRED)
            os.rename(path, retired)
            os.rename(staging, path)
            remove_tree(retired)
        _fsync(path.parent, directory=True)
    except BaseException:
        _remove_settled(staging)
        raise


def _remove_settled(folder: Path) -> None:
    """Remove a staging folder after a failed or interrupted write, trying again a few times within a second:
    a library's writer threads (polars) may still close a file in it just after the interrupt reached Python,
    and a Ctrl-C once left the folder beside the bundle about half the time (the next writer removed it)."""
    for wait in (0.0, 0.05, 0.2, 0.6):
        if wait:
            time.sleep(wait)
        remove_tree(folder)
        if not folder.exists():
            return


def token_of(path: Path) -> str | None:
    """The token of the version at ``path`` (a digest of its manifest; None: no bundle there)."""
    try:
        return token((path / "manifest.json").read_bytes())
    except OSError:
        return None


def token(manifest_bytes: bytes) -> str:
    """The token of a version: the SHA-256 of its manifest's bytes (every write writes a new manifest)."""
    return hashlib.sha256(manifest_bytes).hexdigest()[:32]


class Version:
    """One version of a bundle opened for reading: every file is opened through one handle on its folder, so
    all of them belong to the version the handle was opened on, whatever a writer swaps in meanwhile."""

    def __init__(self, path: Path) -> None:
        """Open the folder ``path``.

        Raises:
            BundleError: no folder there (naming an interrupted write's retired version when one is beside).
        """
        self.path = path
        try:
            self._fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        except NotADirectoryError:
            raise BundleError(f"{path} is not a KG bundle directory (it is a file).") from None
        except FileNotFoundError:
            retired = _siblings(path, _RETIRED)
            if retired:
                raise BundleError(
                    f"{path} does not exist: an interrupted write left its previous version at {retired[-1]}. The "
                    f"next metakg command that writes {path} puts it back, or rename it to {path.name} yourself."
                ) from None
            raise BundleError(f"{path} is not a KG bundle directory (it does not exist).") from None
        except OSError as e:
            raise BundleError(f"cannot open the bundle directory {path}: {e.strerror or e}.") from e

    def __enter__(self) -> Version:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the handle on the folder."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def open(self, name: str) -> BinaryIO:
        """The file ``name`` of this version, open for reading (the caller closes it).

        Raises:
            FileNotFoundError: the version has no such file (or was removed by a writer: see :meth:`replaced`).
        """
        if "/" in name or name in ("", ".", ".."):
            raise BundleError(f"{name!r} is not a file name of a bundle.")
        # non-blocking, so that a FIFO put where a table belongs cannot hang the reader; then it must be a file.
        # Never through a symbolic link: a bundle's tables are files of its own folder, and a link would let a
        # received bundle make metakg read (and hash, and serve) any file of the machine.
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW, dir_fd=self._fd)
        except FileNotFoundError:
            raise
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise BundleError(
                    f"{self.path / name} is a symbolic link: a bundle's tables must be files of its own folder, so "
                    "links are never followed. Copy the file in its place, or write the bundle again."
                ) from None
            raise BundleError(f"cannot open {self.path / name}: {e.strerror or e}.") from e
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise BundleError(f"{self.path / name} is not a regular file: write the bundle again.")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")

    def read_bytes(self, name: str) -> bytes:
        """The whole file ``name`` of this version."""
        with self.open(name) as fh:
            return fh.read()

    def has(self, name: str) -> bool:
        """Whether this version holds a regular file ``name``."""
        try:
            return stat.S_ISREG(os.stat(name, dir_fd=self._fd, follow_symlinks=False).st_mode)
        except OSError:
            return False

    def replaced(self) -> bool:
        """Whether the bundle's path now names another folder than this version's (a writer swapped one in)."""
        try:
            return os.stat(self.path).st_ino != os.fstat(self._fd).st_ino
        except OSError:
            return True


def readable(fh: BinaryIO) -> str | BinaryIO:
    """What to give a table reader for an open file: its ``/proc/self/fd`` path where there is one (read in
    place, as a path), else the file object."""
    proc = f"/proc/self/fd/{fh.fileno()}"
    return proc if os.path.exists(proc) else fh


def sha256_of(fh: BinaryIO) -> str:
    """The SHA-256 of an open file's content (read from the start; the position is put back at 0)."""
    digest = hashlib.sha256()
    fh.seek(0)
    for chunk in iter(lambda: fh.read(1 << 20), b""):
        digest.update(chunk)
    fh.seek(0)
    return digest.hexdigest()


def writes_bundle(param: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A decorator: the call holds :func:`writing` on the bundle its argument ``param`` names while it runs."""
    return holding(param, writing)

"""What the api modules share: the progress callback types."""

from __future__ import annotations

from pathlib import Path

from metakg.config import Settings
from metakg.errors import ConfigError, OutputError, UsageError
from metakg.progress import Counter, Progress, quiet
from metakg.schemas.locks import require_folder

__all__ = ["Counter", "Progress", "at_least_one", "cache_folder", "output_folder", "quiet"]


def at_least_one(name: str, value: int | None) -> None:
    """Raises :class:`UsageError` naming ``name`` when ``value`` is given and below 1."""
    if value is not None and value < 1:
        raise UsageError(f"{name} must be at least 1, got {value}.")


def cache_folder(settings: Settings, *parts: str) -> Path:
    """The folder ``<paths.cache_dir>/<parts>``, made when missing.

    Raises:
        ConfigError: it cannot be made (a file in the way, no permission, a read-only or missing mount).
    """
    folder = settings.paths.cache_dir.joinpath(*parts)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(
            f"the cache folder {folder} cannot be made ({e.strerror or e}): set paths.cache_dir "
            "(METAKG_PATHS__CACHE_DIR) to a folder metakg can write."
        ) from e
    return folder


def output_folder(path: Path, what: str) -> Path:
    """The folder ``path`` for ``what`` a command writes, made when missing.

    Raises:
        UsageError: ``path`` is a file.
        OutputError: it cannot be made (no permission, a missing mount).
    """
    require_folder(path, what)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputError(f"cannot make the folder {path} for {what}: {e.strerror or e}.") from e
    return path

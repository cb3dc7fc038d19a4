"""What the api modules share: the progress callback types, the base of the typed results, folder checks."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, ClassVar

from metakg.config import Settings
from metakg.errors import ConfigError, OutputError, UsageError
from metakg.progress import Counter, Progress, quiet
from metakg.schemas.locks import require_folder

__all__ = ["Counter", "JsonResult", "Progress", "at_least_one", "cache_folder", "output_folder", "quiet"]


#: MedCoG's threshold grid for ``calibrate medcog``: the values tried for each of tau_c, tau_f and tau_k (here,
#: not in the calibration module, so the command line's help reads it without loading the QA engine)
DEFAULT_GRID = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)


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


def as_json(value: Any) -> Any:
    """``value`` as JSON data: a path as its string, a typed result as its ``as_dict()``, the
    items of a list or tuple likewise; anything else as it is (it is JSON data already)."""
    if isinstance(value, Path):
        return str(value)
    if callable(getattr(value, "as_dict", None)):
        return value.as_dict()
    if isinstance(value, list | tuple) and any(isinstance(v, Path) or hasattr(v, "as_dict") for v in value):
        return [as_json(v) for v in value]
    return value


class JsonResult:
    """The base of the api's typed results (dataclasses): :meth:`as_dict` writes the fields in their order,
    which is the order of the keys the CLI's ``--json`` prints.

    ``spread`` names fields holding a dict of further figures, written in place of the field (their keys at
    its position); ``omit_none`` names fields left out when None (keys a result only has sometimes).
    """

    spread: ClassVar[tuple[str, ...]] = ()
    omit_none: ClassVar[tuple[str, ...]] = ()

    def as_dict(self) -> dict[str, Any]:
        """The result as JSON data."""
        data: dict[str, Any] = {}
        for field in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, field.name)
            if value is None and field.name in self.omit_none:
                continue
            if field.name in self.spread:
                data.update(as_json(value) or {})
            else:
                data[field.name] = as_json(value)
        return data


def check_identity_settings(settings: Settings) -> None:
    """Refuse an ``identity.prefix_priority`` entry for a type the vocabulary does not have (``config show``
    and ``resolve`` run this).

    Raises:
        ConfigError: naming the types.
    """
    from metakg.schemas.vocabulary import default_vocabulary

    types = default_vocabulary().names
    unknown = sorted(t for t in settings.identity.prefix_priority if t != "*" and t not in types)
    if unknown:
        raise ConfigError(
            f"identity.prefix_priority names {', '.join(map(repr, unknown))}, which is no type of the vocabulary "
            "(give a type, or '*' for every type)."
        )

"""The subset spec: seed items, the properties to follow and a hop count, class selections, a raw SELECT
returning ``?item``; read from YAML and checked (:func:`load_spec`). Also the constants every part shares."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from metakg.errors import InputDataError
from metakg.schemas import sparql
from metakg.schemas.curie import is_prefix
from metakg.schemas.knowledge_source import WIKIDATA_PREFIXES, check_select

WD, WDT = sparql.WD, sparql.WDT
IMPORTER = "wikidata"
PREFIXES = WIKIDATA_PREFIXES
#: external-identifier properties that become ``xrefs`` (prefix:value), so PrimeKG nodes and items meet
XREF_PROPERTIES = {
    "P715": "drugbank",
    "P5270": "mondo",
    "P351": "ncbigene",
    "P352": "uniprot",
    "P486": "mesh",
    "P2892": "umls",
    "P594": "ensembl",
    "P683": "chebi",
    "P3841": "hp",
    "P1554": "uberon",
    "P686": "go",
    "P3937": "reactome",
    "P699": "doid",
    "P354": "hgnc",
    "P1550": "orphanet",
    "P492": "omim",
    "P592": "chembl",
}
TYPE_PROPERTY = "P31"
_QID = sparql.QID
_T = TypeVar("_T")
_PID = sparql.PID
#: PREFIX and BASE declarations (the client sends its own prefixes)
_PROLOGUE = re.compile(r"(?i)\b(?:PREFIX\s+[A-Za-z0-9_.-]*:\s*<[^>]*>|BASE\s*<[^>]*>)")


# ---------------------------------------------------------------------------- the spec
class ClassSelection(BaseModel):
    """Instances of ``class_`` (``wdt:P31``), optionally only those that have ``property``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    class_: str = Field(alias="class")
    property: str | None = None
    limit: int = Field(default=1000, ge=1, le=1_000_000)

    @field_validator("class_")
    @classmethod
    def _q(cls, value: str) -> str:
        if not _QID.match(value):
            raise ValueError(f"{value!r} is not an item id like Q5")
        return value

    @field_validator("property")
    @classmethod
    def _p(cls, value: str | None) -> str | None:
        if value is not None and not _PID.match(value):
            raise ValueError(f"{value!r} is not a property id like P50")
        return value


class SubsetSpec(BaseModel):
    """What to sync. See the module docstring and the README for the YAML form."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    seeds: list[str] = Field(default_factory=list)
    properties: list[str] = Field(default_factory=list)
    hops: int = Field(default=0, ge=0, le=3)
    languages: list[str] = Field(default_factory=lambda: ["en"], min_length=1)
    classes: list[ClassSelection] = Field(default_factory=list)
    sparql: str | None = None
    xrefs: dict[str, str] = Field(default_factory=dict, description="more external-id properties: PID -> prefix")

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, values: list[str]) -> list[str]:
        bad = [v for v in values if not _QID.match(v)]
        if bad:
            raise ValueError(f"not item ids: {bad}")
        return values

    @field_validator("properties")
    @classmethod
    def _props(cls, values: list[str]) -> list[str]:
        bad = [v for v in values if not _PID.match(v)]
        if bad:
            raise ValueError(f"not property ids: {bad}")
        return values

    @field_validator("xrefs")
    @classmethod
    def _xrefs(cls, values: dict[str, str]) -> dict[str, str]:
        bad = [k for k in values if not _PID.match(k)]
        if bad:
            raise ValueError(f"keys must be property ids (P...): {bad}")
        prefixes = [v for v in values.values() if not is_prefix(v)]
        if prefixes:
            raise ValueError(f"values must be CURIE prefixes (letters, digits, _ . -): {prefixes}")
        return values

    @field_validator("languages")
    @classmethod
    def _langs(cls, values: list[str]) -> list[str]:
        bad = [v for v in values if not re.match(r"^[a-z]{2,3}(-[a-z0-9]+)*$", v)]
        if bad:
            raise ValueError(f"not language codes: {bad}")
        return values

    @field_validator("sparql")
    @classmethod
    def _select_only(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            check_select(value)
        except ValueError as e:
            raise ValueError(f"must be a read-only SELECT query returning ?item: {e}") from None
        if "?item" not in _PROLOGUE.sub("", value):
            raise ValueError("must bind ?item")
        return value

    def xref_properties(self) -> dict[str, str]:
        """External-id properties and their CURIE prefixes (the built-in ones plus the spec's)."""
        return {**XREF_PROPERTIES, **self.xrefs}


def load_spec(path: Path) -> SubsetSpec:
    """Read and check a subset spec.

    Raises:
        InputDataError: the file is missing, not YAML, or a field is wrong (the message names it).
    """
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise InputDataError(f"cannot read subset spec {path}: {e.strerror or e}.") from e
    except yaml.YAMLError as e:
        raise InputDataError(f"subset spec {path} is not valid YAML: {e}") from e
    if not isinstance(data, dict):
        raise InputDataError(f"subset spec {path} must be a mapping (name:, seeds:, properties:, ...).")
    try:
        spec = SubsetSpec.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors(include_url=False)
        )
        raise InputDataError(f"subset spec {path}: {problems}") from e
    if not (spec.seeds or spec.classes or spec.sparql):
        raise InputDataError(f"subset spec {path} selects nothing: give seeds, classes or sparql.")
    return spec

"""The identity file: what a curator says about who is who, applied wherever identity is decided.

A YAML file (every section optional)::

    must_link:          # these nodes are one entity, whatever their identifiers say
      - [kg:notes/alzheimer_s_disease, mondo:0004975]
    cannot_link:        # these nodes are never one entity (a cluster holding both is left apart)
      - [drugbank:DB00945, wd:Q9999]
    preferred:          # the canonical id of the cluster each is in
      - wd:Q11081
    aliases:
      add: {mondo:0004975: [AD]}            # names the merged node also answers to
      remove: {mondo:0004975: ["Alzheimer's"]}

Ids may be written in any form (:func:`metakg.schemas.curie.normalise_curie`). A file that cannot be read,
an entry of the wrong shape, an id no node has, or a cannot-link pair that must-links join (directly or
through others) is refused naming the entry, before anything is written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import yaml

from metakg.errors import InputDataError
from metakg.schemas.curie import normalise_curie


@dataclass(frozen=True)
class Curation:
    """A checked identity file: pairs of node ids, preferred ids, aliases to add and to remove per id."""

    must_link: list[tuple[str, str]] = field(default_factory=list)
    cannot_link: list[tuple[str, str]] = field(default_factory=list)
    preferred: list[str] = field(default_factory=list)
    add_aliases: dict[str, list[str]] = field(default_factory=dict)
    remove_aliases: dict[str, list[str]] = field(default_factory=dict)
    origin: str = ""

    @property
    def empty(self) -> bool:
        return not (self.must_link or self.cannot_link or self.preferred or self.add_aliases or self.remove_aliases)


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (YAML itself keeps the last silently: a
    section written twice would lose the first one's entries)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _value in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"{key!r} is given twice (lines {seen[key]} and {line}): merge the two",
                    key_node.start_mark,
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _id(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputDataError(f"{where}: a node id is text, got {value!r}.")
    return normalise_curie(value) or value.strip()


def _pairs(entries: Any, key: str, origin: str) -> list[tuple[str, str]]:
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise InputDataError(f"{origin}: {key} must be a list of [id, id] pairs.")
    pairs = []
    for number, entry in enumerate(entries, start=1):
        where = f"{origin}: {key} entry {number}"
        if not isinstance(entry, list) or len(entry) != 2:
            raise InputDataError(f"{where} must be a pair [id, id], got {entry!r}.")
        a, b = _id(entry[0], where), _id(entry[1], where)
        if a == b:
            raise InputDataError(f"{where} names {a} twice.")
        pairs.append((a, b))
    return pairs


def _names(entries: Any, key: str, origin: str) -> dict[str, list[str]]:
    if entries is None:
        return {}
    if not isinstance(entries, dict):
        raise InputDataError(f"{origin}: aliases.{key} must map node ids to lists of names.")
    found: dict[str, list[str]] = {}
    for node, names in entries.items():
        where = f"{origin}: aliases.{key} of {node!r}"
        if not isinstance(names, list) or not all(isinstance(n, str) and n.strip() for n in names):
            raise InputDataError(f"{where} must be a list of names.")
        bad = next((n for n in names if any(ord(c) < 32 or ord(c) == 127 for c in n)), None)
        if bad is not None:  # a NUL or a line break in a name would reach the bundle and the stores
            raise InputDataError(f"{where}: the name {bad!r} holds a control character (a NUL, a line break).")
        found.setdefault(_id(node, where), []).extend(n.strip() for n in names)
    return found


def read_curation(path: Path) -> Curation:
    """The identity file at ``path``, its entries checked for shape and for contradictions.

    Raises:
        InputDataError: naming the file and the entry.
    """
    origin = str(path)
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)  # safe: no objects
    except (OSError, UnicodeDecodeError) as e:
        raise InputDataError(f"cannot read the identity file {origin}: {e}.") from e
    except yaml.YAMLError as e:
        raise InputDataError(f"{origin} is not valid YAML: {e}") from e
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InputDataError(f"{origin}: an identity file is a mapping (must_link, cannot_link, preferred, aliases).")
    unknown = set(data) - {"must_link", "cannot_link", "preferred", "aliases"}
    if unknown:
        raise InputDataError(
            f"{origin}: unknown sections {sorted(unknown)} (must_link, cannot_link, preferred, aliases)."
        )
    preferred = data.get("preferred") or []
    if not isinstance(preferred, list):
        raise InputDataError(f"{origin}: preferred must be a list of node ids.")
    aliases = data.get("aliases") or {}
    if not isinstance(aliases, dict) or set(aliases) - {"add", "remove"}:
        raise InputDataError(f"{origin}: aliases must be a mapping with add and remove.")
    curation = Curation(
        must_link=_pairs(data.get("must_link"), "must_link", origin),
        cannot_link=_pairs(data.get("cannot_link"), "cannot_link", origin),
        preferred=[_id(p, f"{origin}: preferred entry {n}") for n, p in enumerate(preferred, start=1)],
        add_aliases=_names(aliases.get("add"), "add", origin),
        remove_aliases=_names(aliases.get("remove"), "remove", origin),
        origin=origin,
    )
    _check_consistent(curation)
    return curation


def _check_consistent(curation: Curation) -> None:
    """Refuse a cannot-link pair that the must-links join, naming both entries."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.get(x, x) != x:
            parent[x] = parent.get(parent[x], parent[x])
            x = parent[x]
        return x

    for a, b in curation.must_link:
        parent[root(a)] = root(b)
    for number, (a, b) in enumerate(curation.cannot_link, start=1):
        if root(a) == root(b):
            raise InputDataError(
                f"{curation.origin}: cannot_link entry {number} ({a}, {b}) contradicts must_link, which joins "
                "them: remove one of the two."
            )


def on_graph(curation: Curation, ids: Iterable[str]) -> Curation:
    """``curation`` with each ``kg:`` id it names written as the graph's node of that id in another case
    (``kg:notes/Aspirin`` is ``kg:notes/aspirin``: those ids ignore case); the others as they are."""
    folded: dict[str, str] = {}
    for node in ids:
        if node.startswith("kg:"):
            folded.setdefault(node.casefold(), node)

    def as_known(node: str) -> str:
        return folded.get(node.casefold(), node) if node.lower().startswith("kg:") else node

    return dataclasses.replace(
        curation,
        must_link=[(as_known(a), as_known(b)) for a, b in curation.must_link],
        cannot_link=[(as_known(a), as_known(b)) for a, b in curation.cannot_link],
        preferred=[as_known(x) for x in curation.preferred],
        add_aliases={as_known(k): v for k, v in curation.add_aliases.items()},
        remove_aliases={as_known(k): v for k, v in curation.remove_aliases.items()},
    )


def check_known(curation: Curation, ids: Iterable[str]) -> None:
    """Refuse a curation that names an id no node has (a typo would silently do nothing).

    Raises:
        InputDataError: naming the entry and the id.
    """
    known = set(ids)
    named = [
        *((f"must_link entry {n}", x) for n, pair in enumerate(curation.must_link, start=1) for x in pair),
        *((f"cannot_link entry {n}", x) for n, pair in enumerate(curation.cannot_link, start=1) for x in pair),
        *((f"preferred entry {n}", x) for n, x in enumerate(curation.preferred, start=1)),
        *(("aliases.add", x) for x in curation.add_aliases),
        *(("aliases.remove", x) for x in curation.remove_aliases),
    ]
    for where, node in named:
        if node not in known:
            raise InputDataError(f"{curation.origin}: {where} names {node}, which no node of the graph has.")


def apply_aliases(nodes: pl.DataFrame, curation: Curation, became: Mapping[str, str] | None = None) -> pl.DataFrame:
    """The identity file's aliases added and removed on ``nodes``, on the node each named id now is
    (``became``: id -> the id it was merged into); ids no node has are left alone."""
    if not (curation.add_aliases or curation.remove_aliases):
        return nodes
    moved = became or {}
    add: dict[str, list[str]] = {}
    remove: dict[str, list[str]] = {}
    for named_in, target in ((curation.add_aliases, add), (curation.remove_aliases, remove)):
        for node, names in named_in.items():
            target.setdefault(moved.get(node, node), []).extend(names)
    named = [*add, *remove]
    rows = nodes.filter(pl.col("id").is_in(named)).to_dicts()
    for row in rows:
        wanted = [*(row["aliases"] or []), *add.get(row["id"], [])]
        row["aliases"] = [a for a in dict.fromkeys(wanted) if a not in remove.get(row["id"], []) and a != row["name"]]
    changed = {row["id"]: row["aliases"] for row in rows}
    return nodes.with_columns(
        pl.when(pl.col("id").is_in(list(changed)))
        .then(pl.col("id").replace_strict(changed, default=None, return_dtype=pl.List(pl.String)))
        .otherwise(pl.col("aliases"))
        .alias("aliases")
    )

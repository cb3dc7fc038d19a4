"""One PrimeKG ``kg.csv`` from the real PrimeKG-derived files of the shared data (``primekg/``).

The shared data has no full PrimeKG; it has real PrimeKG edges in three files, each in its own layout:

- ``primekg_kg_head5.csv``: the first five rows of the real ``kg.csv``;
- ``primekg_plus_literature_edges_integrated.csv``: 626 literature edges of PrimeKG-Plus whose ends are
  resolved to PrimeKG nodes (PrimeKG names and sources, no node index);
- ``drugmechdb_paths_edges.csv``: 1,113 edges of drug mechanism paths mapped onto PrimeKG (PrimeKG ids,
  indexes and relations; DrugMechDB's names, and no source column: the source follows from the type).

:func:`write_real_kg` maps all three onto the ``kg.csv`` columns, so ``metakg ingest primekg`` turns them
into one bundle. A node keeps the first name it is seen with (PrimeKG's names come first). Nodes without a
PrimeKG index (the literature file's) get one from :data:`FREE_INDEX` up, above any real index, and the
same one wherever they occur. Tests, benchmarks and the MedCoG acceptance runs read it.
"""

from __future__ import annotations

import csv
from pathlib import Path

from metakg.ingest.primekg import KG_COLUMNS

#: PrimeKG's node type -> its source column, for the file without one (diseases are MONDO, or
#: MONDO_grouped when the id joins several MONDO ids with "_")
TYPE_SOURCE = {
    "gene/protein": "NCBI", "drug": "DrugBank", "effect/phenotype": "HPO", "biological_process": "GO",
    "molecular_function": "GO", "cellular_component": "GO", "anatomy": "UBERON", "pathway": "REACTOME",
    "exposure": "CTD",
}  # fmt: skip
#: first index given to a node the source file has no PrimeKG index for (real ones stay below 200,000)
FREE_INDEX = 1_000_000


def _source(node_type: str, local: str) -> str:
    if node_type == "disease":
        return "MONDO_grouped" if "_" in local else "MONDO"
    return TYPE_SOURCE[node_type]


def write_real_kg(primekg_dir: Path, target: Path) -> tuple[Path, int]:
    """Write ``target`` (kg.csv layout) from the three files; returns it and its row count."""
    index: dict[tuple[str, str], str] = {}
    rows: list[list[str]] = []

    def node(source: str, local: str, given: str | None = None) -> str:
        return index.setdefault((source, local), given or str(FREE_INDEX + len(index)))

    with (primekg_dir / "drugmechdb_paths_edges.csv").open(encoding="utf-8") as fh:
        mech = list(csv.DictReader(fh))
    for r in mech:  # real indexes first, so the other files reuse them
        for side in ("source", "target"):
            node(_source(r[f"{side}_type"], r[f"{side}_id"]), r[f"{side}_id"], r[f"{side}_index"])
    with (primekg_dir / "primekg_kg_head5.csv").open(encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            for side in ("x", "y"):
                node(r[f"{side}_source"], r[f"{side}_id"], r[f"{side}_index"])
            rows.append([r[c] for c in KG_COLUMNS])
    with (primekg_dir / "primekg_plus_literature_edges_integrated.csv").open(encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            sides = [
                [node(r[f"{s}_source"], r[f"{s}_id"]), r[f"{s}_id"], r[f"{s}_type"], r[f"{s}_name"], r[f"{s}_source"]]
                for s in ("x", "y")
            ]
            rows.append([r["relation_integrated"], r["display_relation"], *sides[0], *sides[1]])
    for r in mech:
        sides = []
        for s in ("source", "target"):
            source = _source(r[f"{s}_type"], r[f"{s}_id"])
            sides.append([node(source, r[f"{s}_id"]), r[f"{s}_id"], r[f"{s}_type"], r[f"{s}_node"], source])
        rows.append([r["relation"], r["display_relation"], *sides[0], *sides[1]])
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(KG_COLUMNS)
        writer.writerows(rows)
    return target, len(rows)


if __name__ == "__main__":  # python -m benchmarks.primekg_real DATA_DIR/primekg OUT.csv
    import sys

    if len(sys.argv) != 3:
        sys.exit("usage: python -m benchmarks.primekg_real PRIMEKG_DIR OUT.csv")
    written, count = write_real_kg(Path(sys.argv[1]), Path(sys.argv[2]))
    print(f"{count} rows written to {written}")

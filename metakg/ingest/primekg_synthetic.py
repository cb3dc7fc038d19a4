"""SYNTHETIC PrimeKG-shaped files, at any scale, for tests and benchmarks (the real kg.csv is 8.1M rows).

The shape follows the published counts: nodes per type from ``primekg_plus_TableS1_node_types.csv`` and rows
per relation from ``primekg_plus_TableS2_edge_types.csv`` (the ``old_count`` columns, i.e. original PrimeKG).
Like the real file, every relationship is written twice (source and target swapped) and a few rows are
exact duplicates. Names say ``SYNTHETIC``, and so do the file names; ids look like the real ones (NCBI
numbers, ``DB`` DrugBank ids, MONDO numbers, ...) but identify nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from metakg.errors import InputDataError
from metakg.ingest.primekg import KG_COLUMNS

SYNTHETIC_FILE = "synthetic_primekg_kg.csv"
#: exact duplicate rows in the real kg.csv
REAL_EXACT_DUPLICATES = 370

#: relation -> (x_type, y_type, display_relation), as in PrimeKG
RELATIONS: dict[str, tuple[str, str, str]] = {
    "anatomy_protein_present": ("anatomy", "gene/protein", "expression present"),
    "drug_drug": ("drug", "drug", "synergistic interaction"),
    "protein_protein": ("gene/protein", "gene/protein", "ppi"),
    "disease_phenotype_positive": ("disease", "effect/phenotype", "phenotype present"),
    "bioprocess_protein": ("biological_process", "gene/protein", "interacts with"),
    "cellcomp_protein": ("cellular_component", "gene/protein", "interacts with"),
    "disease_protein": ("disease", "gene/protein", "associated with"),
    "molfunc_protein": ("molecular_function", "gene/protein", "interacts with"),
    "drug_effect": ("drug", "effect/phenotype", "side effect"),
    "bioprocess_bioprocess": ("biological_process", "biological_process", "parent-child"),
    "pathway_protein": ("pathway", "gene/protein", "interacts with"),
    "disease_disease": ("disease", "disease", "parent-child"),
    "contraindication": ("drug", "disease", "contraindication"),
    "drug_protein": ("drug", "gene/protein", "target"),
    "anatomy_protein_absent": ("anatomy", "gene/protein", "expression absent"),
    "phenotype_phenotype": ("effect/phenotype", "effect/phenotype", "parent-child"),
    "anatomy_anatomy": ("anatomy", "anatomy", "parent-child"),
    "molfunc_molfunc": ("molecular_function", "molecular_function", "parent-child"),
    "indication": ("drug", "disease", "indication"),
    "cellcomp_cellcomp": ("cellular_component", "cellular_component", "parent-child"),
    "phenotype_protein": ("effect/phenotype", "gene/protein", "associated with"),
    "off-label use": ("drug", "disease", "off-label use"),
    "pathway_pathway": ("pathway", "pathway", "parent-child"),
    "exposure_disease": ("exposure", "disease", "linked to"),
    "exposure_exposure": ("exposure", "exposure", "parent-child"),
    "exposure_bioprocess": ("exposure", "biological_process", "interacts with"),
    "exposure_protein": ("exposure", "gene/protein", "interacts with"),
    "disease_phenotype_negative": ("disease", "effect/phenotype", "phenotype absent"),
    "exposure_molfunc": ("exposure", "molecular_function", "interacts with"),
    "exposure_cellcomp": ("exposure", "cellular_component", "interacts with"),
}

#: node type -> (source, id format)
ID_STYLE: dict[str, tuple[str, str]] = {
    "gene/protein": ("NCBI", "{}"),
    "drug": ("DrugBank", "DB{:05d}"),
    "disease": ("MONDO", "{}"),
    "effect/phenotype": ("HPO", "{}"),
    "biological_process": ("GO", "{}"),
    "molecular_function": ("GO", "{}"),
    "cellular_component": ("GO", "{}"),
    "anatomy": ("UBERON", "{}"),
    "pathway": ("REACTOME", "R-HSA-{}"),
    "exposure": ("CTD", "D{:06d}"),
}


@dataclass(frozen=True)
class SyntheticPrimeKG:
    """What was generated."""

    path: Path
    rows: int
    nodes: int
    relationships: int
    exact_duplicates: int


def published_counts(primekg_dir: Path) -> tuple[dict[str, int], dict[str, int]]:
    """Node counts per type and row counts per relation of the original PrimeKG (the ``old_count`` columns).

    Raises:
        InputDataError: the two tables are not in ``primekg_dir``.
    """
    try:
        types = pl.read_csv(primekg_dir / "primekg_plus_TableS1_node_types.csv")
        relations = pl.read_csv(primekg_dir / "primekg_plus_TableS2_edge_types.csv")
    except (OSError, pl.exceptions.PolarsError) as e:
        raise InputDataError(
            f"the PrimeKG count tables (primekg_plus_TableS1/S2) are not readable in {primekg_dir}: {e}"
        ) from e
    return (
        dict(zip(types["node_type"].to_list(), types["old_count"].to_list(), strict=True)),
        dict(zip(relations["relation"].to_list(), relations["old_count"].to_list(), strict=True)),
    )


#: rows of the synthetic file made and written at a time
WRITE_BLOCK_ROWS = 2_000_000


def generate(out_dir: Path, primekg_dir: Path, *, scale: float = 1.0, seed: int = 0) -> SyntheticPrimeKG:
    """Write ``out_dir/synthetic_primekg_kg.csv``: ``scale`` times the published PrimeKG counts.

    Args:
        out_dir: folder for the file (created).
        primekg_dir: folder with the published count tables.
        scale: 1.0 gives the full 8.1M-row shape; 0.001 about 8,000 rows.
        seed: random seed (the same seed and scale give the same file).
    """
    node_counts, relation_rows = published_counts(primekg_dir)
    rng = np.random.default_rng(seed)
    pools: dict[str, tuple[int, int]] = {}  # type -> (first node_index, count)
    frames = []
    start = 0
    for number, (node_type, count) in enumerate(node_counts.items()):
        n = max(2, round(count * scale))
        source, style = ID_STYLE[node_type]
        # distinct ids within a type, and disjoint ranges across types (three GO types share one prefix)
        numbers = 1 + number * 10_000_000 + rng.choice(10_000_000 - 1, size=n, replace=False)
        frames.append(
            pl.DataFrame(
                {
                    "index": np.arange(start, start + n),
                    "id": [style.format(int(x)) for x in numbers],
                    "type": node_type,
                    "name": [f"SYNTHETIC {node_type} {i}" for i in range(n)],
                    "source": source,
                }
            )
        )
        pools[node_type] = (start, n)
        start += n
    nodes = pl.concat(frames)
    names = list(relation_rows)
    xs, ys, codes = [], [], []
    for code, (relation, rows) in enumerate(relation_rows.items()):
        x_type, y_type, _display = RELATIONS[relation]
        pairs = max(1, round(rows * scale / 2))
        (x0, xn), (y0, yn) = pools[x_type], pools[y_type]
        x = x0 + rng.integers(0, xn, pairs)
        y = y0 + rng.integers(0, yn, pairs)
        y = np.where(x == y, y0 + (y - y0 + 1) % yn, y)  # no self-loops; every type has 2+ nodes
        xs += [x, y]  # both directions, as in the real file
        ys += [y, x]
        codes += [np.full(len(x) * 2, code, dtype=np.int16)]
    x_all, y_all, code_all = np.concatenate(xs), np.concatenate(ys), np.concatenate(codes)
    del xs, ys, codes
    duplicates = max(1, round(REAL_EXACT_DUPLICATES * scale))
    pick = rng.integers(0, len(x_all), duplicates)
    x_all, y_all = np.concatenate([x_all, x_all[pick]]), np.concatenate([y_all, y_all[pick]])
    code_all = np.concatenate([code_all, code_all[pick]])
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / SYNTHETIC_FILE
    # the rows as small integers (relation codes, node indexes), written a block at a time with their names:
    # the memory is the integers', not the file's (at 8 times PrimeKG, the whole table of text held 30 GiB)
    relation_of = dict(enumerate(names))
    displays = {relation: spec[2] for relation, spec in RELATIONS.items()}
    with path.open("wb") as out:
        for begin in range(0, len(x_all), WRITE_BLOCK_ROWS):
            end = begin + WRITE_BLOCK_ROWS
            block = pl.DataFrame(
                {"code": code_all[begin:end], "x_index": x_all[begin:end], "y_index": y_all[begin:end]}
            )
            block = block.with_columns(
                pl.col("code").replace_strict(relation_of, return_dtype=pl.String).alias("relation")
            )
            block = block.with_columns(pl.col("relation").replace_strict(displays).alias("display_relation"))
            for side in ("x", "y"):
                block = block.join(
                    nodes.rename({c: f"{side}_{c}" for c in nodes.columns}),
                    on=f"{side}_index",
                    how="left",
                    maintain_order="left",
                )
            block.select(KG_COLUMNS).write_csv(out, include_header=begin == 0)
    # counted from the rows written, not from the plan: random pairs can repeat, most on small scales
    triples = pl.DataFrame({"relation": code_all, "x_index": x_all, "y_index": y_all})
    distinct_rows = triples.unique().height
    relationships = triples.select(
        "relation",
        pl.min_horizontal("x_index", "y_index").alias("a"),
        pl.max_horizontal("x_index", "y_index").alias("b"),
    ).unique()
    return SyntheticPrimeKG(
        path=path,
        rows=triples.height,
        nodes=nodes.height,
        relationships=relationships.height,
        exact_duplicates=triples.height - distinct_rows,
    )

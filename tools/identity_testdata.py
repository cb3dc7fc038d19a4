"""Three sources that know the same entities, derived from real public mappings (never invented, never copied
into the repository): for the test that asks a question over one graph made of them.

A **chain** is a real PrimeKG drug -> disease row (from the DrugMechDB paths resolved to PrimeKG nodes),
whose MONDO disease maps to a Wikidata item through MONDO's curated exact matches to DOID and Wikidata's
own DOID export (P699), and a real Wikidata "medical condition treated" statement (P2175, written by the
SuLab drug-indication bot: ``may_treat.tsv``) from another drug item to that disease item.

- ``primekg_rows``: the PrimeKG drug -> disease rows in kg.csv's 12 columns;
- ``wikidata_triples``: Wikidata-shaped N-Triples of the drug and disease items: ``rdfs:label`` (the bot's
  names), ``wdt:P31`` (medication, disease), the external ids the mappings give (P699 DOID and P5270 MONDO
  on the disease, P683 ChEBI on the drug) and the P2175 statement.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

SOURCES = {"drug": "DrugBank", "disease": "MONDO"}


@dataclass(frozen=True)
class Chain:
    """One PrimeKG drug-disease row and the Wikidata items that meet it."""

    primekg_drug: str  # name
    primekg_drug_id: str  # DrugBank id
    primekg_drug_index: str
    relation: str  # PrimeKG relation (indication, contraindication, off-label use)
    disease: str  # PrimeKG disease name
    disease_id: str  # PrimeKG's MONDO number as kg.csv writes it
    disease_index: str
    mondo: str  # MONDO:0000000
    doid: str  # DOID:...
    disease_qid: str
    disease_label: str  # the bot's name of the disease item
    drug_qid: str  # the Wikidata drug that treats it (another drug than PrimeKG's)
    drug_label: str
    chebi: str


def chains(er: Path, primekg: Path) -> list[Chain]:
    """Every chain the files give, sorted by MONDO id then drugs."""
    edges = pl.read_csv(primekg / "drugmechdb_paths_edges.csv", infer_schema_length=0)
    rows = edges.filter(
        (pl.col("source_type") == "drug")
        & (pl.col("target_type") == "disease")
        & pl.col("relation").is_in(["indication", "contraindication", "off-label use"])
        & ~pl.col("target_id").str.contains("_")
    ).with_columns(("MONDO:" + pl.col("target_id").str.zfill(7)).alias("mondo"))
    doid = pl.read_csv(er / "mondo_exactmatch_doid.sssom.tsv", separator="\t", comment_prefix="#").select(
        pl.col("subject_id").alias("mondo"), pl.col("object_id").alias("doid")
    )
    items = pl.read_csv(er / "wikidata_DOID.csv").select(
        pl.col("entity").str.replace("http://www.wikidata.org/entity/", "").alias("disease_qid"),
        pl.col("DOID").alias("doid"),
    )
    treats = (
        pl.read_csv(er / "may_treat.tsv", separator="\t", infer_schema_length=0)
        .filter(pl.col("drug_ChEBI_ID").is_not_null() & pl.col("drug_chebi_wdid").str.starts_with("Q"))
        .select(
            pl.col("phen_cui_wdid").alias("disease_qid"),
            pl.col("umls_phen_PT").alias("disease_label"),
            pl.col("drug_chebi_wdid").alias("drug_qid"),
            pl.col("raw_drug_name").alias("drug_label"),
            pl.col("drug_ChEBI_ID").str.replace(r"\.0$", "").alias("chebi"),
        )
    )
    joined = (
        rows.join(doid, on="mondo")
        .join(items, on="doid")
        .join(treats, on="disease_qid")
        .filter(pl.col("source_node").str.to_lowercase() != pl.col("drug_label").str.to_lowercase())
        .unique(["mondo", "source_id", "drug_qid"])
        .sort("mondo", "source_id", "drug_qid")
    )
    return [
        Chain(
            primekg_drug=r["source_node"],
            primekg_drug_id=r["source_id"],
            primekg_drug_index=r["source_index"],
            relation=r["relation"],
            disease=r["target_node"],
            disease_id=r["target_id"],
            disease_index=r["target_index"],
            mondo=r["mondo"],
            doid=r["doid"],
            disease_qid=r["disease_qid"],
            disease_label=r["disease_label"],
            drug_qid=r["drug_qid"],
            drug_label=r["drug_label"],
            chebi=r["chebi"],
        )
        for r in joined.iter_rows(named=True)
    ]


def primekg_rows(chosen: list[Chain], path: Path) -> Path:
    """kg.csv rows (the 12 columns) of the chains' PrimeKG edges."""
    frame = pl.DataFrame(
        [
            {
                "relation": c.relation,
                "display_relation": c.relation,
                "x_index": c.primekg_drug_index,
                "x_id": c.primekg_drug_id,
                "x_type": "drug",
                "x_name": c.primekg_drug,
                "x_source": SOURCES["drug"],
                "y_index": c.disease_index,
                "y_id": c.disease_id,
                "y_type": "disease",
                "y_name": c.disease,
                "y_source": SOURCES["disease"],
            }
            for c in chosen
        ]
    ).unique(maintain_order=True)
    frame.write_csv(path)
    return path


def _literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def wikidata_triples(chosen: list[Chain], path: Path) -> Path:
    """N-Triples of the chains' Wikidata items (Wikidata's own IRIs and truthy ``wdt:`` predicates)."""
    wd, wdt = "http://www.wikidata.org/entity/", "http://www.wikidata.org/prop/direct/"
    label = "http://www.w3.org/2000/01/rdf-schema#label"
    lines: list[str] = [f'<{wd}P2175> <{label}> "medical condition treated"@en .']  # the property's label
    for c in chosen:
        disease, drug = f"<{wd}{c.disease_qid}>", f"<{wd}{c.drug_qid}>"
        lines += [
            f"{disease} <{label}> {_literal(c.disease_label)}@en .",
            f"{disease} <{wdt}P31> <{wd}Q12136> .",
            f"{disease} <{wdt}P699> {_literal(c.doid)} .",
            f"{disease} <{wdt}P5270> {_literal(c.mondo.split(':', 1)[1])} .",
            f"{drug} <{label}> {_literal(c.drug_label)}@en .",
            f"{drug} <{wdt}P31> <{wd}Q12140> .",
            f"{drug} <{wdt}P683> {_literal(c.chebi)} .",
            f"{drug} <{wdt}P2175> {disease} .",
        ]
    path.write_text("\n".join(dict.fromkeys(lines)) + "\n", encoding="utf-8")
    return path

"""``metakg synthetic ...``: SYNTHETIC data shaped like real sources, for tests and benchmarks."""

from __future__ import annotations

from pathlib import Path

import typer

from metakg import api
from metakg.cli._common import JSON_HELP, finish, guarded, out, settings

app = typer.Typer(
    rich_markup_mode=None,
    help="Write SYNTHETIC files shaped like real sources (for tests and benchmarks).",
    no_args_is_help=True,
)


@app.command("primekg")
def primekg(
    output: Path = typer.Option(..., "--output", "-o", help="Folder for synthetic_primekg_kg.csv."),
    scale: float = typer.Option(
        0.01,
        help="1.0 = the full 8.1M-row PrimeKG shape; 0.01 = about 81,000 rows; at most 16 (beyond one machine's "
        "ceiling: docs/scaling.md).",
    ),
    seed: int = typer.Option(0, help="Random seed: the same seed and scale give the same file."),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Write a SYNTHETIC PrimeKG-shaped kg.csv following the published per-type and per-relation counts
    (PrimeKG-Plus Tables S1/S2, original PrimeKG column), with mirrored copies and exact duplicates like the
    real file. Names start with SYNTHETIC; ids identify nothing."""
    cfg = settings()
    with guarded("synthetic primekg", json_mode):
        result = api.synthetic_primekg(output, cfg, scale=scale, seed=seed)
        if not json_mode:
            out.print(
                f"wrote SYNTHETIC {result.path}: {result.rows} rows ({result.relationships} relationships written "
                f"twice, {result.exact_duplicates} exact duplicates), {result.nodes} nodes"
            )
        finish(
            True,
            {
                "command": "synthetic primekg",
                "path": str(result.path),
                "rows": result.rows,
                "nodes": result.nodes,
                "relationships": result.relationships,
                "exact_duplicates": result.exact_duplicates,
                "synthetic": True,
            },
            json_mode=json_mode,
        )

"""``metakg export ...``: bundles to other formats."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import typer

from metakg import api
from metakg.cli._common import JSON_HELP, finish, guarded, out, progress_bar, settings, with_rel_types
from metakg.errors import UsageError

app = typer.Typer(rich_markup_mode=None, help="Write a bundle in another format.", no_args_is_help=True)


class RdfFormatChoice(StrEnum):
    """The RDF serialisations offered."""

    ttl = "ttl"
    nt = "nt"
    nq = "nq"
    trig = "trig"


@app.command("rdf")
def rdf(
    bundle: Path = typer.Argument(..., help="Bundle directory."),
    output: Path = typer.Option(..., "--output", "-o", help="RDF file to write."),
    fmt: RdfFormatChoice | None = typer.Option(
        None,
        "--format",
        "-f",
        help="ttl (Turtle), nt (N-Triples), or with named graphs (a graph per source, and the history's): nq "
        "(N-Quads) or trig (TriG). A bundle's history is written only in these two. Default: as the output's "
        "name ends (.nt, .nq, .trig), else ttl.",
    ),
    provenance: bool = typer.Option(
        True, "--provenance/--no-provenance", help="Add a reified rdf:Statement with provenance for every edge."
    ),
    lang: str = typer.Option(
        "en", "--lang", help="The language tag of labels, aliases and descriptions ('' for plain literals)."
    ),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Export a bundle as RDF with rdflib: labels, types (linked to their Wikidata classes), skos:exactMatch
    for xrefs, one predicate per relation (linked to its Wikidata property), provenance kept."""
    with guarded("export rdf", json_mode):
        with progress_bar("writing RDF statements") as advance:
            chosen = fmt.value if fmt is not None else None
            result = api.export_rdf(bundle, output, chosen, provenance=provenance, lang=lang, progress=advance)
        if not json_mode:
            out.print(f"wrote {result.statements_written} statements ({result.format}) to {output}")
            if result.history_left_out:
                out.print(f"the bundle's history is not in it: {result.format} holds one graph; use nq or trig")
        finish(True, {"command": "export rdf", **result.as_dict()}, json_mode=json_mode)


@app.command("neo4j-admin")
def neo4j_admin(
    bundle: Path = typer.Argument(..., help="Bundle directory."),
    directory_text: str = typer.Argument(..., metavar="DIRECTORY", help="Folder for the header and data CSV files."),
    rel_types: str | None = typer.Option(
        None,
        "--rel-types",
        help="auto, typed or generic, as for `metakg load neo4j` (default: neo4j.rel_types, auto: by the graph).",
    ),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Write CSV and header files for `neo4j-admin database import full` (the fastest first load into an
    empty database) and print the exact command. The files hold the name embeddings when the bundle has
    them; run `metakg load neo4j BUNDLE` after the import to create the indexes (it rewrites no row)."""
    cfg = settings()
    with guarded("export neo4j-admin", json_mode):
        if not directory_text.strip():  # read as a Path, "" would be the current folder
            raise UsageError("DIRECTORY is empty: give the folder for the import files.")
        directory = Path(directory_text)
        result = api.export_neo4j_admin(bundle, directory, with_rel_types(cfg, rel_types))
        if not json_mode:
            out.print(
                f"wrote {result.nodes} nodes and {result.edges} edges ({result.rel_types} relations"
                + (", with name embeddings" if result.embeddings else "")
                + f") to {directory}; run:",
                highlight=False,
            )
            out.print(result.command, markup=False, highlight=False)
            out.print(
                f"then `metakg load neo4j {bundle}` once: it creates the indexes and rewrites no row",
                markup=False,
                highlight=False,
            )
        finish(
            True,
            {
                "command": "export neo4j-admin",
                "import_command": result.command,
                **{k: v for k, v in result.as_dict().items() if k != "command"},
            },
            json_mode=json_mode,
        )

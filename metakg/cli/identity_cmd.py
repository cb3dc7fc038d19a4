"""``metakg resolve`` (one graph from several bundles, by identifiers) and ``metakg identity show|split``
(what was decided, and its undo)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from metakg import api
from metakg.cli._common import JSON_HELP, finish, guarded, out, progress, settings
from metakg.errors import UsageError

app = typer.Typer(
    help="What metakg resolve decided about who is who, its undo, and how right name matching is.", no_args_is_help=True
)


def resolve(
    bundles: list[Path] = typer.Argument(..., help="Bundle directories to resolve into one graph."),
    output: Path = typer.Option(..., "--output", "-o", help="New bundle directory."),
    mode: str = typer.Option(
        "merge", "--mode", help="merge: one node per entity; link: nodes kept, joined by same_as edges."
    ),
    identity: Path | None = typer.Option(
        None, "--identity", help="Identity file (YAML): must_link, cannot_link, preferred, aliases add/remove."
    ),
    names: str | None = typer.Option(
        None,
        "--names",
        help="Also join nodes of different sources and compatible types by their names, with this scorer: "
        "exact, lemma, fuzzy, embedding or cascade (off by default).",
    ),
    threshold: float | None = typer.Option(
        None, "--threshold", help="The name score at or above which two nodes are one (default: the scorer's)."
    ),
    judge: bool = typer.Option(
        False,
        "--judge",
        help="Ask the configured LLM about the name pairs scored just below the threshold (0.1 below it); "
        "those it calls one entity are joined too. Cached and metered.",
    ),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """One graph from several bundles: nodes that share an identifier (an id or an xref, in any written form,
    directly or through others) are one entity. merge makes one node of each (its id chosen by the prefix
    priority of its type, the other ids kept as xrefs and names as aliases, edges rewired); link keeps them
    and adds same_as edges. A group whose types cannot be one entity (a drug and a disease), or larger than
    [identity] max_cluster, is reported and left apart. Every decision is kept in the bundle (metakg identity
    show) and can be undone (metakg identity split). With --names, nodes that share no identifier are also
    joined when a name scorer rates their names high enough (decided by name, with the score)."""
    cfg = settings()
    with guarded("resolve", json_mode):
        if mode not in ("merge", "link"):
            raise UsageError(f"--mode must be merge or link, got {mode!r}.")
        with progress("resolve") as say:
            report = api.resolve(
                bundles,
                output,
                cfg,
                mode=mode,  # type: ignore[arg-type]
                identity_file=identity,
                names=names,  # type: ignore[arg-type]
                threshold=threshold,
                judge=judge,
                progress=say,
            )
        counts = report.counts
        if not json_mode:
            out.print(
                f"resolved {len(bundles)} bundle(s) into {escape(str(output))}: {counts.nodes_before:,} nodes "
                f"-> {counts.nodes:,} ({counts.clusters:,} entities held by {counts.nodes_in_clusters:,} "
                f"nodes, {mode}), {counts.edges:,} edges"
            )
            if names:
                out.print(f"{counts.joined_by_name:,} node(s) joined by name ({escape(names)})")
            if report.judge:
                j = report.judge
                out.print(
                    f"LLM judge: {j['asked']:,} pair(s) asked, {j['yes']:,} yes, {j['no']:,} no, {j['unclear']:,} "
                    f"unclear ({j.get('llm_calls', 0):,} calls, {j.get('cache_hits', 0):,} cached, "
                    f"${j.get('cost_usd', 0.0):.4f})"
                )
            if report.id_clashes:
                out.print(
                    f"{len(report.id_clashes):,} id(s) given by two inputs to nodes of types that cannot be one "
                    "entity, kept apart:"
                )
                for clash in report.id_clashes[:5]:
                    moved = ", ".join(f"the {m['type']} of {m['bundle']} is {m['id']}" for m in clash["apart"])
                    kept = clash["kept"]
                    out.print(
                        f"  {escape(clash['id'])}: the {kept['type']} of {escape(kept['bundle'])}; {escape(moved)}"
                    )
            if counts.refused:
                out.print(f"{counts.refused:,} group(s) left apart, for example:")
                for example in counts.refused_examples[:5]:
                    out.print(f"  {escape(', '.join(example['node']))}: {escape(example['problem'])}")
        finish(True, {"command": "resolve", **report.as_dict()}, json_mode=json_mode)


@app.command("show")
def show(
    node: str = typer.Argument(..., help="A node's id (any written form), a member's, or a cluster's."),
    bundle: Path = typer.Option(..., "--bundle", "-b", help="A bundle made by metakg resolve."),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """The identity cluster of a node: its members, the identifiers that join them, who decided (identifier,
    name scorer, curation) and, for a group left apart, why."""
    settings()
    with guarded("identity show", json_mode):
        found = api.identity_show(bundle, node)
        if not json_mode:
            verdict = f"-> {found.canonical} ({found.mode})" if found.canonical else f"apart: {found.problem}"
            out.print(f"cluster {escape(found.cluster)} {escape(verdict)}")
            out.print(f"  joined by: {escape(', '.join(found.evidence) or '-')}")
            for member in found.members:
                score = "" if member["score"] is None else f" {member['score']:.2f}"
                scorer = f" ({member['scorer']}{score})" if member["scorer"] else ""
                out.print(f"  {escape(member['node'])}: {member['decided_by']}{escape(scorer)}")
        finish(True, {"command": "identity show", **found.as_dict()}, json_mode=json_mode)


@app.command("split")
def split(
    nodes: list[str] = typer.Argument(..., help="Nodes or clusters whose merge (or link) to undo."),
    bundle: Path = typer.Option(..., "--bundle", "-b", help="A bundle made by metakg resolve (rewritten in place)."),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Undo a merge: the members come back with their own rows and their own edges; every other cluster stays.
    The bundle is rewritten as a new version (load neo4j follows it)."""
    cfg = settings()
    with guarded("identity split", json_mode):
        done = api.identity_split(bundle, nodes, cfg)
        if not json_mode:
            if done.split:
                out.print(
                    f"split {len(done.split)} cluster(s) in {escape(str(bundle))}: {done.nodes:,} nodes, "
                    f"{done.edges:,} edges"
                )
            if done.apart:
                out.print(
                    f"already apart (split before, or refused), left as they are: {escape(', '.join(done.apart))}"
                    + ("" if done.split else "; no new version written")
                )
        finish(True, {"command": "identity split", **done.as_dict()}, json_mode=json_mode)


@app.command("eval")
def evaluate(
    gold: Path = typer.Argument(..., help="The gold mapping (plain or gzip-compressed)."),
    output: Path = typer.Option(..., "--output", "-o", help="Folder for curve.csv, pr-curve.png, summary.json."),
    fmt: str = typer.Option(
        "sssom",
        "--format",
        help="sssom: labelled pairs, right and wrong (predicate_modifier Not); sssom-links: subject label -> "
        "object (object labels, or a JSON of id -> label as --second); drugbank: synonym -> drug (open vocabulary "
        "CSV); kgtk: alias -> item (labels file, aliases as --second); ssslm: synonym -> term; pubtator: "
        "annotated mention -> MeSH id (BC5CDR, NCBI-disease; MeSH id -> name JSON as --second).",
    ),
    second: Path | None = typer.Option(
        None,
        "--second",
        help="sssom: a file of wrong pairs; kgtk: the aliases file (required); sssom-links, pubtator (required): "
        "a JSON object of id -> label.",
    ),
    scorer: list[str] = typer.Option(
        [], "--scorer", help="A scorer to measure (repeatable): exact, lemma, fuzzy, embedding, cascade. Default: all."
    ),
    limit: int | None = typer.Option(
        None, "--limit", help="Score a sample of this many pairs or mentions, spread over the set (by id hash)."
    ),
    bundle: Path | None = typer.Option(
        None,
        "--bundle",
        "-b",
        help="Score this graph's identity instead (a bundle made by metakg resolve): GOLD holds id pairs, SSSOM "
        "(subject_id, object_id; predicate_modifier Not for wrong pairs) or a two-column table (a third "
        "column true/false).",
    ),
    json_mode: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """How right name matching is against a gold mapping: per scorer, the threshold chosen on one half of the
    set (a hash of the gold id splits it) as the best F1 with precision at least 0.95, and the other half's
    precision, recall and F1 at that threshold and at the default one. The held-out precision-recall curve
    is written as a table and a PNG."""
    cfg = settings()
    with guarded("identity eval", json_mode):
        if bundle is not None:
            scored = api.identity_eval_bundle(gold, bundle, output)
            if not json_mode:
                out.print(
                    f"{escape(scored.gold)} on {escape(str(bundle))}: {scored.covered:,} of {scored.pairs:,} "
                    f"pairs in the graph; precision {scored.precision:.3f}, recall {scored.recall:.3f}, "
                    f"F1 {scored.f1:.3f} ({scored.called:,} joined, {scored.right:,} right)"
                )
            finish(True, {"command": "identity eval", **scored.as_dict()}, json_mode=json_mode)
            return
        if fmt not in api.GOLD_FORMATS:
            raise UsageError(f"--format must be one of {', '.join(api.GOLD_FORMATS)}, got {fmt!r}.")
        with progress("identity eval") as say:
            summary = api.identity_eval(
                gold,
                output,
                cfg,
                fmt=fmt,
                second=second,
                scorers=scorer or api.NAME_SCORERS,  # type: ignore[arg-type]
                limit=limit,
                progress=say,
            )
        if not json_mode:
            unit = "pairs" if summary.kind == "pairs" else "mentions"
            out.print(f"{escape(summary.gold)}: {summary.rows:,} {unit}, figures on the held-out half")
            links = summary.kind == "links"
            columns = ("tuned", "P", "R", "F1", "default", "P", "R", "F1") + (("missing",) if links else ())
            out.print(f"  {'scorer':<10} " + " ".join(f"{c:>7}" for c in columns))
            for row in summary.scorers:
                held, default = row["held_out"], row["at_default"]
                rule = f"{row['default_threshold']:.2f}" + (f"+{row['margin']:.2f}" if row["margin"] else "")
                out.print(
                    f"  {row['scorer']:<10} {row['threshold']:>7.2f} {held['precision']:>7.3f} {held['recall']:>7.3f} "
                    f"{held['f1']:>7.3f} {rule:>7} {default['precision']:>7.3f} "
                    f"{default['recall']:>7.3f} {default['f1']:>7.3f}"
                    + (f" {default['unlinkable']:>7.3f}" if links else "")
                )
            if links:
                out.print(
                    "  default: threshold+margin over the next entity; missing: share of mentions linked, wrongly, "
                    "were their entity not in the catalog"
                )
            out.print(f"curve and figures in {escape(str(output))}")
        finish(True, {"command": "identity eval", **summary.as_dict()}, json_mode=json_mode)

"""Support sets: every sentence of an answer cites the local KG's node and edge ids that back it, and the
engine checks them against the store instead of trusting the citation.

A claim is supported when it cites at least one id, every cited node exists, and every cited edge exists
and links two cited nodes (an edge between other nodes does not back the claim). The answer's support-set
precision is the share of its claims that are supported.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from metakg.qa_engine.core import ClaimSupport
from metakg.qa_engine.primitives import json_values
from metakg.schemas.graph_store import GraphStore

#: the JSON Schema of an answer with support sets, sent as structured output where the endpoint takes one
ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "sentences": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "text": {"type": "string"},
                    "nodes": {"type": "array", "items": {"type": "string"}},
                    "edges": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["text", "nodes", "edges"],
            },
        }
    },
    "required": ["sentences"],
}


def parse_support(reply: str) -> list[ClaimSupport]:
    """The claims of an answer reply: JSON ``{"sentences": [{"text", "nodes", "edges"}]}``, else one claim
    per sentence with ids cited in brackets (``... [Q42, e:1f2e]``: edge ids start with ``e:``). A reply
    with no claim gives an empty list."""
    claims = _json_claims(reply)
    if claims is not None:
        return claims
    found: list[ClaimSupport] = []
    for sentence in re.split(r"(?<=[.!?\]])\s+", reply.strip()):
        cited = [i.strip() for group in re.findall(r"\[([^\]]*)\]", sentence) for i in group.split(",") if i.strip()]
        text = re.sub(r"\s*\[[^\]]*\]", "", sentence).strip()
        if text:
            nodes = tuple(dict.fromkeys(i for i in cited if not i.startswith("e:")))
            edges = tuple(dict.fromkeys(i for i in cited if i.startswith("e:")))
            found.append(ClaimSupport(text, nodes, edges))
    return found


def _json_claims(reply: str) -> list[ClaimSupport] | None:
    found = json_values(reply, "{", first=True)
    items = found[0].get("sentences") if found else None
    if not isinstance(items, list):
        return None
    claims = []
    for item in items:
        if isinstance(item, dict) and str(item.get("text", "")).strip():
            nodes = tuple(dict.fromkeys(str(n) for n in item.get("nodes") or [] if str(n).strip()))
            edges = tuple(dict.fromkeys(str(e) for e in item.get("edges") or [] if str(e).strip()))
            claims.append(ClaimSupport(str(item["text"]).strip(), nodes, edges))
    return claims


def verify(claims: Sequence[ClaimSupport], store: GraphStore) -> list[ClaimSupport]:
    """Each claim checked against ``store``: ``verified`` and, when not, the ``problems`` found."""
    checked = []
    for claim in claims:
        problems = [f"cites no node or edge of the local graph: {claim.claim[:80]!r}"] if not claim.nodes else []
        present = {n for n in claim.nodes if store.get_node(n) is not None}
        problems += [f"node {n} is not in the local graph" for n in claim.nodes if n not in present]
        for edge in claim.edges:
            ends = _edge_ends(store, edge, present)
            if ends is None:
                problems.append(f"edge {edge} does not link two of the cited nodes")
        checked.append(
            ClaimSupport(claim.claim, claim.nodes, claim.edges, verified=not problems, problems=tuple(problems))
        )
    return checked


def _edge_ends(store: GraphStore, edge: str, cited: set[str]) -> tuple[str, str] | None:
    """The (cited) ends of ``edge`` when it links two cited nodes (a self-loop: one), else None."""
    for node in cited:
        for nb in store.neighbours(node):
            if nb.edge.id == edge and nb.node.id in cited:
                return node, nb.node.id
    return None


def precision(claims: Sequence[ClaimSupport]) -> float | None:
    """The share of checked claims that are supported (None without claims)."""
    return round(sum(1 for c in claims if c.verified) / len(claims), 4) if claims else None

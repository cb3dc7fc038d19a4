"""Support sets are checked against the store: missing ids and edges between other nodes are flagged."""

from __future__ import annotations

import json

from metakg.qa_engine.core import ClaimSupport
from metakg.qa_engine.strategies.robodata.support import parse_support, precision, verify
from tests.unit.qa_engine.handmade import ident, store


def edge_between(a: str, b: str) -> str:
    graph = store()
    return next(nb.edge.id for nb in graph.neighbours(ident(a)) if nb.node.id == ident(b))


def test_supported_missing_and_misplaced_citations() -> None:
    graph = store()
    near, leads = edge_between("alpha", "decoy"), edge_between("zeta", "beta")
    alpha, decoy = ident("alpha"), ident("decoy")
    claims = [
        ClaimSupport("Alpha is near decoy.", (alpha, decoy), (near,)),
        ClaimSupport("Alpha is near a ghost.", (alpha, "kg:hand/ghost"), ()),
        ClaimSupport("Alpha leads to decoy.", (alpha, decoy), (leads,)),  # a real edge, between other nodes
        ClaimSupport("Everything is linked.", (), ()),
        ClaimSupport("Alpha is near decoy by edge e:none.", (alpha, decoy), ("e:none",)),
    ]
    checked = verify(claims, graph)
    assert [c.verified for c in checked] == [True, False, False, False, False]
    assert checked[1].problems == ("node kg:hand/ghost is not in the local graph",)
    assert checked[2].problems == (f"edge {leads} does not link two of the cited nodes",)
    assert "cites no node" in checked[3].problems[0] and "e:none" in checked[4].problems[0]
    assert precision(checked) == 0.2 and precision([]) is None


def test_parse_json_and_bracketed_citations() -> None:
    reply = "Here: " + json.dumps(
        {"sentences": [{"text": "Rome is twinned with Tokyo.", "nodes": ["Q220", "Q1490", "Q220"], "edges": ["e:1"]}]}
    )
    (claim,) = parse_support(reply)
    assert claim == ClaimSupport("Rome is twinned with Tokyo.", ("Q220", "Q1490"), ("e:1",))
    text = "Douglas Adams was born in Cambridge [Q42, Q350, e:ab12]. He wrote books."
    first, second = parse_support(text)
    assert first == ClaimSupport("Douglas Adams was born in Cambridge.", ("Q42", "Q350"), ("e:ab12",))
    assert second == ClaimSupport("He wrote books.", (), ())
    assert parse_support("   ") == []

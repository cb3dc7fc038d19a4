"""What every :class:`~metakg.schemas.knowledge_source.KnowledgeSource` promises (a subclass gives ``make()``,
``unreachable()`` and a ``KNOWN`` item id with a label): an endpoint; a SELECT's bindings as a list of
``{variable: {"type", "value"}}`` with text values; a failure is a metakg error, never a raw one; and, for an
:class:`~metakg.schemas.knowledge_source.EntityFetcher`, a fetched node is one of the ids asked for."""

from __future__ import annotations

import pytest

from metakg.errors import MetakgError
from metakg.schemas.knowledge_source import KnowledgeSource


class KnowledgeSourceContract:
    KNOWN = "Q42"

    def make(self) -> KnowledgeSource:
        raise NotImplementedError

    def unreachable(self) -> KnowledgeSource:
        raise NotImplementedError

    def test_it_names_its_endpoint(self) -> None:
        assert isinstance(self.make().endpoint, str) and self.make().endpoint

    def test_a_select_gives_bindings_of_text(self) -> None:
        rows = self.make().select(f"SELECT ?label WHERE {{ wd:{self.KNOWN} rdfs:label ?label }} LIMIT 5")
        assert isinstance(rows, list) and rows
        for row in rows:
            assert set(row) <= {"label"}
            assert all(isinstance(v["value"], str) and isinstance(v["type"], str) for v in row.values())

    def test_a_select_matching_nothing_is_an_empty_list(self) -> None:
        assert self.make().select("SELECT ?x WHERE { wd:Q0000000000 rdfs:label ?x }") == []

    def test_a_failure_is_a_metakg_error(self) -> None:
        with pytest.raises(MetakgError):
            self.unreachable().select(f"SELECT ?x WHERE {{ wd:{self.KNOWN} rdfs:label ?x }}", timeout_s=2)

    def test_a_fetched_node_is_one_asked_for(self) -> None:
        source = self.make()
        fetch = getattr(source, "fetch", None)
        if fetch is None:
            pytest.skip("not an EntityFetcher")
        bundle = fetch([self.KNOWN], [])
        assert set(bundle.nodes["id"].to_list()) <= {f"wd:{self.KNOWN}"} and bundle.nodes.height == 1

"""The LLM client contract on the OpenAI-compatible client against the local model, and the knowledge-source
contract on the Wikidata source against the Virtuoso test endpoint (real Wikidata rows about Q42)."""

from __future__ import annotations

import pytest

from metakg.config import LLMSettings
from metakg.ingest.wikidata import SparqlClient, WikidataFragments
from metakg.llm import local_server
from metakg.llm.client import LLMClient
from metakg.llm.openai_client import OpenAICompatibleClient
from metakg.schemas.knowledge_source import KnowledgeSource
from metakg.schemas.vocabulary import default_vocabulary
from tests.contract.knowledge_source_contract import KnowledgeSourceContract
from tests.contract.llm_client_contract import LLMClientContract
from tools import sparql_server

pytestmark = pytest.mark.integration


class TestOpenAIClientContract(LLMClientContract):
    @pytest.fixture(autouse=True)
    def _server(self, local_llm: local_server.LocalServer) -> None:
        self.server = local_llm

    def make(self) -> LLMClient:
        settings = LLMSettings(model=self.server.model, max_tokens=16, timeout_s=120)
        return OpenAICompatibleClient(settings, base_url=self.server.base_url)

    def failing(self) -> LLMClient:
        settings = LLMSettings(model="nobody", max_tokens=8, timeout_s=2, max_retries=0, connect_retries=0)
        return OpenAICompatibleClient(settings, base_url="http://127.0.0.1:9/v1")  # nothing listens there


class TestWikidataSourceContract(KnowledgeSourceContract):
    KNOWN = "Q42"

    @pytest.fixture(autouse=True)
    def _endpoint(self, sparql_endpoint: sparql_server.Server) -> None:
        self.endpoint = sparql_endpoint.endpoint

    def make(self) -> KnowledgeSource:
        return WikidataFragments(SparqlClient(self.endpoint, "metakg-tests"), default_vocabulary())

    def unreachable(self) -> KnowledgeSource:
        client = SparqlClient("http://127.0.0.1:9/sparql", "metakg-tests", max_retries=0, connect_retries=0)
        return WikidataFragments(client, default_vocabulary())

"""The LLM client and embedder contracts, run on the implementations that need no server (the OpenAI client
against the local model and the Wikidata source against Virtuoso run in tests/integration)."""

from __future__ import annotations

from pathlib import Path

import pytest

from metakg.config import EmbedderSettings
from metakg.llm.client import LLMClient
from metakg.llm.embedder import Embedder, LazyEmbedder, OnnxEmbedder
from metakg.llm.scripted import ScriptedClient
from metakg.llm.usage import MeteredClient, UsageMeter
from tests.conftest import HashEmbedder
from tests.contract.embedder_contract import EmbedderContract
from tests.contract.llm_client_contract import LLMClientContract


class TestOnnxEmbedderContract(EmbedderContract):
    @pytest.fixture(autouse=True)
    def _model(self, minilm: OnnxEmbedder) -> None:
        self.embedder = minilm

    def make(self) -> Embedder:
        return self.embedder


class TestLazyEmbedderContract(EmbedderContract):
    @pytest.fixture(autouse=True)
    def _model(self, model_dir: Path, tmp_path: Path) -> None:
        self.embedder = LazyEmbedder(EmbedderSettings(model_dir=model_dir), tmp_path, lambda _said: None)

    def make(self) -> Embedder:
        return self.embedder


class TestHashEmbedderContract(EmbedderContract):
    def make(self) -> Embedder:
        return HashEmbedder()


class TestScriptedClientContract(LLMClientContract):
    def make(self) -> LLMClient:
        return ScriptedClient({"colour": "blue"}, default="{}")

    def failing(self) -> LLMClient:
        return ScriptedClient({})  # no reply for the prompt: LLMError


class TestMeteredClientContract(LLMClientContract):
    @pytest.fixture(autouse=True)
    def _ledger(self, tmp_path: Path) -> None:
        self.meter = UsageMeter("contract", path=tmp_path / "ledger.jsonl")

    def make(self) -> LLMClient:
        return MeteredClient(ScriptedClient({"colour": "blue"}, default="{}"), self.meter)

    def failing(self) -> LLMClient:
        return MeteredClient(ScriptedClient({}), self.meter)

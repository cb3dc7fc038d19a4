"""Settings: ``METAKG_*`` environment variables and an optional TOML file, one model per section.

Precedence, highest first: values passed in code, environment variables, the TOML file, defaults.
The TOML file is ``$METAKG_CONFIG`` when set, else ``./metakg.toml`` when present. Nested settings use a
double underscore in the environment: ``METAKG_EMBEDDER__MODEL_DIR=/models/minilm``.

Nothing is read at import time: call :func:`load_settings`.
"""

from __future__ import annotations

import json
import math
import os
import re
import tomllib
import typing
import urllib.parse
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)
from pydantic_settings.exceptions import SettingsError

from metakg.errors import ConfigError
from metakg.redact import check_url, mask_url, split_credentials

DEFAULT_CONFIG_FILE = "metakg.toml"
MINILM_BASE_URL = "https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/resolve/main"


class Section(BaseModel):
    """A settings section: a key it does not define is refused, with its name, rather than ignored; so are a
    number that is not finite (``nan``, ``inf``) and text holding a NUL character, which no setting means."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_nul(cls, value: Any) -> Any:
        if _holds_nul(value):
            raise ValueError("holds a NUL character")
        return value


def _holds_nul(value: Any, depth: int = 0) -> bool:
    """Whether text in ``value`` (a string, or inside a list or table of them) holds a NUL character."""
    if isinstance(value, str):
        return "\x00" in value
    if depth < 8 and isinstance(value, list | tuple):
        return any(_holds_nul(v, depth + 1) for v in value)
    if depth < 8 and isinstance(value, dict):
        return any(_holds_nul(k, depth + 1) or _holds_nul(v, depth + 1) for k, v in value.items())
    return False


class PathsSettings(Section):
    """Where metakg reads public data sets from and keeps its caches."""

    data_dir: Path | None = Field(
        default=None,
        description="Folder with public data sets the demo and benchmarks read (e.g. metakgrag_pilot/...); "
        "None: the demo downloads its two files into the cache.",
    )
    cache_dir: Path = Field(
        default_factory=lambda: Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "metakg",
        description="Downloads (models, data) are kept here.",
    )


class EmbedderSettings(Section):
    """The sentence-embedding model used for entity matching and name search."""

    model_dir: Path | None = Field(
        default=None,
        description="Folder with model.onnx and tokenizer.json. Default: <cache_dir>/models/all-MiniLM-L6-v2, "
        "downloaded on first use.",
    )
    model_url: str = Field(default=f"{MINILM_BASE_URL}/onnx/model.onnx")
    tokenizer_url: str = Field(default=f"{MINILM_BASE_URL}/tokenizer.json")
    batch_size: int = Field(default=64, ge=1, le=4096)
    max_length: int = Field(default=256, ge=8, le=512)

    @field_validator("model_dir")
    @classmethod
    def _model_dir_exists(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_dir():
            raise ValueError(f"embedder.model_dir {value} is not a directory")
        return value


class IngestSettings(Section):
    """Limits applied while reading source files."""

    max_field_chars: int = Field(
        default=1000,
        ge=1,
        description="A head, relation or tail (PrimeKG: an id, name or relation) longer than this is rejected.",
    )


#: Identifier systems that give an entity one id: `metakg resolve` never puts two nodes whose ids are of one
#: of these in one cluster (two MONDO diseases, or two Wikidata items, joined through a third source's
#: coarser mapping, are two entities). Extracted nodes (``kg:``) and PrimeKG's grouped diseases are not
#: among them.
ONE_PER_ENTITY: tuple[str, ...] = (
    "mondo", "doid", "orphanet", "omim", "mesh", "umls", "ncit", "efo", "hp", "go", "uberon", "reactome",
    "drugbank", "chebi", "chembl", "pubchem", "ncbigene", "hgnc", "uniprot", "ensembl", "wd",
)  # fmt: skip


class IdentitySettings(Section):
    """`metakg resolve`: which identity clusters are merged and which id each gets."""

    max_cluster: int = Field(
        default=25, ge=2, le=100_000, description="A cluster larger than this is reported, not merged."
    )
    one_per_entity: list[str] = Field(
        default_factory=lambda: list(ONE_PER_ENTITY),
        description="Identifier systems that give an entity one id: a cluster never holds two nodes whose ids "
        "are of one of these (empty: no such check).",
    )
    prefix_priority: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Per type (or '*'), the prefixes in the order the canonical id is chosen; replaces the "
        "built-in list of that type.",
    )

    @field_validator("one_per_entity")
    @classmethod
    def _prefixes(cls, value: list[str]) -> list[str]:
        bad = [p for p in value if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.-]*", p)]
        if bad:
            raise ValueError(f"{', '.join(map(repr, bad))} is no CURIE prefix (a letter, then letters, digits, _ . -)")
        return value

    @field_validator("prefix_priority")
    @classmethod
    def _priorities(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for kind, prefixes in value.items():
            if not kind.strip():
                raise ValueError("a type name is empty (give a vocabulary type, or '*')")
            cls._prefixes(prefixes)
        return value


class ValidationSettings(Section):
    """How validation treats rejected rows."""

    fail_on_reject: bool = Field(
        default=True, description="Exit with status 1 when any row is rejected (the bundle is still written)."
    )
    html_report: bool = Field(default=True, description="Write validation.html next to validation.json.")
    symmetric_relations: list[str] = Field(
        default_factory=list,
        description="Relations to treat as symmetric besides the vocabulary's (their mirrored copies collapse).",
    )


class ExtractSettings(Section):
    """LLM triple extraction (`metakg extract`)."""

    chunk_chars: int = Field(
        default=1500, ge=100, description="Largest text chunk sent in one prompt (whole sentences)."
    )
    max_document_mb: float = Field(
        default=256,
        gt=0,
        le=65536,
        description="A document file larger than this (MiB) is refused unread, as a rejected file with the reason.",
    )
    relations: list[str] = Field(
        default_factory=list, description="Allowed predicates named in the prompt; empty: any predicate."
    )
    confidence: float = Field(default=0.8, ge=0, le=1, description="Confidence given to extracted edges.")
    node_type: str = Field(default="concept", description="Vocabulary type of new (unlinked) nodes.")
    ontology: Path | None = Field(
        default=None,
        description="An ontology guiding extraction (Text2KGBench JSON, or OWL/RDFS in Turtle or RDF/XML): typed "
        "triples of its relations, checked against its domains and ranges (docs/extraction.md).",
    )
    structured: bool = Field(
        default=True,
        description="Ask for typed triples as JSON held to a schema where the endpoint can constrain its output "
        "(llama.cpp grammar, vLLM guided decoding, OpenAI structured outputs): the ontology's, or without one the "
        "vocabulary's types with free relations; false: lines (untyped without an ontology).",
    )
    conformance: Literal["reject", "warn"] = Field(
        default="reject",
        description="With an ontology: a triple outside it (unknown relation, a domain or range broken) goes to "
        "the rejects with its reason (reject), or is kept and counted as a warning (warn).",
    )
    embeddings: bool = Field(default=True, description="Resolve and link mentions by name-embedding similarity too.")
    group_threshold: float = Field(
        default=0.94,
        gt=0,
        le=1,
        description="Cosine similarity at or above which two mentions of a run are one entity (stricter than "
        "the identity cascade's 0.8 for two nodes: mentions have no ids to keep two apart).",
    )
    link_threshold: float = Field(
        default=0.75,
        gt=0,
        le=1,
        description="Cosine similarity at or above which a mention is linked to its nearest --link-to entity "
        "(the cascade's default link rule).",
    )
    link_margin: float = Field(
        default=0.08,
        ge=0,
        le=1,
        description="How much the nearest --link-to entity must beat the next one by for a mention to be linked.",
    )


#: the Wikidata MediaWiki API (entity search by label)
WIKIDATA_SEARCH_API = "https://www.wikidata.org/w/api.php"


class WikidataSettings(Section):
    """The SPARQL endpoint `metakg sync wikidata` reads (the Wikidata Query Service by default)."""

    endpoint: str = Field(default="https://query.wikidata.org/sparql", description="SPARQL endpoint URL.")
    user_agent: str = Field(
        default="metakg/0.1 (https://github.com/metakg/metakg; knowledge-graph toolkit) python-urllib",
        description="Sent with every request; WDQS asks for a descriptive agent with a contact.",
    )
    timeout_s: float = Field(
        default=70.0,
        gt=0,
        le=86_400,
        description="Deadline of each attempt's whole reply (WDQS stops queries at 60 s).",
    )
    max_retries: int = Field(default=5, ge=0, le=20, description="Retries on 429, 5xx and malformed replies.")
    connect_retries: int = Field(
        default=1, ge=0, le=20, description="Retries when the connection is refused (nothing listens): fail fast."
    )
    backoff_s: float = Field(default=2.0, ge=0, le=600, description="First retry delay; doubles (Retry-After wins).")
    batch_size: int = Field(default=50, ge=1, le=1000, description="Entities per VALUES batch (halved on timeouts).")
    max_queries: int = Field(default=10_000, ge=1, description="Query budget of one sync.")
    max_removed_share: float = Field(
        default=0.2,
        ge=0,
        le=1,
        description="The largest share of the subset's entities one sync may remove; a sync that would remove "
        "more, or any seed, stops without writing (sync --allow-removals lets it).",
    )
    search_api: str = Field(
        default="auto",
        description="MediaWiki API used for entity search by label (wbsearchentities): `auto` uses "
        "https://www.wikidata.org/w/api.php when the endpoint is the Wikidata Query Service and none otherwise "
        "(labels are then matched over SPARQL); `none`; or a URL.",
    )

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, value: str) -> str:
        return check_url(value, "wikidata.endpoint")

    @field_validator("search_api")
    @classmethod
    def _search_api(cls, value: str) -> str:
        if value not in ("auto", "none") and not value.startswith(("http://", "https://")):
            raise ValueError(f"wikidata.search_api {value!r} must be auto, none or an http(s) URL")
        return value

    def search_api_url(self) -> str | None:
        """The search API to use, with ``auto`` resolved against the endpoint."""
        if self.search_api == "none":
            return None
        if self.search_api == "auto":
            return WIKIDATA_SEARCH_API if urlparse(self.endpoint).hostname == "query.wikidata.org" else None
        return self.search_api


class StoreSettings(Section):
    """Which GraphStore the QA engine and the query commands use."""

    backend: Literal["embedded", "neo4j"] = "embedded"
    max_hops: int = Field(default=3, ge=1, le=6, description="Default hop limit of path queries.")


class QASettings(Section):
    """The QA engine (`metakg ask`, `metakg eval`): the retrieval settings every strategy shares.

    Each strategy's own parameters live in a section named after it, ``[qa.<strategy>]`` in TOML or
    ``METAKG_QA__<STRATEGY>__<KEY>`` in the environment (e.g. ``[qa.metakgrag] n_max = 2``). Those sections
    are kept here as given and validated by the strategy's settings model when the engine starts; an
    unknown strategy name is refused there too (`metakg strategies` lists the names and their settings).
    """

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    strategy: str = Field(
        default="metakgrag", description="Default strategy of `ask` (`metakg strategies` lists them)."
    )
    concepts: Literal["llm", "rules"] = Field(
        default="llm", description="Concept extraction: ask the LLM (rules when it gives none), or rules only."
    )
    max_concepts: int = Field(default=8, ge=1, le=32, description="Concepts kept per question.")
    tau_entity: float = Field(
        default=0.6, ge=0, le=1, description="Cosine similarity a concept's best entity needs to be a start entity."
    )
    tau_margin: float = Field(
        default=0.05,
        ge=0,
        le=1,
        description="An embedding match must beat the concept's runner-up entity by this much (0: off); "
        "a generic word close to many entities grounds to none.",
    )
    ground_choices: bool = Field(
        default=True,
        description="Multiple choice: the choices join the concepts and the text entities are compared with; "
        "start entities still come from the stem.",
    )
    choice_weight: float = Field(
        default=0.9,
        ge=0,
        le=1,
        description="Multiple choice with ground_choices: an entity's relevance is (1 - w) * its similarity to "
        "the stem + w * its similarity to the closest choice.",
    )
    relation_weight: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="A step along an edge weighs (1 - r) * the entity's relevance + r * the similarity of the "
        "edge's relation to the question.",
    )
    max_starts: int = Field(default=5, ge=1, le=50, description="Start entities kept per question.")
    max_neighbours: int = Field(default=100, ge=1, description="Neighbours read per node while searching.")
    max_evidence: int = Field(default=30, ge=1, description="Evidence lines at most in the answer prompt.")
    answer_max_tokens: int = Field(default=64, ge=1, description="Reply tokens allowed for the answer.")
    cache_entries: int = Field(
        default=200_000,
        ge=1000,
        description="Bound of each cache kept across questions (texts and nodes embedded, neighbour lists); "
        "the least recently used entries are evicted.",
    )
    local_kg: str = Field(
        default="",
        description="Where agents that grow a graph (robodata) keep it: empty for a new graph per question; a "
        "bundle directory, read if it exists and written after each question; or `neo4j` for the configured "
        "Neo4j database.",
    )

    @field_validator("local_kg")
    @classmethod
    def _local_kg(cls, value: str) -> str:
        value = value.strip()
        if value and value != "neo4j":
            path = Path(value).expanduser()
            if path.exists() and not path.is_dir():
                raise ValueError(f"qa.local_kg {value} is a file; give a bundle directory, or `neo4j`")
            if not path.parent.is_dir():
                raise ValueError(f"qa.local_kg {value}: its parent folder {path.parent} does not exist")
        return value

    @model_validator(mode="before")
    @classmethod
    def _json_in_sections(cls, data: Any) -> Any:
        """Values of strategy sections given in the environment arrive as text: a JSON list or table there
        (``METAKG_QA__MEDCOG__NODE_TYPES='["disease", "drug"]'``) is read as JSON, as for the other settings."""
        if not isinstance(data, dict):
            return data
        parsed = dict(data)
        for name, section in data.items():
            if name in cls.model_fields or not isinstance(section, dict):
                continue
            values = dict(section)
            for key, value in section.items():
                if isinstance(value, str) and value.lstrip()[:1] in ("[", "{"):
                    try:
                        values[key] = json.loads(value)
                    except (ValueError, RecursionError) as e:
                        raise ValueError(f"qa.{name}.{key} is not valid JSON ({e})") from None
            parsed[name] = values
        return parsed

    @model_validator(mode="after")
    def _sections_are_tables(self) -> QASettings:
        for name, value in (self.model_extra or {}).items():
            if not isinstance(value, dict):
                raise ValueError(
                    f"qa.{name} is not a setting; strategy sections are tables ([qa.{name}] in TOML, "
                    f"METAKG_QA__{name.upper()}__<KEY> in the environment)"
                )
        return self

    def section(self, strategy: str) -> dict[str, Any]:
        """The raw ``[qa.<strategy>]`` values (empty when not given)."""
        value = (self.model_extra or {}).get(strategy, {})
        return dict(value) if isinstance(value, dict) else {}

    def with_section(self, strategy: str, values: dict[str, Any]) -> QASettings:
        """These settings with ``values`` set in the ``[qa.<strategy>]`` section (the others kept)."""
        return self.model_validate(self.model_dump() | {strategy: self.section(strategy) | values})

    def sections(self) -> list[str]:
        """The names of the strategy sections given."""
        return sorted(self.model_extra or {})


class LLMSettings(Section):
    """The chat model: any OpenAI-compatible endpoint, or the local SmolLM2 server when none is set.

    ``METAKG_LLM__BASE_URL``, ``METAKG_LLM__API_KEY``, ``METAKG_LLM__MODEL``; ``METAKG_LLM_BASE_URL``,
    ``METAKG_LLM_API_KEY``, ``METAKG_LLM_MODEL`` and ``OPENAI_API_KEY`` are honoured too.
    """

    base_url: str | None = Field(default=None, description="e.g. https://api.openai.com/v1; None: local server.")
    api_key: SecretStr = Field(default=SecretStr(""), description="Never printed or logged.")
    model: str = Field(default="smollm2-135m-instruct", description="Model name sent to the endpoint.")
    timeout_s: float = Field(
        default=60.0,
        gt=0,
        le=86_400,
        description="Deadline of each attempt's whole reply (connect, headers, body), then a retry.",
    )
    max_retries: int = Field(default=5, ge=0, le=20, description="Retries on 429, 5xx, timeouts, dropped links.")
    connect_retries: int = Field(
        default=1, ge=0, le=20, description="Retries when the connection is refused (nothing listens): fail fast."
    )
    backoff_s: float = Field(
        default=1.0, ge=0, le=600, description="First retry delay; doubles each time (Retry-After wins)."
    )
    concurrency: int = Field(default=4, ge=1, le=256, description="Requests in flight at once.")
    temperature: float = Field(default=0.0, ge=0, le=2)
    max_tokens: int = Field(default=512, ge=1, le=32768)
    prices_per_mtok: dict[str, tuple[float, float]] = Field(
        default_factory=dict,
        description="model -> (USD per million prompt tokens, per million completion tokens); unknown: 0.",
    )
    function_calling: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="Offer tools through OpenAI function calling: auto = on for a configured endpoint, off for "
        "the local server (llama-cpp-python ignores tools it cannot force); off: tools are called as JSON in text. "
        "An endpoint that refuses or ignores tools gets JSON in text from then on.",
    )
    local_port: int = Field(default=8765, ge=1024, le=65535, description="Port of `metakg llm serve`.")
    local_threads: int | None = Field(
        default=None,
        ge=1,
        le=256,
        description="CPU threads of the local model server; None: one per core. Fewer leave cores to other work.",
    )

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else check_url(value, "llm.base_url")

    @field_validator("api_key")
    @classmethod
    def _key(cls, value: SecretStr) -> SecretStr:
        if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in value.get_secret_value()):
            raise ValueError("holds a blank or a control character, which no API key has (check how it was pasted)")
        return value

    @field_validator("prices_per_mtok")
    @classmethod
    def _prices(cls, value: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
        for model, pair in value.items():
            if any(not math.isfinite(p) or p < 0 for p in pair):
                raise ValueError(f"the prices of {model!r} must be finite numbers of 0 or more, got {list(pair)}")
        return value


class BatchSettings(Section):
    """Provider batch APIs for `metakg extract --batch` (half price, no rate limits, replies within a day).

    ``METAKG_BATCH__ANTHROPIC_API_KEY``; ``ANTHROPIC_API_KEY`` is honoured too. OpenAI's Batch API uses the
    ``[llm]`` endpoint and key.
    """

    poll_s: float = Field(default=30.0, gt=0, le=3600, description="Seconds between two looks at a running batch.")
    retries: int = Field(
        default=2, ge=0, le=10, description="New batches for the requests a batch returned failed or expired."
    )
    anthropic_base_url: str | None = Field(
        default=None, description="Anthropic API root; None: the SDK's default (https://api.anthropic.com)."
    )
    anthropic_api_key: SecretStr = Field(default=SecretStr(""), description="Never printed or logged.")
    vllm_command: str = Field(
        default="vllm run-batch",
        min_length=1,
        description="The command `extract --batch vllm` tells you to run on its request file (input, output and "
        "model are appended).",
    )

    @field_validator("anthropic_base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else check_url(value, "batch.anthropic_base_url")


class RaySettings(Section):
    """`metakg extract --engine ray`: the prompts a run still needs go out from the workers of a Ray cluster
    (``pip install "metakg[ray]"``). ``RAY_ADDRESS`` is honoured for ``address``."""

    address: str | None = Field(
        default=None,
        description="The cluster to join (ray://host:10001, host:6379, auto); None: RAY_ADDRESS, else a Ray "
        "instance started on this machine for the run.",
    )
    endpoints: list[str] = Field(
        default_factory=list,
        description="OpenAI-compatible endpoints the prompts are spread over (e.g. one vLLM server per GPU node), "
        "each given --concurrency request workers; empty: the [llm] endpoint (or the local server).",
    )
    processor: Literal["http", "vllm"] = Field(
        default="http",
        description="http: requests to the endpoints; vllm: ray.data.llm's vLLM engine on the cluster's GPUs "
        "(vllm_model).",
    )
    vllm_model: str | None = Field(
        default=None, description="processor vllm: the model the engine loads (a Hugging Face id or a path)."
    )
    vllm_engine_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="processor vllm: vLLM engine arguments (max_model_len, tensor_parallel_size)."
    )
    batch_size: int = Field(
        default=8, ge=1, le=4096, description="Prompts a request worker takes at a time (small: little redone)."
    )
    worker_cpus: float = Field(
        default=0.25, gt=0, le=64, description="CPUs a request worker reserves (it mostly waits on the endpoint)."
    )
    qps: int | None = Field(default=None, ge=1, description="Most requests per second of one request worker.")

    @field_validator("endpoints")
    @classmethod
    def _urls(cls, value: list[str]) -> list[str]:
        return [check_url(url, "ray.endpoints") for url in value]


class _AliasEnvSource(PydanticBaseSettingsSource):
    """Conventional variables outside the METAKG_ scheme for one section (lower precedence than METAKG_*).

    ``names`` maps a variable to a field; where several name one field, the first one set wins.
    """

    def __init__(self, settings_cls: type[BaseSettings], section: str, names: dict[str, str]) -> None:
        super().__init__(settings_cls)
        self.section = section
        self.names = names

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name, key in self.names.items():
            if os.environ.get(name) and key not in values:
                values[key] = os.environ[name]
        return {self.section: values} if values else {}


#: METAKG_LLM_* (single underscore) and OPENAI_API_KEY
LLM_ENV_ALIASES = {
    "METAKG_LLM_BASE_URL": "base_url",
    "METAKG_LLM_API_KEY": "api_key",
    "METAKG_LLM_MODEL": "model",
    "OPENAI_API_KEY": "api_key",
}
#: conventional variables of the [batch] section
RAY_ENV_ALIASES = {"RAY_ADDRESS": "address"}
BATCH_ENV_ALIASES = {"ANTHROPIC_API_KEY": "anthropic_api_key", "ANTHROPIC_BASE_URL": "anthropic_base_url"}


#: the URI schemes of the Neo4j driver
NEO4J_SCHEMES = ("bolt://", "bolt+s://", "bolt+ssc://", "neo4j://", "neo4j+s://", "neo4j+ssc://")


class Neo4jSettings(Section):
    """How to reach Neo4j. ``NEO4J_URI``, ``NEO4J_USER``, ``NEO4J_PASSWORD``, ``NEO4J_DATABASE`` are honoured."""

    uri: str = Field(default="bolt://127.0.0.1:7687", description="Bolt or neo4j:// URI (the `make neo4j-up` server).")
    user: str = "neo4j"
    password: SecretStr = Field(default=SecretStr(""), description="Never printed; empty for a server without auth.")
    database: str = "neo4j"
    batch_size: int = Field(default=5000, ge=1, le=100_000, description="Rows per UNWIND ... MERGE transaction.")
    writers: int = Field(
        default=2, ge=1, le=16, description="Load transactions in flight (the next batch is sent while one commits)."
    )
    rel_types: Literal["auto", "typed", "generic"] = Field(
        default="auto",
        description="How loads write relations: a relationship type per relation (typed), or one type RELATED "
        "with the relation in r.rel (generic, for open-vocabulary graphs); auto: as the database has them, else "
        "generic for a graph of more than 64 distinct relations, typed otherwise.",
    )

    @field_validator("uri")
    @classmethod
    def _uri_scheme(cls, value: str) -> str:
        checked = check_url(value, "neo4j.uri", tuple(scheme.removesuffix("://") for scheme in NEO4J_SCHEMES))
        scheme = checked.split(":", 1)[0]
        return scheme.lower() + checked[len(scheme) :]  # the driver knows the schemes in lower case

    @model_validator(mode="after")
    def _credentials_out_of_the_uri(self) -> Neo4jSettings:
        """A ``bolt://user:password@host`` URI: the user and password become the settings' own, and the URI
        keeps only the address (the driver would otherwise show it, password included, in its errors)."""
        bare, authorization = split_credentials(self.uri)
        if authorization is not None:
            parts = urllib.parse.urlsplit(self.uri)
            self.user = urllib.parse.unquote(parts.username or "") or self.user
            if parts.password is not None:
                self.password = SecretStr(urllib.parse.unquote(parts.password))
            self.uri = bare
        return self


class ServerSettings(Section):
    """``metakg serve``: where it listens and what it allows."""

    host: str = Field(default="127.0.0.1", description="Address to bind; anything but loopback needs an API key.")
    port: int = Field(default=8000, ge=1, le=65535, description="TCP port.")
    api_key: SecretStr = Field(
        default=SecretStr(""), description="Required in the X-API-Key header when set; never printed."
    )
    graph_keys: dict[str, SecretStr] = Field(
        default_factory=dict,
        description="A server of several graphs: the API key each graph named here requires instead of api_key "
        '(METAKG_SERVER__GRAPH_KEYS=\'{"trials": "..."}\'); never printed.',
    )
    max_concurrent_asks: int = Field(default=4, ge=1, le=64, description="Questions answered at once; more wait.")
    max_question_chars: int = Field(default=2000, ge=10, le=100_000, description="Longest question accepted.")
    max_body_bytes: int = Field(default=65_536, ge=1024, le=10_000_000, description="Largest request body.")
    body_idle_s: float = Field(
        default=30.0, gt=0, le=3600, description="Seconds a request body may pause before the request is a 408."
    )
    header_s: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="Seconds a connection has to send a request's whole header; then it is closed (a client "
        "that trickles its header holds no connection longer).",
    )
    max_connections: int = Field(
        default=1024,
        ge=16,
        le=100_000,
        description="Open connections at most; one more is closed at once (the server keeps answering those it "
        "has, and never runs out of file descriptors).",
    )
    cors_origins: list[str] = Field(
        default_factory=list,
        description="Web origins allowed to call the API from a browser (e.g. http://localhost:3000); "
        "empty: no CORS headers, only pages the server itself serves.",
    )
    benchmarks_dir: Path | None = Field(
        default=None,
        description="The folder whose benchmark files evaluation runs may read (names relative to it); "
        "None: paths.data_dir.",
    )
    max_queued_evaluations: int = Field(default=8, ge=1, le=1000, description="Evaluation runs waiting at most.")
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host names requests may address besides loopback and the bound address (e.g. "
        "kg.example.org behind a proxy); others get 400, which stops DNS-rebinding pages.",
    )
    allow_writes: bool = Field(
        default=False, description="Allow POST /api/triples to add triples to the served graph (--allow-writes)."
    )

    @field_validator("benchmarks_dir")
    @classmethod
    def _benchmarks_dir_exists(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_dir():
            raise ValueError(f"{value} is not a folder")
        return value


#: the conventional NEO4J_* variables (NEO4J_USERNAME wins over NEO4J_USER), and the password the local
#: test server (tools/neo4j_server.py, `make neo4j-up`) is started with, so both sides read one variable
NEO4J_ENV_ALIASES = {
    "NEO4J_URI": "uri",
    "NEO4J_USERNAME": "user",
    "NEO4J_USER": "user",
    "NEO4J_PASSWORD": "password",
    "NEO4J_DATABASE": "database",
    "METAKG_NEO4J_PASSWORD": "password",
}


class Settings(BaseSettings):
    """All metakg settings. Build with :func:`load_settings`."""

    model_config = SettingsConfigDict(
        env_prefix="METAKG_",
        env_nested_delimiter="__",
        extra="forbid",
        validate_default=True,
    )

    paths: PathsSettings = Field(default_factory=PathsSettings)
    embedder: EmbedderSettings = Field(default_factory=EmbedderSettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    validation: ValidationSettings = Field(default_factory=ValidationSettings)
    identity: IdentitySettings = Field(default_factory=IdentitySettings)
    extract: ExtractSettings = Field(default_factory=ExtractSettings)
    wikidata: WikidataSettings = Field(default_factory=WikidataSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)
    qa: QASettings = Field(default_factory=QASettings)
    neo4j: Neo4jSettings = Field(default_factory=Neo4jSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    batch: BatchSettings = Field(default_factory=BatchSettings)
    ray: RaySettings = Field(default_factory=RaySettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml_file = _config_file()
        sources: list[PydanticBaseSettingsSource] = [
            init_settings,
            env_settings,
            _AliasEnvSource(settings_cls, "neo4j", NEO4J_ENV_ALIASES),
            _AliasEnvSource(settings_cls, "llm", LLM_ENV_ALIASES),
            _AliasEnvSource(settings_cls, "batch", BATCH_ENV_ALIASES),
            _AliasEnvSource(settings_cls, "ray", RAY_ENV_ALIASES),
        ]
        if toml_file is not None:
            sources.append(_TomlSource(settings_cls, toml_file=toml_file))
        return tuple(sources)


class _TomlSource(TomlConfigSettingsSource):
    """The settings file, read past a UTF-8 byte-order mark (which Windows editors write and TOML parsers
    refuse as an invalid statement at line 1)."""

    def _read_file(self, file_path: Any) -> dict[str, Any]:
        data = file_path.read_bytes()
        return tomllib.loads(data.removeprefix(b"\xef\xbb\xbf").decode("utf-8"))


def _config_file() -> Path | None:
    explicit = os.environ.get("METAKG_CONFIG")
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigError(f"METAKG_CONFIG points at {path}, which is not a file. Fix the path or unset it.")
        return path
    local = Path(DEFAULT_CONFIG_FILE)
    return local if local.is_file() else None


def load_settings(**overrides: Any) -> Settings:
    """Read the settings from the environment and the TOML file.

    Args:
        overrides: section values that win over every other source, e.g. ``embedder={"batch_size": 8}``.

    Returns:
        The validated settings.

    Raises:
        ConfigError: a value is malformed or a configured path does not exist; the message names the setting.
    """
    try:
        loaded = Settings(**overrides)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(
            f"{_config_file()} is not valid TOML: {e}. Fix the file, or give another (--config, METAKG_CONFIG)."
        ) from e
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"{_config_file()} is not UTF-8 text (byte {e.start} is {e.object[e.start : e.start + 1]!r}); TOML files "
            "are UTF-8. Fix the file or unset METAKG_CONFIG."
        ) from e
    except OSError as e:
        raise ConfigError(f"cannot read the settings file {_config_file()}: {e.strerror or e}.") from e
    except SettingsError as e:
        raise ConfigError(f"{_malformed_env() or e}. Check the METAKG_* environment variables.") from e
    except RecursionError:
        raise ConfigError(
            f"a setting nests too deeply to be read: check the METAKG_* environment variables and the settings file "
            f"({_config_file() or 'none'})."
        ) from None
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors(include_url=False)
        )
        raise ConfigError(
            f"invalid metakg settings ({problems}). Check the METAKG_* environment variables and the TOML config file."
        ) from e
    if (misspelt := _one_underscore_env()) is not None:
        raise ConfigError(misspelt)
    return loaded


#: METAKG_ variables with one underscore that are not settings on purpose (read by others, or aliases)
_NOT_SETTINGS = {"METAKG_CONFIG", "METAKG_SHARED_DIR", *LLM_ENV_ALIASES, *NEO4J_ENV_ALIASES}


def _one_underscore_env() -> str | None:
    """What is wrong with a ``METAKG_`` variable that names no setting because of its underscores:
    ``METAKG_<SECTION>_<KEY>`` (one where the scheme has two), ``METAKG_QA_METAKGRAG__N_MAX`` (one, then two),
    ``METAKG__QA__N_MAX`` (two after METAKG), or a ``METAKG_<X>__...`` that names no section at all. Each
    would be ignored without a word, the setting left at its default."""
    sections = Settings.model_fields
    for name in sorted(os.environ):
        upper = name.upper()
        if not upper.startswith("METAKG_") or upper in _NOT_SETTINGS:
            continue
        head, *deeper = upper.removeprefix("METAKG_").split("__")
        if head.lower() in sections:
            continue
        section, _, rest = head.partition("_")
        keys = [rest, *deeper] if rest else deeper
        if _names_setting(section, keys):
            right = "__".join(part for part in (section, *keys) if part)
            return (
                f"{name} is not read: a setting's variable is METAKG_<SECTION>__<KEY>, so this one is METAKG_{right}."
            )
        if deeper:
            return f"{name} is not read: it names no setting (the sections: {', '.join(sections)})."
        # METAKG_SOMETHING, not shaped like a setting: someone else's
    return None


def _names_setting(section: str, keys: list[str]) -> bool:
    """Whether ``METAKG_<section>__<keys...>`` names a setting (``section`` empty: the first key is one)."""
    if not section:
        return bool(keys) and _names_setting(keys[0], keys[1:])
    field = Settings.model_fields.get(section.lower())
    model = field.annotation if field is not None else None
    if not keys or not (isinstance(model, type) and issubclass(model, BaseModel)):
        return False
    if keys[0].lower() in model.model_fields:
        return len(keys) == 1
    return model.model_config.get("extra") == "allow" and len(keys) == 2  # [qa.<strategy>] <key>


def validation_messages(error: ValidationError) -> str:
    """A pydantic validation error's messages, joined, without pydantic's "Value error, " prefixes."""
    return "; ".join(str(err["msg"]).removeprefix("Value error, ") for err in error.errors())


def _malformed_env() -> str | None:
    """Which METAKG_* variable holds malformed JSON for a list or table setting (the environment gives lists and
    tables as JSON), named with the parser's complaint."""
    for name, value in sorted(os.environ.items()):
        if not name.upper().startswith("METAKG_"):
            continue
        try:
            json.loads(value)
            continue
        except ValueError as e:
            complaint = str(e)
        except RecursionError:
            complaint = "it nests too deeply"
        if value.lstrip()[:1] in ("[", "{"):
            return f"{name} is not valid JSON ({complaint[:120]}); lists and tables are given as JSON"
        if _takes_json(name):
            return (
                f"{name} is not valid JSON ({complaint[:120]}); lists and tables are given as JSON, e.g. "
                '\'["first", "second"]\' for a list, \'{"key": 1.5}\' for a table'
            )
    return None


def _takes_json(variable: str) -> bool:
    """Whether ``METAKG_<SECTION>__<KEY>`` names a list or table setting (given as JSON in the environment)."""
    parts = variable.upper().removeprefix("METAKG_").lower().split("__")
    section = Settings.model_fields.get(parts[0]) if len(parts) == 2 else None
    model = section.annotation if section is not None else None
    field = getattr(model, "model_fields", {}).get(parts[1]) if model is not None else None
    return field is not None and typing.get_origin(field.annotation) in (list, dict)


def describe_settings(settings: Settings) -> dict[str, Any]:
    """The effective settings as plain JSON-able data (for ``metakg config show``); secrets are masked,
    including a password written into a URL."""

    def masked(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: masked(v) for k, v in value.items()}
        if isinstance(value, list):
            return [masked(v) for v in value]
        return mask_url(value) if isinstance(value, str) else value

    return masked(settings.model_dump(mode="json"))  # type: ignore[no-any-return]

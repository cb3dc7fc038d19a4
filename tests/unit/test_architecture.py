"""The layers of docs/architecture.md (import-linter) and one module per heavy library."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "metakg"

#: library -> the one module allowed to import it
OWNERS = {
    "great_expectations": {"schemas/expectations.py"},
    "neo4j": {"loaders/neo4j_store.py"},
    "openai": {"llm/openai_client.py", "llm/batch.py"},  # chat calls; provider batches
    "anthropic": {"llm/batch.py"},
    "spacy": {"text_processing.py"},
    "onnxruntime": {"llm/embedder.py"},
    "fastapi": {
        "server/app.py",
        "server/routes/graph.py",
        "server/routes/ask.py",
        "server/routes/evaluations.py",
        "server/routes/pages.py",
    },
    "uvicorn": {"server/app.py"},
    "mcp": {"server/mcp_tools.py"},
    "pypdfium2": {"documents/pdf.py"},
    "docx": {"documents/docx.py"},
    "lxml": {"documents/html.py"},
    "markdown_it": {"documents/markdown.py"},
    "ray": {"llm/ray_engine.py"},  # an optional extra, imported when a run asks for it
    "aiohttp": {"llm/ray_engine.py"},
}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module" and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                names.add(arg.value.split(".")[0])
    return names


def test_layers_contract_holds() -> None:
    result = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports"), "--no-cache"],
        cwd=PACKAGE.parent,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 kept, 0 broken" in result.stdout


def test_heavy_libraries_have_one_owner_module() -> None:
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE).as_posix()
        for library in imported_modules(path) & set(OWNERS):
            assert relative in OWNERS[library], f"{relative} imports {library}; only {OWNERS[library]} may"


def test_importing_the_package_does_nothing_heavy() -> None:
    code = (
        "import sys, metakg, metakg.api, metakg.cli.main;"
        "heavy = {'great_expectations', 'onnxruntime', 'neo4j', 'spacy', 'openai', 'anthropic', 'fastapi', 'uvicorn',"
        " 'mcp', 'ray', 'aiohttp'};"
        "heavy &= set(sys.modules);"
        "print(sorted(heavy))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_the_question_entry_points_take_at_most_eight_parameters() -> None:
    import inspect

    from metakg import api

    entry_points = (
        api.ask, api.answer_over, api.evaluate_benchmark, api.tune_benchmark, api.calibrate_medcog,
        api.build_casebank, api.QASession.__init__, api.QASession.evaluate, api.extract,
    )  # fmt: skip
    crowded = {f.__qualname__: n for f in entry_points if (n := len(inspect.signature(f).parameters)) > 8}
    assert not crowded, f"group the parameters (Benchmark, Runs, StoreChoice, EvalOptions): {crowded}"


def test_no_public_api_function_returns_untyped_json() -> None:
    """Callers read typed results (attributes, ``ok``, ``as_dict()`` for ``--json``), not string keys."""
    import inspect
    import typing

    from metakg import api

    untyped = []
    for name in api.__all__:
        value = getattr(api, name)
        if not inspect.isfunction(value):
            continue
        returned = str(typing.get_type_hints(value).get("return", ""))
        if "dict[" in returned:
            untyped.append(f"{name} -> {returned}")
    assert not untyped, f"return a dataclass with as_dict() instead: {untyped}"


def test_a_typed_result_writes_its_fields_in_order_as_json() -> None:
    from dataclasses import dataclass
    from pathlib import Path

    from metakg.api._shared import JsonResult

    @dataclass(frozen=True)
    class Inner(JsonResult):
        a: int
        b: Path

    @dataclass(frozen=True)
    class Outer(JsonResult):
        where: Path
        inner: Inner
        extra: dict[str, int]
        note: str | None = None

        spread = ("extra",)
        omit_none = ("note",)

    data = Outer(Path("x/y"), Inner(1, Path("z")), {"k": 2, "where": 9}).as_dict()
    assert data == {"where": 9, "inner": {"a": 1, "b": "z"}, "k": 2}
    assert list(data) == ["where", "inner", "k"]  # a spread key already written keeps its place
    assert Outer(Path("x"), Inner(1, Path("z")), {}, "n").as_dict()["note"] == "n"


def test_the_api_loads_each_stage_on_first_use_and_every_name_resolves() -> None:
    """The command line loads without the heavy stages (the QA engine, Great Expectations, SciPy, Neo4j's
    driver): a short command pays only for what it runs. Every public name still resolves."""
    probe = (
        "import sys; from metakg.cli.main import app; import typer.main; typer.main.get_group(app); "
        "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('great_expectations', 'scipy', 'neo4j', 'onnxruntime', 'rdflib', 'openai') or "
        "m.startswith(('metakg.qa_engine', 'metakg.identity.clusters')))))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert loaded == [], loaded
    probe = "from metakg import api; api.TextSource; import metakg.api.extract; print(callable(api.extract))"
    # loading a stage module never hides the stage function of the same name (api.extract)
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout.strip() == "True"
    from metakg import api

    missing = [name for name in api.__all__ if getattr(api, name, None) is None]
    assert not missing and set(api.__all__) <= set(dir(api))
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        api.nothing_here  # noqa: B018

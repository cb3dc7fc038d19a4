"""The documentation stays true: every setting has its row, every command its section, every link and file
reference resolves, and the README keeps its two set-up commands on its first screen."""

from __future__ import annotations

import re
from pathlib import Path

import typer.main

from metakg.cli.main import app
from metakg.config import Settings
from metakg.qa_engine.strategies import REGISTRY

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = {path.name: path.read_text(encoding="utf-8") for path in sorted((ROOT / "docs").glob("*.md"))}


def test_every_setting_has_one_row() -> None:
    table = DOCS["settings.md"]
    keys = [
        (section, name)
        for section, field in Settings.model_fields.items()
        for name in field.annotation.model_fields  # type: ignore[union-attr]
    ]
    keys += [(f"qa.{name}", key) for name in REGISTRY.names for key in REGISTRY.get(name).Settings.model_fields]
    missing = [f"[{s}] {k}" for s, k in keys if table.count(f"| `[{s}] {k}` |") != 1]
    assert not missing, f"settings without exactly one row in docs/settings.md: {missing}"


def test_every_command_is_documented() -> None:
    group = typer.main.get_group(app)
    commands = []
    for name, command in group.commands.items():
        sub = getattr(command, "commands", None)
        commands += [f"metakg {name} {s}" for s in sub] if sub else [f"metakg {name}"]
    documented = " ".join(DOCS.values()).replace("|", " ")
    missing = [c for c in commands if f"## `{c}" not in documented and f"`{c}`" not in documented]
    assert not missing, f"commands not documented in docs/: {missing}"


def test_the_readme_is_short_and_starts_with_the_two_commands() -> None:
    lines = README.splitlines()
    assert len(lines) <= 300
    first_screen = "\n".join(lines[:40])
    assert "make demo" in first_screen and "make test" in first_screen


def test_links_and_file_references_resolve() -> None:
    for name, text in {"README.md": README, **{f"docs/{k}": v for k, v in DOCS.items()}}.items():
        base = ROOT if name == "README.md" else ROOT / "docs"
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if not target.startswith(("http://", "https://")):
                assert (base / target).exists(), f"{name} links to {target}, which does not exist"
        assert "../shared" not in text and "ARCHITECTURE.md" not in text and "SOURCES.md" not in text, name


def test_the_formats_table_is_the_reader_registrys_and_the_cli_offers_the_same() -> None:
    from typing import get_args

    from typer.testing import CliRunner

    from metakg.ingest.datasets import FORMATS, QUESTION_FORMATS, READERS, DatasetFormat, formats_table

    assert get_args(DatasetFormat) == FORMATS  # the type and the registry name the same formats
    assert formats_table() in DOCS["formats.md"]
    assert set(QUESTION_FORMATS) == {r.name for r in READERS if r.questions} and "text" not in QUESTION_FORMATS
    runner = CliRunner()
    for command in (["eval", "--help"], ["tune", "--help"], ["calibrate", "medcog", "--help"]):
        shown = re.sub(r"[\s│]+", " ", runner.invoke(app, command, terminal_width=400).output)
        assert " | ".join(QUESTION_FORMATS) in shown, command
    shown = re.sub(r"[\s│]+", " ", runner.invoke(app, ["extract", "--help"], terminal_width=400).output)
    assert " | ".join(FORMATS) in shown

"""The README documents every setting and every CLI command."""

from __future__ import annotations

from pathlib import Path

import typer.main

from metakg.cli.main import app
from metakg.config import Settings

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def test_every_setting_is_in_the_settings_table() -> None:
    table = README.split("## Settings", 1)[1].split("\n## ", 1)[0]
    missing = [
        f"[{section}] {name}"
        for section, field in Settings.model_fields.items()
        for name in field.annotation.model_fields  # type: ignore[union-attr]
        if f"`[{section}] " not in table or f"{name}`" not in table
    ]
    assert not missing, f"settings missing from the README table: {missing}"


def test_every_command_has_a_section() -> None:
    group = typer.main.get_group(app)
    commands = []
    for name, command in group.commands.items():
        sub = getattr(command, "commands", None)
        commands += [f"metakg {name} {s}" for s in sub] if sub else [f"metakg {name}"]
    documented = README.replace("|", " ")
    missing = [c for c in commands if c not in documented]
    assert not missing, f"commands without a README section: {missing}"

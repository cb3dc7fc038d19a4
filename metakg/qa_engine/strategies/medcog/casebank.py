"""MedCoG's episodic memory: a case bank of (question, SCoT trajectory, reward) with question embeddings.

A bank is a folder: ``cases.parquet`` (``id``, ``question``, ``trajectory``, ``reward`` in {0, 1},
``source``, ``vector``: the question's unit embedding) and ``manifest.json`` (format version, embedding
model and dimension, case count). Banks built with the same model merge (a case id seen twice keeps the
later one). :meth:`CaseBank.top` returns the ``k`` cases whose questions are most similar to a new one;
the prompt shows each with its outcome, so the model can follow the right ones and avoid the wrong ones.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from metakg.errors import InputDataError
from metakg.llm.embedder import Embedder
from metakg.schemas.bundle_dir import bundle_path, replace

FORMAT_VERSION = 1
SCHEMA = {
    "id": pl.String(),
    "question": pl.String(),
    "trajectory": pl.String(),
    "reward": pl.Int8(),
    "source": pl.String(),
    "vector": pl.List(pl.Float32()),
}


@dataclass(frozen=True)
class Case:
    """One past question, how it was reasoned, whether that was right, and its similarity to the new one."""

    id: str
    question: str
    trajectory: str
    reward: int
    similarity: float = 0.0

    def render(self) -> str:
        """The case as the SCoT prompt shows it."""
        outcome = "correct" if self.reward else "wrong"
        return f"Question: {self.question.strip()}\n{self.trajectory.strip()}\n(This reasoning was {outcome}.)"


class CaseBank:
    """Cases with their question vectors, made with one embedding model."""

    def __init__(self, cases: pl.DataFrame, model: str) -> None:
        """A bank over ``cases`` (:data:`SCHEMA`) embedded with ``model``."""
        self.cases = cases.select(list(SCHEMA)).cast(SCHEMA)  # type: ignore[arg-type]
        self.model = model
        self._matrix = (
            np.asarray(self.cases["vector"].to_list(), dtype=np.float32)
            if self.cases.height
            else np.zeros((0, 0), dtype=np.float32)
        )

    def __len__(self) -> int:
        return self.cases.height

    @classmethod
    def build(
        cls, rows: Sequence[tuple[str, str, str, int]], embedder: Embedder, *, source: str = "", model: str = ""
    ) -> CaseBank:
        """A bank from (id, question, trajectory, reward) rows, embedding the questions."""
        vectors = embedder.embed([q for _, q, _, _ in rows]) if rows else np.zeros((0, embedder.dim))
        frame = pl.DataFrame(
            {
                "id": [r[0] for r in rows],
                "question": [r[1] for r in rows],
                "trajectory": [r[2] for r in rows],
                "reward": [int(bool(r[3])) for r in rows],
                "source": source,
                "vector": [v.tolist() for v in vectors],
            },
            schema=SCHEMA,
        )
        return cls(frame, model or getattr(embedder, "name", "unknown"))

    def merge(self, other: CaseBank) -> CaseBank:
        """Both banks' cases; a case id in both keeps ``other``'s.

        Raises:
            InputDataError: the banks were embedded with different models.
        """
        if len(self) and len(other) and self.model != other.model:
            raise InputDataError(
                f"cannot merge case banks of different embedding models ({self.model}, {other.model})."
            )
        merged = pl.concat([self.cases, other.cases]).unique("id", keep="last", maintain_order=True)
        return CaseBank(merged, other.model if len(other) else self.model)

    def top(self, vector: np.ndarray, k: int) -> list[Case]:
        """The ``k`` cases most similar to a question's unit ``vector``, most similar first (ties: bank order)."""
        if not len(self):
            return []
        sims = self._matrix @ np.asarray(vector, dtype=np.float32)
        order = np.argsort(-sims, kind="stable")[:k]
        rows = self.cases.select("id", "question", "trajectory", "reward")
        return [Case(*rows.row(int(i)), similarity=round(float(sims[int(i)]), 4)) for i in order]  # type: ignore[misc]

    def write(self, folder: Path) -> None:
        """Write ``cases.parquet`` and ``manifest.json`` as the new version of ``folder``, swapped in whole (a
        kill or a full disk leaves the old bank or the new one)."""
        manifest = {
            "format": "metakg-casebank",
            "version": FORMAT_VERSION,
            "model": self.model,
            "dim": int(self._matrix.shape[1]) if len(self) else 0,
            "cases": len(self),
            "correct": int(self.cases["reward"].sum()) if len(self) else 0,
        }

        def build(staging: Path) -> None:
            self.cases.write_parquet(staging / "cases.parquet")
            (staging / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")

        folder.parent.mkdir(parents=True, exist_ok=True)
        replace(bundle_path(folder), build, writes=("cases.parquet", "manifest.json"))

    @classmethod
    def read(cls, folder: Path, *, model: str | None = None) -> CaseBank:
        """The bank in ``folder``; with ``model``, it must have been embedded with that model.

        Raises:
            InputDataError: no bank there (a bundle, say), a damaged one, a format version this metakg does not
                read, or a bank of another embedding model.
        """
        manifest_path = folder / "manifest.json"
        for name in ("manifest.json", "cases.parquet"):
            if (folder / name).is_symlink():  # never read (or replaced) through a link
                raise InputDataError(
                    f"{folder / name} is a symbolic link: a case bank's files are its folder's own. Remove the "
                    "link, or give another folder."
                )
        if not manifest_path.is_file() or not (folder / "cases.parquet").is_file():
            raise InputDataError(
                f"{folder} is not a case bank (no manifest.json and cases.parquet); build one first.",
                cli_fix="metakg casebank build",
            )
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise InputDataError(f"{manifest_path} is not readable JSON ({e}); build the case bank again.") from e
        if not isinstance(manifest, dict) or manifest.get("format") != "metakg-casebank":
            raise InputDataError(
                f"{folder} is not a case bank: its manifest.json is not a case bank's (a KG bundle?). Point "
                "[qa.medcog] casebank at a folder a case-bank build wrote.",
                cli_fix="metakg casebank build",
            )
        if manifest.get("version") != FORMAT_VERSION:
            raise InputDataError(f"{folder}: case bank format {manifest.get('version')!r} is not {FORMAT_VERSION}.")
        built_with = str(manifest.get("model", ""))
        if model is not None and built_with and built_with != model:
            raise InputDataError(
                f"the case bank {folder} was embedded with {built_with}, not {model} (the embedder configured now): "
                "its similarities would mean nothing. Build it again with this embedder, or configure that one."
            )
        try:
            cases = pl.read_parquet(folder / "cases.parquet")
            missing = [c for c in SCHEMA if c not in cases.columns]
            if missing:
                raise InputDataError(f"{folder / 'cases.parquet'} lacks the columns {missing}; build the bank again.")
            return cls(cases, built_with)
        except (OSError, pl.exceptions.PolarsError, ValueError, TypeError) as e:
            raise InputDataError(f"{folder / 'cases.parquet'} cannot be read ({e}); build the case bank again.") from e

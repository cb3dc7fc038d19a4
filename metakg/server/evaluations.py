"""Evaluation runs of ``metakg serve``: started by a request, run one at a time in a background thread over the
served store, their progress, summary and comparison kept for the process (their answers in a folder)."""

from __future__ import annotations

import queue
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from metakg import api
from metakg.config import Settings
from metakg.errors import MetakgError, ResourceBusy, UsageError

Status = Literal["queued", "running", "done", "failed", "cancelled"]


class Cancelled(Exception):
    """Raised from the progress callback to stop a run; the answers written so far stay in its folder."""


@dataclass
class EvaluationRun:
    """One evaluation: what was asked for, where it stands, and what it found."""

    id: str
    request: dict[str, Any]
    out_dir: Path
    status: Status = "queued"
    created: float = field(default_factory=time.time)
    started: float | None = None
    finished: float | None = None
    progress: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] | None = None
    comparison: str | None = None
    error: str | None = None
    cancel: threading.Event = field(default_factory=threading.Event)

    def view(self, *, full: bool = True) -> dict[str, Any]:
        """The run as JSON: id, status, times, progress; with ``full`` the request, summary and comparison."""
        shown: dict[str, Any] = {
            "id": self.id,
            "status": self.status,
            "created": self.created,
            "started": self.started,
            "finished": self.finished,
            "progress": self.progress,
            "error": self.error,
        }
        if full:
            shown |= {"request": self.request, "summary": self.summary, "comparison": self.comparison}
        return shown


class Evaluations:
    """Evaluation runs over one store, one at a time in one worker thread, at most ``max_queued`` waiting.

    Benchmark files are read only from under ``benchmarks_dir``; each run writes its answers, summary and
    comparison into ``runs_dir/<id>`` (the same folder ``metakg eval`` writes)."""

    def __init__(
        self,
        settings: Settings,
        store: Any,
        *,
        benchmarks_dir: Path | None,
        runs_dir: Path,
        llm: api.SharedLLM | None = None,
        guard: Callable[[], AbstractContextManager[None]] = nullcontext,
        max_queued: int = 8,
    ) -> None:
        self._settings = settings
        self._store = store
        self._llm = llm
        self._guard = guard
        self._benchmarks = benchmarks_dir.resolve() if benchmarks_dir is not None else None
        self._runs_dir = runs_dir
        self._max_queued = max_queued
        self._runs: dict[str, EvaluationRun] = {}
        self._waiting: queue.Queue[EvaluationRun | None] = queue.Queue()
        self._lock = threading.Lock()
        self._worker = threading.Thread(target=self._work, name="metakg-evaluations", daemon=True)
        self._worker.start()

    def benchmark_path(self, name: str) -> Path:
        """The benchmark file ``name`` under ``benchmarks_dir``.

        Raises:
            UsageError: no benchmarks folder is configured, the name leaves it, or no such file.
        """
        if self._benchmarks is None:
            raise UsageError(
                "evaluations read benchmark files from server.benchmarks_dir (or paths.data_dir); set one of them."
            )
        if "\x00" in name:
            raise UsageError("benchmark: a file name holds no NUL character.")
        try:
            path = (self._benchmarks / name).resolve()
        except (RuntimeError, OSError) as e:  # a loop of links
            raise UsageError(f"benchmark {name!r}: it cannot be resolved ({e}).") from None
        if Path(name).is_absolute() or not path.is_relative_to(self._benchmarks):
            raise UsageError(f"benchmark {name!r}: give a path inside the benchmarks folder, relative to it.")
        if not path.is_file():
            raise UsageError(f"benchmark {name!r}: no such file in the benchmarks folder.")
        return path

    def start(self, request: dict[str, Any]) -> EvaluationRun:
        """Queue a run of ``request`` (benchmark, format, strategies, ablations, limit, skip, budget, use_llm).

        Raises:
            UsageError: a bad benchmark path, unknown strategy or switch, or too many runs waiting.
        """
        self.benchmark_path(request["benchmark"])
        for name in request["strategies"]:
            api.create_strategy(self._settings, name)  # an unknown strategy is refused now, not in the worker
        with self._lock:
            waiting = sum(run.status == "queued" for run in self._runs.values())
            if waiting >= self._max_queued:
                raise ResourceBusy(f"{waiting} evaluations are waiting already; try again when one has started.")
            run_id = uuid.uuid4().hex[:12]
            run = EvaluationRun(id=run_id, request=request, out_dir=self._runs_dir / run_id)
            self._runs[run_id] = run
        self._waiting.put(run)
        return run

    def get(self, run_id: str) -> EvaluationRun | None:
        return self._runs.get(run_id)

    def all(self) -> list[EvaluationRun]:
        return sorted(self._runs.values(), key=lambda run: run.created)

    def cancel(self, run_id: str) -> EvaluationRun | None:
        """Ask a queued or running run to stop; a running one stops before its next question."""
        run = self._runs.get(run_id)
        if run is not None and run.status in ("queued", "running"):
            run.cancel.set()
        return run

    def close(self, timeout: float = 30.0) -> None:
        """Cancel every run and wait up to ``timeout`` seconds for the worker (before the store closes)."""
        for run in self._runs.values():
            run.cancel.set()
        self._waiting.put(None)
        self._worker.join(timeout)

    def _work(self) -> None:
        while (run := self._waiting.get()) is not None:
            if run.cancel.is_set():
                run.status, run.finished = "cancelled", time.time()
                continue
            run.status, run.started = "running", time.time()
            try:
                self._run(run)
                run.status = "done"
            except Cancelled:
                run.status = "cancelled"
            except MetakgError as e:
                run.status, run.error = "failed", str(e)
            except Exception as e:  # a bug must not kill the worker; the run says what happened
                run.status, run.error = "failed", f"{type(e).__name__}: {e}"
            run.finished = time.time()

    def _run(self, run: EvaluationRun) -> None:
        def tick(label: str, done: int, total: int) -> None:
            if run.cancel.is_set():
                raise Cancelled
            run.progress = {"run": label, "done": done, "total": total}

        with self._guard():  # no write changes the graph under a run
            result = self._evaluate(run, tick)
        run.summary = result.summary
        run.comparison = result.table()
        run.progress |= {"questions": result.questions, "rejected": result.rejected}

    def _evaluate(self, run: EvaluationRun, tick: Callable[[str, int, int], None]) -> api.EvaluationResult:
        request = run.request
        return api.evaluate_benchmark(
            self._settings,
            api.Benchmark(
                self.benchmark_path(request["benchmark"]), request["format"], request["limit"], request["skip"]
            ),
            run.out_dir,
            api.Runs(request["strategies"], request["ablations"]),
            over=self._store,
            runner=api.llm_runner(use_llm=request["use_llm"], llm=self._llm),
            options=api.EvalOptions(budget=request["budget"], tick=tick),
        )

"""Evaluations: start a run of a benchmark over the served graph, list the runs, read one, cancel one."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Request
from fastapi import Path as Path_

from metakg.server.evaluations import EvaluationRun, Evaluations
from metakg.server.examples import example
from metakg.server.models import EvaluationRequest, error_responses
from metakg.server.served import ServedGraph


def router(served: ServedGraph) -> APIRouter:
    """The evaluation routes over ``served``."""
    router = APIRouter()

    def evaluations() -> Evaluations:
        return served.evaluations

    def evaluation(run_id: str) -> EvaluationRun:
        run = evaluations().get(run_id)
        if run is None:
            raise HTTPException(status_code=404, detail=f"no evaluation {run_id!r}; GET /api/evaluations lists them")
        return run

    @router.post(
        "/api/evaluations",
        status_code=202,
        responses=error_responses(408, 413, 503) | example("post", "/api/evaluations", 202),
    )
    def start_evaluation(request: EvaluationRequest, http: Request) -> dict[str, Any]:
        """Start an evaluation run in the background (one runs at a time, the others wait): answers and
        metrics as ``metakg eval`` writes them. Poll ``GET /api/evaluations/{id}`` for its status."""
        run = evaluations().start(request.model_dump())
        mounted = http.scope.get("root_path", "")  # /graphs/NAME for a graph served beside others
        return run.view(full=False) | {"url": f"{mounted}/api/evaluations/{run.id}"}

    @router.get("/api/evaluations", responses=error_responses() | example("get", "/api/evaluations"))
    def list_evaluations() -> list[dict[str, Any]]:
        """Every evaluation run of this process, oldest first: status and progress."""
        return [run.view(full=False) for run in evaluations().all()]

    @router.get(
        "/api/evaluations/{run_id}", responses=error_responses(404) | example("get", "/api/evaluations/{run_id}")
    )
    def get_evaluation(run_id: Annotated[str, Path_(max_length=64)]) -> dict[str, Any]:
        """One run: status (queued, running, done, failed, cancelled), progress, and when done its summary
        (per run label) and comparison table."""
        return evaluation(run_id).view()

    @router.delete(
        "/api/evaluations/{run_id}", responses=error_responses(404) | example("delete", "/api/evaluations/{run_id}")
    )
    def cancel_evaluation(run_id: Annotated[str, Path_(max_length=64)]) -> dict[str, Any]:
        """Cancel a waiting or running run (a running one stops before its next question; its answers so
        far stay in its folder)."""
        evaluations().cancel(run_id)
        return evaluation(run_id).view(full=False)

    return router

"""The server's app in process (FastAPI's TestClient): what the real-process tests cannot provoke."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from metakg import api
from metakg.config import load_settings
from metakg.server.app import create_app
from tests.conftest import small_bundle


def test_a_bug_while_streaming_ends_the_stream_with_an_error_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = tmp_path / "kg"
    api.write_validated(bundle, small_bundle(), load_settings())

    def broken(*_args: Any, **_kwargs: Any) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(api, "answer_over", broken)
    with TestClient(create_app(load_settings(), bundle=bundle), base_url="http://127.0.0.1") as client:
        response = client.post("/api/ask/stream", json={"question": "What does aspirin treat?", "use_llm": False})
        assert response.status_code == 200
        assert "event: error" in response.text and "internal error (RuntimeError)" in response.text
        assert "a bug" not in response.text  # the details stay in the server's log
        assert client.get("/api/health").json()["status"] == "ok"  # the slot was given back

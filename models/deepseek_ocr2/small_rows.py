"""Hand-written CPU kernels for the few-row products of a decode step, built once with the system C++
compiler and called through ``ctypes``; None (the caller keeps its torch path) where they cannot be.

Per layer of a decode step (1-16 rows, float32, one thread) they replace ~40 torch calls by five:
RMSNorm + q/k/v projections + rotary embedding (:meth:`SmallRows.attn_in`), the decode attention
over the left-padded batched cache (:meth:`SmallRows.attention`: each row's keys and values read
once, padding positions skipped, query and output in registers), ``o_proj`` + residual + RMSNorm
(:meth:`SmallRows.attn_out`), the routed experts of an MoE block (:meth:`SmallRows.moe`, instead of
transformers' sort / gather / per-expert products / weighting / un-permutation) and a gated dense
MLP (:meth:`SmallRows.mlp`: shared experts, dense layers). They run on one thread, so the decode step uses them only
where torch runs one intra-op thread (``OMP_NUM_THREADS=1``, the local stack's default); with more
threads torch's parallel products are used. Products read one weight row per pass
for all activation rows (8 rows per pass; more rows re-read the weight from cache), a single linear
stream that reads a cold weight at the speed of :mod:`~models.deepseek_ocr2.cache_warm`'s pass, so
no separate pass is needed.

Numerics: float32 throughout; each product output accumulated in a fixed order (two 16-lane FMA
accumulators over alternating 16-float chunks, then their sum and a lane sum: 8 + 8 lanes, 4 + 4,
then (0 + 2) + (1 + 3)), ``silu(v) = v / (1 + exp(-v))``,
softmax with max subtraction. Results differ from the MKL / SDPA path by rounding only (~3e-6
relative on the bench model's logits) and a row's result does not depend on which other rows share
the batch; greedy tokens are checked against transformers' ``generate`` by the tests and by
bench/decoder_batching.py (``same tokens``).

Build: ``g++ -O3 -march=native -shared -fPIC`` of :data:`~models.deepseek_ocr2.small_rows_src.SOURCE`
(AVX-512 intrinsics where the CPU has AVX-512, else the AVX2 + FMA build of
:mod:`~models.deepseek_ocr2.small_rows_avx2`, which gives the same floats bit for bit) into
``$INKSTREAM_KERNEL_CACHE`` (default ``~/.cache/inkstream/kernels``), the file named by a hash of
source, flags and the CPU's model and feature flags, written under a temporary name and renamed
(concurrent processes are safe); a later process loads the cached library (no compiler run; a build
took 2-5 s on the bench machine, 2 s of CPU on an AVX2 EPYC). ``INKSTREAM_SMALL_ROWS=0`` switches the
kernels off. Any failure (no compiler, neither AVX-512 nor AVX2 + FMA, unwritable cache) logs one
warning and returns None; where torch reports neither capability
(``torch.backends.cpu.get_cpu_capability()``) no build is tried.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import pathlib
import subprocess
import tempfile

import torch

from models.deepseek_ocr2.small_rows_src import SOURCE

log = logging.getLogger("inkstream.models.small_rows")

FLAGS = ["-O3", "-march=native", "-shared", "-fPIC", "-std=c++17"]
# Rows at most for which the decode step uses these kernels: weights are re-read once per 8 rows, and
# from 16 rows on MKL's blocked products reuse each weight line better.
MAX_ROWS = 16
# Largest head dim of the attention kernel (query and output held in 8 16-float vectors).
MAX_HEAD_DIM = 128
# torch's CPU capabilities (``torch.backends.cpu.get_cpu_capability()``) the kernels are built for.
CAPABILITIES = ("AVX512", "AVX2")

_I64, _F32, _PTR = ctypes.c_int64, ctypes.c_float, ctypes.c_void_p
_SIGNATURES = {
    "ik_linear": [_PTR, _I64, _PTR, _I64, _I64, _PTR],
    "ik_mlp": [_PTR, _I64, _I64, _PTR, _PTR, _PTR, _I64, _PTR],
    "ik_moe": [_PTR, _I64, _I64, _PTR, _PTR, _I64, _PTR, _PTR, _I64, _I64, _PTR],
    "ik_attn_in": [_PTR, _I64, _I64, _PTR, _F32, _PTR, _PTR, _PTR, _I64, _I64, _PTR, _PTR, _PTR, _PTR, _PTR],
    "ik_attn_out": [_PTR, _I64, _I64, _PTR, _I64, _PTR, _PTR, _F32, _PTR],
    "ik_attn": [_PTR, _PTR, _PTR, _I64, _I64, _I64, _PTR, _I64, _I64, _I64, _I64, _F32, _PTR],
}


def _cache_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("INKSTREAM_KERNEL_CACHE") or pathlib.Path.home() / ".cache/inkstream/kernels")


def _cpu_id() -> str:
    """The CPU's model and feature flags (``/proc/cpuinfo``; empty where unreadable): part of the
    cached library's name, so a cache directory shared by different CPUs never hands one a
    ``-march=native`` build for another.
    """
    try:
        lines = pathlib.Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return ""
    return "\n".join(sorted({ln for ln in lines if ln.startswith(("model name", "flags"))}))


def _build(out: pathlib.Path) -> None:
    """Compile :data:`SOURCE` to ``out`` (atomic rename). Raises OSError / CalledProcessError."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        src, lib = pathlib.Path(tmp, "k.cpp"), pathlib.Path(tmp, "k.so")
        src.write_text(SOURCE)
        subprocess.run(["g++", *FLAGS, "-o", str(lib), str(src)], check=True, capture_output=True, timeout=300)
        os.replace(lib, out)


@functools.cache
def load() -> SmallRows | None:
    """The kernels of this process (built on first use, then cached on disk), or None where they are
    switched off or cannot be built or loaded (see the module docstring).
    """
    if os.environ.get("INKSTREAM_SMALL_ROWS", "1") == "0":
        return None
    if torch.backends.cpu.get_cpu_capability() not in CAPABILITIES:
        return None
    key = hashlib.sha256("\0".join([SOURCE, " ".join(FLAGS), _cpu_id()]).encode()).hexdigest()[:16]
    path = _cache_dir() / f"small_rows-{key}.so"
    try:
        if not path.exists():
            _build(path)
        return SmallRows(ctypes.CDLL(str(path)))
    except (OSError, subprocess.SubprocessError) as e:
        detail = getattr(e, "stderr", b"") or b""
        log.warning("small-row decode kernels unavailable, using torch: %s %s", e, detail[-500:])
        return None


def _p(t: torch.Tensor) -> int:
    return t.data_ptr()


class SmallRows:
    """Typed wrappers over the loaded library. Every tensor argument: CPU, float32 (ids int64,
    mask bool), contiguous where stated; shapes are checked by the callers, not here.
    """

    def __init__(self, lib: ctypes.CDLL):
        for name, argtypes in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = argtypes, None
        self._lib = lib

    def linear(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """``x`` [n, K] contiguous, ``w`` [N, K] contiguous -> ``x @ w.T`` [n, N]."""
        y = x.new_empty(x.shape[0], w.shape[0])
        self._lib.ik_linear(_p(x), x.shape[0], _p(w), w.shape[0], w.shape[1], _p(y))
        return y

    def attn_in(self, h: torch.Tensor, norm_w: torch.Tensor, eps: float, wq: torch.Tensor, wk: torch.Tensor,
                wv: torch.Tensor, heads: int, cos: torch.Tensor, sin: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """A layer's attention input: ``x = RMSNorm(h)`` (``h`` [n, H], ``norm_w`` [H], ``eps``), then
        ``q`` / ``k`` / ``v`` = ``x @ W.T`` (``wq`` / ``wk`` / ``wv`` [heads * d, H]) with the rotary
        embedding (``cos`` / ``sin`` [n, d], rotate-half layout) applied to ``q`` and ``k``
        -> three [n, heads, d] tensors.
        """
        n, H = h.shape
        d = wq.shape[0] // heads
        q, k, v = (h.new_empty(n, heads, d) for _ in range(3))
        self._lib.ik_attn_in(_p(h), n, H, _p(norm_w), eps, _p(wq), _p(wk), _p(wv), heads, d, _p(cos), _p(sin),
                             _p(q), _p(k), _p(v))
        return q, k, v

    def attn_out(self, a: torch.Tensor, wo: torch.Tensor, h: torch.Tensor, norm_w: torch.Tensor,
                 eps: float) -> torch.Tensor:
        """A layer's attention output: ``h`` [n, H] += ``a`` [n, K] @ ``wo.T`` (``wo`` [H, K]) in place,
        then returns ``RMSNorm(h)`` [n, H] (``norm_w`` [H], ``eps``), the MLP's input.
        """
        x = torch.empty_like(h)
        self._lib.ik_attn_out(_p(a), a.shape[0], a.shape[1], _p(wo), wo.shape[0], _p(h), _p(norm_w), eps, _p(x))
        return x

    def mlp(self, x: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, down: torch.Tensor) -> torch.Tensor:
        """Gated MLP ``down(silu(gate(x)) * up(x))``: ``x`` [n, H], ``gate`` / ``up`` [I, H], ``down``
        [H, I] (nn.Linear weights, contiguous) -> [n, H].
        """
        out = torch.empty_like(x)
        self._lib.ik_mlp(_p(x), x.shape[0], x.shape[1], _p(gate), _p(up), _p(down), gate.shape[0], _p(out))
        return out

    def moe(self, x: torch.Tensor, top: torch.Tensor, weights: torch.Tensor, gate_up: torch.Tensor,
            down: torch.Tensor) -> torch.Tensor:
        """Routed experts: ``x`` [T, H], ``top`` int64 [T, k], ``weights`` float32 [T, k], ``gate_up``
        [E, 2I, H], ``down`` [E, H, I] (all contiguous) -> [T, H], the top-k weighted sum of the
        experts' ``down(silu(gate) * up)``, summed in top-k order as transformers does.
        """
        out = torch.empty_like(x)
        T, k = top.shape
        self._lib.ik_moe(_p(x), T, x.shape[1], _p(top), _p(weights), k, _p(gate_up), _p(down),
                         gate_up.shape[0], down.shape[2], _p(out))
        return out

    def attention(self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor,
                  scale: float) -> torch.Tensor:
        """Decode attention: ``q`` [B, heads, d] contiguous; ``keys`` / ``values`` [B, heads, S, d] with
        the same strides and unit stride on d (views of the cache's buffers); ``mask`` bool [B, S]
        contiguous (True = attend; each row attends at least one position) -> [B, heads * d]. Raises
        ValueError for d > :data:`MAX_HEAD_DIM` or keys / values strides that differ.
        """
        B, nh, S, d = keys.shape
        if d > MAX_HEAD_DIM or keys.stride() != values.stride() or keys.stride(-1) != 1:
            raise ValueError(f"keys/values strides {keys.stride()} / {values.stride()} not supported")
        out = q.new_empty(B, nh * d)
        sb, sh, ss, _ = keys.stride()
        self._lib.ik_attn(_p(q), _p(keys), _p(values), sb, sh, ss, _p(mask), B, nh, S, d, scale, _p(out))
        return out

"""Stream a weight into the CPU caches before a matrix product with few rows (decode steps).

A decode step multiplies 1-16 activation rows by each weight matrix, so the step is bound by
reading the weights, not by arithmetic. On the bench machine the BLAS kernels behind
``F.linear`` read a cold weight far below the memory bandwidth that one linear pass over it gets,
presumably because the hardware prefetcher follows a linear sweep but not the kernels' blocked
order. Measured there (AMD EPYC with AVX-512, one thread, torch 2.14 with MKL 2024.2; a cold
fp32 weight [512, 512] = 1.05 MB; thread CPU microseconds per call, median of 7 x 48 calls over
48 distinct weights, load ~8 on 2 cores):

==============================  =====  =====  =====  =====  =====
rows of the product               1      8      16     32     64
==============================  =====  =====  =====  =====  =====
``F.linear``                      140    183    228    316    465
``w.amax()`` then the same call   108    157    195    294    449
``w.amax()`` alone                 64
==============================  =====  =====  =====  =====  =====

(for [512, 256]: 80 -> 51 at 1 row, 117 -> 76 at 8; ``w.sum()`` as the pass: a little slower than
``amax``, same effect.) The pass streams the weight in at ~16-23 GB/s and the product that follows
finds it in cache. The product itself is the same call on the same tensors, so results are
bit-identical with and without the pass; only the time changes. Above ~16 rows the product reuses
each weight line across row blocks and the pass no longer pays, hence :data:`WARM_MAX_ROWS`. This is a
property of the machine and its BLAS: where small products already stream their weight at full
bandwidth the pass only costs its ~60 us per MB (the ``amax`` row; ~4 ms of a 66 MB decode step);
set :data:`WARM_MAX_ROWS` to 0 there to switch it off. A decode step of bench/decoder_batching.py's
model, measured in one process alternating steps with and without the pass (load ~8-10): 8 rows
21.0-22.3 -> 18.2-19.3 ms, 1 row 9.6-9.8 -> 7.7-8.1 ms.
"""

from __future__ import annotations

import torch
from torch import nn

# Products with at most this many rows get their weight streamed first (see the module table);
# 0 switches the pass off.
WARM_MAX_ROWS = 16


def warm(*weights: torch.Tensor) -> None:
    """Read ``weights`` once, sequentially (``Tensor.amax``, result discarded), so that a product
    that follows finds them in cache. No effect on any value. Only CPU tensors are read: on an
    accelerator the pass would be one more kernel launch and a full read of the weight for nothing.
    """
    for w in weights:
        if w.device.type == "cpu":
            w.amax()


def linear(layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """``layer(x)`` (x [..., in] -> [..., out]), the weight warmed first when ``x`` holds at most
    :data:`WARM_MAX_ROWS` rows. Bit-identical to ``layer(x)``.
    """
    if x.numel() // x.shape[-1] <= WARM_MAX_ROWS:
        warm(layer.weight)
    return layer(x)

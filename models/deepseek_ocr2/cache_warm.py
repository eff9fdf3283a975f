"""Stream a weight into the CPU caches before a matrix product with few rows (decode steps).

A decode step multiplies 1-16 activation rows by each weight matrix, so the step is bound by
reading the weights, not by arithmetic. On the bench machine the BLAS kernels behind
``F.linear`` read a cold weight far below the memory bandwidth that one linear pass over it gets,
presumably because the hardware prefetcher follows a linear sweep but not the kernels' blocked
order. Measured there (AMD EPYC with AVX-512, one thread, torch 2.14 with MKL 2024.2; a cold
fp32 weight [512, 512] = 1.05 MB; thread CPU microseconds per call, median of 5 x 48 calls, under
load ~13 on 2 cores):

==========================  =====  =====  =====  =====  =====
rows of the product          1      8      16     32     64
==========================  =====  =====  =====  =====  =====
``F.linear``                 122    165    217    298    474
``w.sum()`` then same call    77    151    203    296    444
``w.sum()`` alone             45
==========================  =====  =====  =====  =====  =====

(and for [512, 256]: 78 -> 49 at 1 row, 116 -> 75 at 8.) ``w.sum()`` reads the weight at
~23 GB/s; the product that follows finds it in cache. The product itself is the same call on the
same tensors, so results are bit-identical with and without the warm-up; only the time changes.
Above ~16 rows the product reuses each weight line across row blocks and the extra pass no
longer pays, hence :data:`WARM_MAX_ROWS`. On a machine whose BLAS already streams small products
at full bandwidth the pass costs ~45 us per MB (the ``w.sum()`` row): a few per cent of a step.
"""

from __future__ import annotations

import torch
from torch import nn

# Products with at most this many rows get their weight streamed first (see the module table).
WARM_MAX_ROWS = 16


def warm(*weights: torch.Tensor) -> None:
    """Read ``weights`` once, sequentially (``Tensor.sum``, result discarded), so that a product
    that follows finds them in cache. No effect on any value.
    """
    for w in weights:
        w.sum()


def linear(layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """``layer(x)`` (x [..., in] -> [..., out]), the weight warmed first when ``x`` holds at most
    :data:`WARM_MAX_ROWS` rows. Bit-identical to ``layer(x)``.
    """
    if x.numel() // x.shape[-1] <= WARM_MAX_ROWS:
        warm(layer.weight)
    return layer(x)

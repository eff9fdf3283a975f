"""glibc malloc tuning of the long-lived service processes: a fixed mmap threshold.

glibc serves allocations of at least ``M_MMAP_THRESHOLD`` bytes with their own ``mmap`` (returned to
the system on ``free``) and smaller ones from its heaps, which keep freed memory for reuse. The
threshold is dynamic by default (mallopt(3)): each time an mmapped block is freed, the threshold
rises to that block's size, up to 32 MiB on 64-bit systems. In a service that allocates page images
and activations of a few MiB to a few tens of MiB per batch from several threads, the heaps then
absorb those large blocks, fragment, and the peak resident set depends on allocation order: the
encoder's peak over a 200-page document varied between 1.2 and 1.4 GiB from run to run
(bench/memory.py). Fixing the threshold (which also turns the dynamic adjustment off) keeps large
blocks out of the heaps. 16 MiB was chosen by measurement: at 1 MiB the peaks were flat too but the
200-page run took 60 % longer (an mmap / page-fault round trip per mid-size tensor); at 16 MiB the
peaks stayed flat at the default's speed.

Set ``INKSTREAM_MALLOC_MMAP_THRESHOLD_BYTES`` to another size, or 0 to keep glibc's behaviour; a
``MALLOC_MMAP_THRESHOLD_`` environment variable set by the operator (glibc's own tunable) wins.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys

log = logging.getLogger("inkstream.malloc")

M_MMAP_THRESHOLD = -3  # mallopt(3) parameter number (glibc malloc.h)
DEFAULT_MMAP_THRESHOLD_BYTES = 16 * 1024 * 1024
ENV = "INKSTREAM_MALLOC_MMAP_THRESHOLD_BYTES"


def pin_mmap_threshold() -> int:
    """Fix glibc's mmap threshold (see the module docstring). Returns the threshold set in bytes, or
    0 when nothing was changed (not glibc, disabled, or left to ``MALLOC_MMAP_THRESHOLD_``).
    Raises ValueError for a malformed ``INKSTREAM_MALLOC_MMAP_THRESHOLD_BYTES``.
    """
    raw = os.environ.get(ENV, "")
    try:
        nbytes = int(raw) if raw.strip() else DEFAULT_MMAP_THRESHOLD_BYTES
    except ValueError:
        raise ValueError(f"{ENV} must be a whole number of bytes, got {raw!r}") from None
    if nbytes <= 0 or "MALLOC_MMAP_THRESHOLD_" in os.environ or not sys.platform.startswith("linux"):
        return 0
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # musl or another libc: nothing to tune
        return 0
    if mallopt(M_MMAP_THRESHOLD, ctypes.c_int(nbytes)) != 1:
        log.warning("mallopt(M_MMAP_THRESHOLD, %d) was refused", nbytes)
        return 0
    return nbytes


def trim() -> bool:
    """Give the heaps' free memory back to the system (glibc ``malloc_trim(0)``, malloc_trim(3)).

    Freed blocks below the mmap threshold stay in glibc's heaps (one arena per thread that
    allocated), so a process that held a long document's page images and vision tokens keeps that
    resident set after the document is done; trimming returns the free pages of every arena.
    Takes milliseconds to tens of milliseconds: call it off the event loop when idle. Returns
    whether memory was released (False also when the libc has no malloc_trim).
    """
    try:
        malloc_trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return False
    return bool(malloc_trim(ctypes.c_size_t(0)))

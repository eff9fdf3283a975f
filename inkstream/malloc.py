"""glibc malloc tuning of the long-lived service processes: a fixed mmap threshold, few arenas.

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

The top of a heap is given back to the system beyond twice the threshold (what glibc's dynamic rule
would set; its fixed default, 128 KiB, returned a freed block's pages at once and faulted them in
again at the next allocation). The encoder trims its heaps once idle (:class:`IdleTrim`); the DB
detector's large activations live in onnxruntime's arena (``models.compact.page.det_net``).

Set ``INKSTREAM_MALLOC_MMAP_THRESHOLD_BYTES`` to another size, or 0 to keep glibc's behaviour; a
``MALLOC_MMAP_THRESHOLD_`` environment variable set by the operator (glibc's own tunable) wins.

Arenas: glibc gives each thread that allocates concurrently its own arena, up to 8 per core, and
memory freed in one arena is kept there for that arena's next allocations, so the free memory of the
encoder's preprocessing threads, batcher and gRPC threads adds up. The local stack has always set
``MALLOC_ARENA_MAX=2`` for its children (fragmentation over hundreds of pages: encoder peak 1.48x ->
1.24x of a one-page run, bench/memory.py); the services now apply the same cap themselves, however
they are started (Kubernetes, ``inkstream serve``). Measured: one 15-page PDF (../shared/eval's
Federal Register) through a local stack peaked at 1,460 MiB with 2 arenas, 1,343 MiB with 1 (VmHWM of
the encoder, torch-based line encoder). ``INKSTREAM_MALLOC_ARENA_MAX`` sets another count (0: glibc's
default), and glibc's own ``MALLOC_ARENA_MAX`` environment variable wins.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import sys

log = logging.getLogger("inkstream.malloc")

M_TRIM_THRESHOLD = -1  # mallopt(3) parameter numbers (glibc malloc.h)
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
DEFAULT_MMAP_THRESHOLD_BYTES = 16 * 1024 * 1024
DEFAULT_ARENA_MAX = 2
ENV = "INKSTREAM_MALLOC_MMAP_THRESHOLD_BYTES"
ARENA_ENV = "INKSTREAM_MALLOC_ARENA_MAX"


def _mallopt(param: int, value: int) -> bool:
    """Call glibc's ``mallopt(param, value)``; False when refused or not glibc."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # musl or another libc: nothing to tune
        return False
    return bool(mallopt(param, ctypes.c_int(value)) == 1)


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "")
    try:
        return int(raw) if raw.strip() else default
    except ValueError:
        raise ValueError(f"{name} must be a whole number, got {raw!r}") from None


def tune() -> dict[str, int]:
    """Apply :func:`pin_mmap_threshold` and :func:`limit_arenas` (call once, early in a service's
    main). Returns what was set, e.g. ``{"mmap_threshold_bytes": 16777216, "arena_max": 2}``; raises
    ValueError for malformed settings.
    """
    return {"mmap_threshold_bytes": pin_mmap_threshold(), "arena_max": limit_arenas()}


def limit_arenas() -> int:
    """Cap glibc's malloc arenas at ``INKSTREAM_MALLOC_ARENA_MAX`` (default :data:`DEFAULT_ARENA_MAX`;
    see the module docstring). Returns the cap set, or 0 when nothing was changed (not glibc,
    disabled with 0, or left to ``MALLOC_ARENA_MAX``). Raises ValueError for a malformed value.
    """
    n = _env_int(ARENA_ENV, DEFAULT_ARENA_MAX)
    if n <= 0 or "MALLOC_ARENA_MAX" in os.environ:
        return 0
    if not _mallopt(M_ARENA_MAX, n):
        log.warning("mallopt(M_ARENA_MAX, %d) was refused", n)
        return 0
    return n


def pin_mmap_threshold() -> int:
    """Fix glibc's mmap threshold, and the trim threshold at twice it (see the module docstring).
    Returns the mmap threshold set in bytes, or 0 when nothing was changed (not glibc, disabled, or
    left to ``MALLOC_MMAP_THRESHOLD_``). Raises ValueError for a malformed
    ``INKSTREAM_MALLOC_MMAP_THRESHOLD_BYTES``.
    """
    nbytes = _env_int(ENV, DEFAULT_MMAP_THRESHOLD_BYTES)
    if nbytes <= 0 or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return 0
    if not _mallopt(M_MMAP_THRESHOLD, nbytes):
        log.warning("mallopt(M_MMAP_THRESHOLD, %d) was refused", nbytes)
        return 0
    # What glibc's dynamic rule would set with it: free memory at the top of a heap is returned to
    # the system only beyond twice the threshold (the fixed default, 128 KiB, gave a large block's
    # pages back at every free and faulted them in again at the next allocation).
    _mallopt(M_TRIM_THRESHOLD, 2 * nbytes)
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


class IdleTrim:
    """Calls :func:`trim` (on a worker thread) once a service has been idle for ``idle_s`` seconds:
    under load the heaps keep the memory the next request reuses (no page faults to fill it again),
    and an idle replica gives it back. Call :meth:`busy` when work arrives and :meth:`idle` when the
    last piece of work is done, both on the event loop.
    """

    def __init__(self, idle_s: float = 2.0) -> None:
        self.idle_s = idle_s
        self._timer: asyncio.TimerHandle | None = None
        self._running: set[asyncio.Future[bool]] = set()
        self.trims = 0  # trims started, for tests and logs

    def busy(self) -> None:
        """Work arrived: cancel a pending trim."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def idle(self) -> None:
        """Nothing is in flight: trim in ``idle_s`` seconds unless :meth:`busy` is called first."""
        self.busy()
        self._timer = asyncio.get_running_loop().call_later(self.idle_s, self._trim)

    def _trim(self) -> None:
        self._timer = None
        if self._running:  # the previous one is still running
            return
        self.trims += 1
        fut = asyncio.ensure_future(asyncio.to_thread(trim))
        self._running.add(fut)
        fut.add_done_callback(self._running.discard)

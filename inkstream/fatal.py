"""Unrecoverable replica failures: when a model half can no longer work, the replica says so and exits.

A replica whose accelerator is gone (device lost, an illegal memory access that poisons the CUDA
context, a driver reset) or whose every forward pass fails would otherwise stay SERVING and fail
every page routed to it. :class:`ForwardHealth` watches the forward passes of one model half:

- an exception that :func:`is_unrecoverable` recognises trips it at once;
- otherwise ``max_consecutive_failures`` forward passes failing in a row, with no success between,
  trip it (one bad page fails one forward; a broken replica fails them all).

Tripping calls ``on_trip(reason)`` once. The services pass :meth:`inkstream.lifecycle.Lifecycle.fail`
(through the event loop: forwards run on worker threads), which turns every health entry, liveness
included, NOT_SERVING, stops the server and makes the process exit with :data:`EXIT_UNRECOVERABLE`,
so Kubernetes (or ``inkstream up``) starts a fresh one, and the gateway routes around it meanwhile.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger("inkstream.fatal")

EXIT_UNRECOVERABLE = 3  # process exit status of a replica that stopped on an unrecoverable failure

# Substrings of the messages PyTorch / CUDA / ROCm raise when the device or its context is gone
# (torch.cuda reports them as RuntimeError / torch.AcceleratorError with these texts); after one
# of them no later kernel launch in the process can succeed.
_UNRECOVERABLE_MARKERS = (
    "cuda error: an illegal memory access",
    "cuda error: unspecified launch failure",
    "cuda error: device-side assert",
    "cuda error: misaligned address",
    "cuda error: uncorrectable ecc error",
    "cuda error: the launch timed out",
    "cudaerrordeviceslost",
    "device lost",
    "no cuda gpus are available",
    "hip error: an illegal memory access",
    "nccl error",
)


class DeviceLost(RuntimeError):
    """The model's device can no longer run work (raised by a half that detects it itself)."""


def is_unrecoverable(exc: BaseException) -> bool:
    """True when ``exc`` means no later forward pass in this process can succeed (see the markers)."""
    if isinstance(exc, DeviceLost):
        return True
    text = f"{type(exc).__name__}: {exc}".lower()
    return any(m in text for m in _UNRECOVERABLE_MARKERS)


class ForwardHealth:
    """Trip wire over one model half's forward passes (see the module docstring).

    ``name``: for the reason ("encoder", "decoder"). ``max_consecutive_failures`` >= 1.
    ``on_trip(reason)``: called once, from the thread that recorded the tripping failure.
    Thread-safe.
    """

    def __init__(self, name: str, on_trip: Callable[[str], None], max_consecutive_failures: int = 8):
        if max_consecutive_failures < 1:
            raise ValueError("max_consecutive_failures must be >= 1")
        self.name = name
        self.on_trip = on_trip
        self.max_consecutive_failures = max_consecutive_failures
        self.consecutive_failures = 0
        self.tripped: str | None = None
        self._lock = threading.Lock()

    def success(self) -> None:
        """A forward pass succeeded."""
        with self._lock:
            self.consecutive_failures = 0

    def failure(self, exc: BaseException | None = None) -> None:
        """A forward pass failed (``exc``: its exception, when known)."""
        with self._lock:
            if self.tripped is not None:
                return
            self.consecutive_failures += 1
            if exc is not None and is_unrecoverable(exc):
                reason = f"the {self.name}'s device failed: {type(exc).__name__}: {exc}"
            elif self.consecutive_failures >= self.max_consecutive_failures:
                last = f" (last: {type(exc).__name__}: {exc})" if exc is not None else ""
                reason = f"{self.consecutive_failures} {self.name} forward passes failed in a row{last}"
            else:
                return
            self.tripped = reason
        log.error("unrecoverable failure: %s; reporting NOT_SERVING and exiting", reason)
        self.on_trip(reason)

"""An encoder replica's seconds per page before it has served any: estimated from its warm-up.

A replica reports its busy seconds per encoded page in ``InfoResponse.seconds_per_page``
(:class:`inkstream.pace.ServiceRate`, measured on the pages it serves). Until it has measured a few
pages, a gateway that starts with the stack has no rate at all, so it cannot tell that a 200-page
synchronous request will not be read within its deadline (``gateway.routing.deadline_fit``). The
warm-up already runs one page through the whole path (decode + preprocess on a preprocessing
thread, then a forward pass of one page), then prepares it again and runs one forward pass at
``max_batch_size`` pages (:func:`encoder_service.server.warm_full_batch`); the second, warm
preprocessing (the first pays one-off set-up: 3.0-3.3 s against 2.6-2.8 s for the compact half)
and the full forward pass are timed, and :func:`warmup_seconds_per_page` turns them into the busy
seconds per page of a replica kept full.

It is an estimate from one synthetic page on a machine whose load may change: with the compact
half on 2 shared cores it was 4.0 s a page where a 24-page PDF then took 4.7 s a page through the
stack (load 15-23), 3.2 s (first pass timed) where one took 2.3 s (load 11-12), and 1.8 s (warm pass)
where one took 1.25 s (load 6-7): within a factor 1.5 either way, mostly above (the synthetic page's
preprocessing costs ~15 % more than a scanned text page's, and the warm-up competes with the other
services starting). The replica's measured rate replaces it after a few pages served while it was
kept full (``Batcher.full_inflight`` pages in flight, :class:`inkstream.pace.ServiceRate`); pages sent
one at a time never replace it: each takes a whole forward pass alone, so their busy time per page is
one page's latency (0.4 s where a batch of 4 in one 0.4 s forward gives 0.1 s a page), not the
throughput a long document gets, and a gateway sizing deadlines with it refused documents that
would have been read in time.

Kept full, a page costs its share of a preprocessing thread (``prepare_s / threads``) and its share of
a full forward pass (``batch_forward_s / batch_pages``). Whether the two stages overlap depends on the
hardware: on an accelerator the forward runs beside the CPU's preprocessing, so the slower stage sets
the pace (their maximum); on a CPU both compete for the same cores (the compact half's preprocessing
holds the GIL and its forward uses the intra-op threads), so they add up. :func:`warmup_seconds_per_page`
takes the sum when the forward runs on the CPU and the maximum otherwise.
"""

from __future__ import annotations


def warmup_seconds_per_page(prepare_s: float, threads: int, batch_forward_s: float, batch_pages: int,
                            *, forward_on_cpu: bool) -> float:
    """Busy seconds per page of a replica kept full, from its warm-up (module docstring).

    ``prepare_s``: seconds one page took to decode and preprocess on one thread; ``threads``:
    preprocessing threads (>= 1); ``batch_forward_s``: seconds of one forward pass of
    ``batch_pages`` pages (>= 1); ``forward_on_cpu``: the forward pass runs on the CPU cores the
    preprocessing uses. Returns seconds (> 0 when either timing is). Raises ValueError for
    ``threads`` or ``batch_pages`` < 1 or a negative time.
    """
    if threads < 1 or batch_pages < 1 or prepare_s < 0 or batch_forward_s < 0:
        raise ValueError(f"need threads >= 1, batch_pages >= 1 and times >= 0, got {threads}, {batch_pages}, "
                         f"{prepare_s}, {batch_forward_s}")
    prepare = prepare_s / threads
    forward = batch_forward_s / batch_pages
    return prepare + forward if forward_on_cpu else max(prepare, forward)

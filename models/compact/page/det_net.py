"""The PP-OCR detector network's onnxruntime session and its forward pass.

Split from :mod:`models.compact.page.detect` (which finds, orders and filters the lines): here only how
the network is run, and what that costs in memory (the encoder process's peak, issue #16). One
forward on a letter page (a 1,248 x 1,600 input) takes +220..300 MiB of peak RSS.

Tried and measured, not used: the forward in horizontal strips of the input. The network pools
globally (8 squeeze-excitation blocks and 5 mean reductions), so strips change its output: 512-row
strips read ../shared/eval's tracemonkey PDF at 11.5 % CER instead of 8.0 %, and a strip of blank
paper comes back as text probability everywhere (a page with 6 pt text only at its top lost all 14
lines). Running only the network's local parts in strips -- the stride-4 stem before the first
pooling and the head after the last, split out of the graph -- is exact but leaves the peak where it
was (+350 MiB in the middle part, which holds the pooling), so it was not kept either.
"""

from __future__ import annotations

import pathlib
import threading

import numpy as np

_ARENA_REGISTERED = False  # onnxruntime's process-wide CPU arena for the detector (see onnx_session)


def _shared_arena(ort) -> None:
    """Register, once per process, onnxruntime's shared CPU arena allocator, growing by what each
    allocation asks for (``arena_extend_strategy`` 1, kSameAsRequested; the default doubles).
    """
    global _ARENA_REGISTERED
    if not _ARENA_REGISTERED:
        info = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT)
        ort.create_and_register_allocator(info, ort.OrtArenaCfg({"arena_extend_strategy": 1}))
        _ARENA_REGISTERED = True


def onnx_session(path: pathlib.Path, threads: int, arena: bool = False):
    """An onnxruntime CPU session of the model file ``path`` with ``threads`` intra-op threads;
    ``arena``: its activations come from a kept arena (the DB detector's, see below), else from
    malloc at each forward.
    """
    import onnxruntime as ort  # heavy: onnxruntime, only when a detector is built

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    # Worker threads sleep between forwards instead of spinning: with more than one intra-op thread a
    # spinning pool takes the CPU the decoder and gateway processes of a local stack need.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    # The detector's arena: its activations on a letter page are 12-61 MB each (float32 maps of 24-96
    # channels at a quarter of a 1,600-px input), above glibc's mmap threshold, so without an arena
    # every forward mapped ~0.4 GB of fresh pages and faulted them in: over ../shared/eval's 14
    # English pages 1.9 M minor faults and 4.1 s of system time, a quarter of the encoder's CPU. The
    # arena keeps them for the next forward: 0.13 M faults, 1.2 s, the 14 pages in 11.8 instead of
    # 14.2 s with 4 in flight (bench/compact_vs_tesseract.py speed_ratio@4 1.02-1.13 -> 1.31-1.40).
    # Cost: the arena stays at the largest forward's working set (the default doubling strategy
    # grew it to +710 MiB after two Federal Register pages, +520 MiB without an arena; growing by
    # what is asked: bench/memory.py's 200-page encoder peak 722 -> 813 MiB, 1-page 585 -> 712).
    if arena:
        _shared_arena(ort)
        opts.add_session_config_entry("session.use_env_allocators", "1")
    opts.enable_cpu_mem_arena = arena
    opts.enable_mem_pattern = False
    # Extended, not all, graph optimisations: "all" adds the NCHWc layout transform, whose reordered
    # copies of the activations raised one forward's peak on a Federal Register page (1,248 x 1,600)
    # from +217..292 MiB to +274..354 MiB, no faster on this CPU (1.2-1.3 s either way) and the same
    # probability map (max difference 2e-5, no pixel crossing the 0.3 threshold).
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    return ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])


class DetNetwork:
    """The DB detector session, run by one thread at a time (the encoder's preprocessing threads share
    it): two pages' activations at once would double the forward's peak, and the
    encoder process is sized for one core (a second one belongs to the decoder).
    """

    def __init__(self, session) -> None:
        self.session = session
        self._lock = threading.Lock()

    def probability_map(self, bgr: np.ndarray) -> np.ndarray:
        """See :func:`probability_map`; callers of other threads wait for the network. The heaps are
        no longer trimmed after each forward (its activations live in the session's arena, see
        :func:`onnx_session`); the encoder service trims them once idle (:class:`inkstream.malloc.IdleTrim`).
        """
        with self._lock:
            return probability_map(self.session, bgr)


def network_input(bgr: np.ndarray) -> np.ndarray:
    """[h, W, 3] uint8 BGR -> [1, 3, h, W] float32, scaled as rapidocr's ``DetPreProcess`` does
    ((x / 255 - 0.5) / 0.5), in float32 throughout (rapidocr computes in float64 first).
    """
    x = bgr.astype(np.float32) * np.float32(2.0 / 255.0) - np.float32(1.0)
    return np.ascontiguousarray(x.transpose(2, 0, 1)[None])


#: Inputs above this many pixels give their arena memory back after the forward (see probability_map):
#: 1.25 x the largest input of an ordinary page (1,600 x 1,600; tall pages wider than 1,600 px are
#: detected in square bands of their width).
SHRINK_ABOVE_PIXELS = int(1.25 * 1600 * 1600)


def probability_map(session, bgr: np.ndarray) -> np.ndarray:
    """The DB network's (``session``) text probability map [1, 1, H, W] float32 of a page image
    ``bgr`` [H, W, 3] uint8 (BGR, already resized: H, W multiples of 32), in one forward pass.

    An input above :data:`SHRINK_ABOVE_PIXELS` shrinks the session's arena (if it has one) after its forward
    (onnxruntime run option ``memory.enable_memory_arena_shrinkage``): the arena otherwise keeps the
    largest working set it ever held (a 3,008 x 3,008 band: RSS 312 -> 1,171 MiB, and 1,177 after the
    next letter page; with the shrink 223, then 361), and ordinary pages reuse their memory as before.
    """
    import onnxruntime as ort

    name = session.get_inputs()[0].name
    options = ort.RunOptions()
    if bgr.shape[0] * bgr.shape[1] > SHRINK_ABOVE_PIXELS and session.get_session_options().enable_cpu_mem_arena:
        options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    return np.asarray(session.run(None, {name: network_input(bgr)}, options)[0])

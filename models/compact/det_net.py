"""The PP-OCR detector network's onnxruntime session and its forward pass in horizontal strips.

Split from :mod:`models.compact.detect` (which finds, orders and filters the lines): here only how
the network is run, and why in strips (peak memory of the encoder process, issue #16).
"""

from __future__ import annotations

import pathlib
import threading

import numpy as np

from inkstream import malloc

#: The detector network runs on horizontal strips of its input this many rows tall (a multiple of 32,
#: the network's stride), because its activations grow with the input's area and were most of the
#: encoder's peak memory: on a 1,248 x 1,600 input (a letter page) one forward took +504 MiB of peak
#: RSS, 512-row strips +302 MiB; on a fixed input 640 rows +217 MiB, 1,600 rows +353 MiB. 512-row strips
#: read ../shared/eval's tracemonkey PDF worse (CER 8.02 -> 11.52 %, in-process): the network pools
#: globally, and short strips change its output; 800-row strips (a letter page in two) read it at
#: 7.93 % and the other eval documents as the whole-page pass (24.56 -> 23.71 % over them, in-process).
#: NOT USED BY DEFAULT (4096 rows: more than any detector input, whose long side is at most 1,600):
#: a strip of blank paper comes back as text probability everywhere (global pooling again): on a page
#: with 6 pt text only at its top, 800-row strips found 0 lines instead of 14. Strips need a blank-strip
#: guard (and a test on such pages) before they can save memory.
DET_STRIP_ROWS = 4096
#: Rows of context above and below each strip, cut away from its output (a multiple of 32). The
#: network also pools globally, so its output is not exactly that of the whole page: 0.5 % of the
#: probability map's pixels cross the 0.3 threshold either way, 64 and 96 rows alike.
DET_STRIP_MARGIN = 64


def onnx_session(path: pathlib.Path, threads: int):
    """An onnxruntime CPU session of the model file ``path`` with ``threads`` intra-op threads (no arena)."""
    import onnxruntime as ort  # heavy: onnxruntime, only when a detector is built

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    # No arena / memory pattern: onnxruntime's CPU arena keeps (and grows to) the largest activations
    # ever seen at the detector's resolution -- measured on the Federal Register page: +710 MiB peak
    # after two pages with the arena, +520 MiB without, and no slower.
    opts.enable_cpu_mem_arena = False
    opts.enable_mem_pattern = False
    # Extended, not all, graph optimisations: "all" adds the NCHWc layout transform, whose reordered
    # copies of the activations raised one forward's peak on a Federal Register page (1,248 x 1,600)
    # from +217..292 MiB to +274..354 MiB, no faster on this CPU (1.2-1.3 s either way) and the same
    # probability map (max difference 2e-5, no pixel crossing the 0.3 threshold).
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    return ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])


class DetNetwork:
    """The DB detector session, run by one thread at a time (the encoder's preprocessing threads share
    it): two pages' activations at once would double the peak that the strips keep down, and the
    encoder process is sized for one core (a second one belongs to the decoder).
    """

    def __init__(self, session) -> None:
        self.session = session
        self._lock = threading.Lock()

    def probability_map(self, bgr: np.ndarray) -> np.ndarray:
        """See :func:`probability_map`; callers of other threads wait for the network. The heaps'
        free memory is given back after each forward (:func:`inkstream.malloc.trim`): the forward's
        activations below the mmap threshold stayed resident as free heap (+180..230 MiB after a
        letter page's forward, measured), memory the rest of the encoder did not reuse.
        """
        with self._lock:
            try:
                return probability_map(self.session, bgr)
            finally:
                malloc.trim()


def network_input(bgr: np.ndarray) -> np.ndarray:
    """[h, W, 3] uint8 BGR -> [1, 3, h, W] float32, scaled as rapidocr's ``DetPreProcess`` does
    ((x / 255 - 0.5) / 0.5), in float32 throughout (rapidocr computes in float64 first).
    """
    x = bgr.astype(np.float32) * np.float32(2.0 / 255.0) - np.float32(1.0)
    return np.ascontiguousarray(x.transpose(2, 0, 1)[None])


def probability_map(session, bgr: np.ndarray) -> np.ndarray:
    """The DB network's (``session``) text probability map [1, 1, H, W] float32 of a page image
    ``bgr`` [H, W, 3] uint8 (BGR, already resized: H, W multiples of 32), run in horizontal strips of
    :data:`DET_STRIP_ROWS` rows, each with :data:`DET_STRIP_MARGIN` rows of context above and below
    that are cut from its output; only one strip is ever held as float32.
    """
    name = session.get_inputs()[0].name
    h = bgr.shape[0]
    if h <= DET_STRIP_ROWS + 2 * DET_STRIP_MARGIN:
        return np.asarray(session.run(None, {name: network_input(bgr)})[0])
    out: np.ndarray | None = None
    for top in range(0, h, DET_STRIP_ROWS):
        a, b = max(0, top - DET_STRIP_MARGIN), min(h, top + DET_STRIP_ROWS + DET_STRIP_MARGIN)
        part = np.asarray(session.run(None, {name: network_input(bgr[a:b])})[0])
        if out is None:
            out = np.empty((*part.shape[:2], h, part.shape[3]), dtype=part.dtype)
        end = min(h, top + DET_STRIP_ROWS)
        out[:, :, top:end] = part[:, :, top - a: end - a]
    assert out is not None
    return out

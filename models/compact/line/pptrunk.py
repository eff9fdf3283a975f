"""The frozen half of the bilingual compact checkpoint's PP tower, without torch: PP-OCRv6's
text-recognition trunk on onnxruntime, its line normalisation, and its CTC head read from the file.

The ``rapidocr`` wheel (a pinned dependency) ships ``PP-OCRv6_rec_small.onnx`` (PaddleOCR, Apache-2.0),
a CTC recogniser trained on a large Chinese + English corpus. As DeepSeek-OCR builds on pretrained
SAM and CLIP towers, the compact model uses that recogniser's trunk, taken *before* its CTC head
(the graph is cut at :data:`FEATURE_OUTPUT` with ``onnx.utils.Extractor``), and trains only its own
token compressor (:class:`models.compact.line.pptower.PPCompressor`) and MoE decoder on top. The trunk is
frozen and runs in onnxruntime on the CPU, beside the PP-OCR detector. The head's 120 x 18,710 matrix
(:func:`pp_classifier`) is read only by a compressor with posterior tokens.

Input: a text line resized to :data:`PP_LINE_HEIGHT` = 48 pixels (the trunk's training height),
gray replicated to 3 channels, scaled to [-1, 1] with paper = +1 (PaddleOCR's ``(x/255 - 0.5)/0.5``)
after the same 2-98 percentile contrast stretch as :mod:`models.compact.line.image`, padded with paper
to a multiple of :data:`PP_BUCKET_PX` = 64 pixels. The trunk mixes the whole line with attention, so
its features depend on the padding: every line is padded to its own bucket, never to its batch's
width, and training does the same. Output: [B, W/8, 120] float32, one frame per 8 pixel columns.

Kept apart from :mod:`models.compact.line.pptower` (the torch compressor) so that the encoder service of
a bilingual checkpoint with current ONNX files (:mod:`models.compact.export.pp_onnx`) imports no torch.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
from functools import cache

import numpy as np
from PIL import Image

from models.compact.line.image import gray_percentiles

PP_LINE_HEIGHT = 48  # pixels
PP_FRAME_PX = 8  # pixels per trunk frame
PP_TOKEN_PX = 16  # pixels per token of the feature shards' records (and of compressor stride 2)
PP_BUCKET_PX = 64  # every line is padded with paper to a multiple of this
PP_MAX_WIDTH = 3072  # pixels at 48 px height: 192 vision tokens (~64 hanzi or ~120 Latin characters)
PP_FEATURE_DIM = 120
REC_MODEL_FILE = "PP-OCRv6_rec_small.onnx"
# sha256 of the rapidocr 3.10.0 file the compact checkpoint was trained on (the tower is frozen, so a
# different file would silently change every vision token).
REC_MODEL_SHA256 = "6f327246b50388f3c176ae304bd95767ea6dc0c9ae92153ef8cbe210b3c14884"
FEATURE_OUTPUT = "p2o.pd_op.transpose.8.0"  # [B, T, 120]: input of the CTC head's MatMul


#: Environment variable naming the recogniser file instead of the rapidocr package's (a training
#: machine without rapidocr installed; the sha256 pin still applies where a checkpoint gives one).
REC_MODEL_ENV = "INKSTREAM_PP_REC_MODEL"


def rec_model_path() -> pathlib.Path:
    """Path of the PP-OCRv6 recognition model: ``$INKSTREAM_PP_REC_MODEL`` when set, else the file
    inside the installed rapidocr package.
    """
    if os.environ.get(REC_MODEL_ENV):
        return pathlib.Path(os.environ[REC_MODEL_ENV])
    import rapidocr

    return pathlib.Path(rapidocr.__file__).parent / "models" / REC_MODEL_FILE


def pp_width(width: int, height: int) -> int:
    """Width in pixels of a ``width`` x ``height`` crop resized to 48 px height, before padding
    (at least 16, at most :data:`PP_MAX_WIDTH`).
    """
    return int(min(PP_MAX_WIDTH, max(PP_TOKEN_PX, round(width * PP_LINE_HEIGHT / max(1, height)))))


def pp_tokens(width: int, height: int, token_px: int = PP_TOKEN_PX) -> int:
    """Vision tokens of a ``width`` x ``height`` crop: ceil(pp_width / token_px) (8 or 16 pixels)."""
    return -(-pp_width(width, height) // token_px)


def normalise_line_pp(image: Image.Image) -> np.ndarray:
    """Line crop (any mode; dark ink on light paper) -> float32 [3, 48, W] in [-1, 1], paper +1,
    W = pp_width rounded up to a multiple of 64. Raises ValueError for an empty image.
    """
    if image.width < 1 or image.height < 1:
        raise ValueError(f"empty line image {image.width}x{image.height}")
    w = pp_width(image.width, image.height)
    gray = image.convert("L").resize((w, PP_LINE_HEIGHT), Image.Resampling.BILINEAR, reducing_gap=2.0)
    a8 = np.asarray(gray)
    lo, hi = gray_percentiles(a8, (2.0, 98.0))
    a = a8.astype(np.float32)
    if hi - lo < 16.0:  # nearly uniform crop: keep absolute levels (same rule as lineimage)
        lo, hi = min(lo, 0.0), max(hi, 255.0)
    paper = np.clip((a - lo) / (hi - lo), 0.0, 1.0) * 2.0 - 1.0
    full = -(-w // PP_BUCKET_PX) * PP_BUCKET_PX
    out = np.ones((3, PP_LINE_HEIGHT, full), dtype=np.float32)
    out[:, :, :w] = paper[None]
    return out


@cache
def _rec_model(path: str):
    """The parsed recogniser file (onnx.ModelProto), read once per process for the trunk and the head."""
    import onnx

    return onnx.load(path)


@cache
def _feature_graph(path: str) -> bytes:
    from onnx.utils import Extractor

    model = _rec_model(path)
    return bytes(Extractor(model).extract_model(["x"], [FEATURE_OUTPUT]).SerializeToString())


def file_sha256(path: pathlib.Path) -> str:
    """Hex sha256 of a file."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


class PPTrunk:
    """The frozen PP-OCRv6 recognition trunk (onnxruntime, CPU, ``threads`` intra-op threads).

    ``features(batch)``: float32 [B, 3, 48, W] (W a multiple of 8) -> float32 [B, W/8, 120].
    Raises FileNotFoundError if the rapidocr model file is missing and ValueError if its sha256 is not
    ``expected_sha256`` (when given): the checkpoint was trained on that exact file.
    """

    def __init__(self, threads: int = 1, expected_sha256: str | None = None) -> None:
        import onnxruntime as ort

        path = rec_model_path()
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found (is rapidocr installed?)")
        if expected_sha256 and file_sha256(path) != expected_sha256:
            raise ValueError(f"{path} is not the PP-OCRv6 recogniser this checkpoint was trained on "
                             f"(sha256 {expected_sha256}); install the pinned rapidocr version")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = max(1, threads)
        opts.inter_op_num_threads = 1
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")  # as det_net.onnx_session
        opts.enable_cpu_mem_arena = False  # line widths vary: an arena would keep the widest forever
        self._session = ort.InferenceSession(_feature_graph(str(path)), opts, providers=["CPUExecutionProvider"])

    def features(self, batch: np.ndarray) -> np.ndarray:
        """[B, 3, 48, W] float32 -> [B, W/8, 120] float32 (see the class docstring)."""
        return np.asarray(self._session.run(None, {"x": np.ascontiguousarray(batch, dtype=np.float32)})[0])


@cache
def pp_classifier() -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """The recogniser's CTC head, read from the rapidocr wheel's file: (W float32 [120, C], bias
    float32 [C], the labels of the C = 18,710 classes: '' for class 0, the blank, ' ' for the space;
    PaddleOCR's dictionary is the ONNX metadata ``character``). Raises FileNotFoundError if it is missing.
    """
    from onnx import numpy_helper

    path = rec_model_path()
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found (is rapidocr installed?)")
    model = _rec_model(str(path))
    dictionary = {p.key: p.value for p in model.metadata_props}["character"].split("\n")
    weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    w, b = weights["linear_8.w_0"], weights["linear_8.b_0"]
    labels = ["", *dictionary]
    labels += [" "] * (w.shape[1] - len(labels))
    return w.astype(np.float32), b.astype(np.float32), tuple(labels)


def class_ids(vocab: dict[str, int], labels: tuple[str, ...], blank_id: int, unk_id: int) -> np.ndarray:
    """int64 [C]: the checkpoint's token id of each PP class (``vocab``: token -> id of its tokenizer);
    the blank -> ``blank_id``, a class the vocabulary lacks -> ``unk_id``.
    """
    return np.array([blank_id if not c else vocab.get(c, unk_id) for c in labels], dtype=np.int64)

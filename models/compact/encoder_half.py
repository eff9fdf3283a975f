"""Encoder half of the ``compact`` family: page -> text lines (PP-OCR detector) -> vision tokens.

``preprocess`` (CPU, per page): detect the text lines and fix page orientation
(:class:`models.compact.page.detect.LineDetector`), order them for reading (columns, then top to bottom),
crop each line, split lines longer than the recogniser was trained on at inter-word gaps
(:mod:`models.compact.line.split`; each piece is a segment) and normalise each to a [1, 32, W] ink
map (:func:`models.compact.line.image.normalise_line`). A page or line of light text on dark paper is
inverted first, and lines too faint to be print (bleed-through) are dropped
(:mod:`models.compact.page.prepare`). A line the detector read by its shape (a table's lone nil dash,
:mod:`models.compact.page.nil_marks`: the recogniser reads its crop as garbage) is not read at all: its
segment carries the text (``SegmentTokens.pre_read`` ``-``, tower ``shape``) beside one placeholder token
(:func:`with_marks`), and no decoder is run on it.
Each line is then zero-padded (paper) to a width bucket (a multiple of ``BUCKET_PX`` = 64 pixels), so
its vision tokens do not depend on which other lines share its forward pass.

A bilingual checkpoint (config.json ``"pp_tower"``, :mod:`models.compact.line.towers`) first routes every
line by script: the script head on the Latin tower's features of the whole line sends a line with CJK
script to the PP-OCRv6 tower (48-px lines, cut only beyond 32 em), any other line to the Latin tower;
then a Latin piece (a table cell, cut from its line) that the Latin tower's CTC read head reads as one
number goes to the PP tower too (:meth:`CompactEncoderHalf.number_routes`,
:mod:`models.compact.line.number_reads`: the Latin decoder misreads clean number cells).
Its routing and PP tower run on onnxruntime too, without torch, when its ``encoder.onnx`` (with the
script head's output) and ``pp_tokens.onnx`` are current (:mod:`models.compact.export.pp_onnx`).

``encode_batch``: all lines of all pages in the batch are grouped by tower and bucket width and run through the
line encoder (ResNet trunk + conv token compressor + projector, :class:`models.compact.line.encoder.LineEncoder`;
run from the checkpoint's ``encoder.onnx`` on onnxruntime, without torch, when it can:
:mod:`models.compact.export.line_onnx`);
each line keeps its first ``width/16`` tokens (one vision token per 16 columns of the 32-px-high
line). One :class:`SegmentTokens` per line, in reading order, with the line's box in the pixels of
the page as received (for a page found sideways the box is mapped back through the rotation).
"""

from __future__ import annotations

import logging
import pathlib
from typing import Any

import numpy as np
from PIL import Image

from inkstream.errors import InvalidInput
from models.base import EncodedPage, EncoderHalf, ModeSpec, PreparedPage, SegmentTokens
from models.compact import checkpoint as ckpt
from models.compact.line.image import (
    LINE_HEIGHT,
    MAX_TOKENS,
    MAX_WIDTH,
    WIDTH_MULTIPLE,
    normalise_line_array,
    normalised_width,
    width_batches,
)
from models.compact.line.lead_dash import dash_at_frame
from models.compact.line.onnx_runtime import OnnxLineEncoder
from models.compact.line.piece import Piece
from models.compact.line.quotes import hairline_quotes
from models.compact.line.rules import erase_rules
from models.compact.line.runners import load_torch_towers, open_onnx_towers
from models.compact.line.split import SPLIT_PX, split_line
from models.compact.line.token_columns import columns_of_width
from models.compact.line.tracking import close_tracking
from models.compact.page import prepare
from models.compact.page.boxes import LineBox, crop_line
from models.compact.page.detect import LineDetector
from models.compact.page.unread_ink import unread_ink
from models.compact.page.unrotate import unrotate_box

log = logging.getLogger("inkstream.models.compact")

BUCKET_PX = 64
MAX_LINES_PER_FORWARD = 64
# 200 dpi US letter (11 in x 200 = 2200 px long side): what the line crops were trained to resemble.
MODES = {"lines": ModeSpec(name="lines", page_long_side_px=2200, max_vision_tokens=MAX_TOKENS)}
MIN_PAGE_PX = 8
#: ``SegmentTokens.tower`` of a segment read by its shape, not by a line encoder (``pre_read``)
SHAPE_TOWER = "shape"


def with_marks(pieces: list[Piece], at: list[int], marks: list[tuple[int, LineBox]], page: Image.Image
               ) -> tuple[list[Piece], list[tuple[str, float] | None]]:
    """``pieces`` (the read lines' pieces, each cut from the detector's line ``at[i]`` in reading order)
    with one piece for each of ``marks`` ((place in that order, a line the detector read by its shape:
    ``LineBox.shape_text``, :mod:`models.compact.page.nil_marks`) put in at its place, shaped as the
    others (:class:`Piece`: crop of ``page``, box, join, not PP, no tokens, no reading); and per
    piece its (text, confidence) when it is such a mark, else None. Marks skip the recogniser's whole
    way (framing, routing, number reads): it reads a lone dash's crop as garbage.
    """
    out: list[Piece] = []
    reads: list[tuple[str, float] | None] = []
    todo = sorted(marks, key=lambda m: m[0])[::-1]  # popped from the end, first place first

    def marks_before(place: float) -> None:
        while todo and todo[-1][0] < place:
            ln = todo.pop()[1]
            out.append(Piece(crop_line(page, ln), ln.box, ln.join, False, None, None))
            reads.append((ln.shape_text, float(ln.shape_confidence)))

    for piece, i in zip(pieces, at, strict=True):
        marks_before(i)
        out.append(piece)
        reads.append(None)
    marks_before(float("inf"))
    return out, reads


class CompactEncoderHalf(EncoderHalf):
    """Line detector + line encoder; see the module docstring. Vision tokens are [n, hidden] float32
    numpy arrays (Latin lines; PP-tower lines of a bilingual checkpoint on onnxruntime) or torch
    tensors in ``dtype`` (PP-tower lines on torch); a copy checkpoint's are ``hidden + copy_width``
    wide (Latin lines: zeros there).

    The line encoder (``runner``: lines [N, 1, 32, W] -> tokens [N, W/16, hidden], numpy) is the
    checkpoint's ``encoder.onnx`` on onnxruntime (:mod:`models.compact.export.line_onnx`) when it is current
    and the half runs on the CPU in float32 -- and, for a bilingual checkpoint, when its
    ``encoder.onnx`` has the script head's output and its ``pp_tokens.onnx`` is current too (``pp``:
    :meth:`models.compact.line.towers.PPTower.open_onnx`) -- then nothing here imports torch; else the
    torch module (:class:`models.compact.line.encoder.TorchLineRunner`, and
    :meth:`models.compact.line.towers.PPTower.load`). ``runtime``: "onnxruntime" or "torch".
    """

    family = "compact"
    # Detection, routing and line cutting hold the GIL: two threads preparing pages took the CPU
    # seconds of one and no less wall time (4 letter pages), each page twice as long.
    preprocess_threads = 1

    def __init__(self, runner: Any, loaded: set[str], model_id: str, revision: str, hidden: int,
                 device: Any, dtype: Any, detector: LineDetector, pp: Any = None) -> None:
        self._runner, self._loaded, self._detector, self._pp = runner, loaded, detector, pp
        self.model_id, self.revision, self.hidden_size = model_id, revision, hidden
        #: the copy classes (and spacing probabilities) after the features (models/compact/line/token_columns.py)
        self.extra_columns = columns_of_width(pp.copy_width if pp is not None else 0)
        self.device, self.dtype, self.default_mode = device, dtype, "lines"
        #: send Latin pieces the read head reads as one number to the PP tower (:meth:`number_routes`)
        self.numbers_to_pp = True
        self.runtime = "onnxruntime" if isinstance(runner, OnnxLineEncoder) else "torch"

    @classmethod
    def load(cls, checkpoint_dir: str | pathlib.Path, device: str = "cpu", dtype: Any = "float32",
             threads: int | None = None) -> CompactEncoderHalf:
        """Read config.json and ONLY the ``encoder.*`` tensors (and, for a bilingual checkpoint, the
        ``pp_tower.*`` / ``script_head.*`` ones, :mod:`models.compact.line.towers`); build the line encoder
        (onnxruntime or torch, see the class docstring; a warning is logged when the CPU float32 half
        falls back to torch) and the ONNX line detector. ``dtype``: a torch dtype or its name;
        ``threads``: onnxruntime intra-op threads of each forward (detector, line encoder, PP trunk;
        default 1, one core: the detector's forward is most of a page's encoder time, 3.5 -> 2.5 s a
        letter page with 2 threads on an idle 2-core machine). Raises
        InvalidInput for a directory that is not a compact checkpoint (or a bilingual one without its
        script head) or an unknown dtype name.
        """
        cfg = ckpt.read_config(checkpoint_dir)
        hidden = int(cfg["decoder"]["hidden_size"])
        model_id, revision = ckpt.checkpoint_identity(checkpoint_dir)
        detector_threads = max(1, threads or 1)
        detector = LineDetector(threads=detector_threads)
        name = dtype if isinstance(dtype, str) else str(dtype).removeprefix("torch.")
        if device == "cpu" and name == "float32":
            half = cls._load_onnx(checkpoint_dir, cfg, detector_threads, detector, model_id, revision, hidden)
            if half is not None:
                return half
            files = "encoder.onnx with the script head's output and pp_tokens.onnx" if "pp_tower" in cfg \
                else "encoder.onnx"
            log.warning("%s: no %s exported from these weights (python -m models.compact.export.onnx DIR writes "
                        "them); the encoder runs in torch", checkpoint_dir, files)
        return cls._load_torch(checkpoint_dir, cfg, device, dtype, detector_threads, detector,
                               model_id, revision, hidden)

    @classmethod
    def _load_onnx(cls, checkpoint_dir: str | pathlib.Path, cfg: dict, detector_threads: int,
                   detector: LineDetector, model_id: str, revision: str, hidden: int) -> CompactEncoderHalf | None:
        """The half on onnxruntime alone (CPU, float32), or None when an ONNX file it needs is missing
        or stale (see the class docstring).
        """
        towers = open_onnx_towers(checkpoint_dir, cfg, detector_threads, revision, hidden)
        if towers is None:
            return None
        return cls(towers.runner, towers.loaded, model_id, revision, towers.width, "cpu", "float32", detector,
                   towers.pp)

    @classmethod
    def _load_torch(cls, checkpoint_dir: str | pathlib.Path, cfg: dict, device: str, dtype: Any,
                    detector_threads: int, detector: LineDetector, model_id: str, revision: str,
                    hidden: int) -> CompactEncoderHalf:
        towers = load_torch_towers(checkpoint_dir, cfg, device, dtype, detector_threads, hidden)
        return cls(towers.runner, towers.loaded, model_id, revision, towers.width, towers.device, towers.dtype,
                   detector, towers.pp)

    def modes(self) -> list[ModeSpec]:
        """One mode, ``lines``: pages rasterised at 2,200 px long side, <= 160 vision tokens per line."""
        return list(MODES.values())

    def prepare_lines(self, crops: list[Image.Image]) -> list[np.ndarray]:
        """Normalise line crops -> [1, 32, W_bucket] float16 each (W_bucket a multiple of 64).

        float16, not float32: prepared pages wait in the batch queue (up to the gateway's encoder window,
        2 x max_batch_size pages of ~200 lines each), and at 4 bytes per pixel their lines were a few
        hundred MiB of the encoder's peak RSS; the ink map lies in [0, 1], where float16 is exact to
        5e-4, and :meth:`encode_lines` computes in the half's dtype.
        """
        out = []
        for crop in crops:
            x = normalise_line_array(prepare.dark_on_light(crop))
            bucket = min(MAX_WIDTH, -(-x.shape[-1] // BUCKET_PX) * BUCKET_PX)
            padded = np.zeros((1, LINE_HEIGHT, max(bucket, x.shape[-1])), dtype=np.float16)
            padded[:, :, : x.shape[-1]] = x
            out.append(padded)
        return out

    def _reads_forward(self, crops: list[Image.Image]) -> list[bool]:
        """Faint-band line crops -> whether each reads the right way round on the PP tower
        (:func:`models.compact.line.show_through.reads_forward`; a bilingual checkpoint only).
        """
        from models.compact.line.show_through import reads_forward

        return reads_forward(self._pp, crops)

    def route(self, crops: list[Image.Image], page: Image.Image | None = None
              ) -> tuple[list[bool], list[np.ndarray | None], list[str | None]]:
        """Line crops of one ``page`` (as given, before the detector turns or deskews it: resampling gave
        the paper of a rendered page grain; None: the grain is not measured) -> (the tower of each line,
        True: PP tower; the Latin tower's vision tokens [W/16, hidden] float32 of each line, from the
        routing forward, None without a PP tower; the read head's reading of each line,
        :func:`models.compact.line.number_reads.read_text`, None without one).
        A bilingual checkpoint's script head decides per line on the Latin tower's features of the
        whole line (:meth:`models.compact.line.towers.PPTower.script_lines`), and a Chinese page sends every
        line to the PP tower (:func:`models.compact.line.towers.page_routes`), as do a page or a line the
        Latin tower reads with doubt, when the checkpoint has a read head
        (:func:`models.compact.line.doubt.doubt_routes`: doubtful print on a scan, told by gray print or by the
        grain of its paper, :func:`models.compact.line.grain.paper_grain`), and a line holding a hairline double quote
        (:func:`models.compact.line.quotes.hairline_quotes`); a Latin checkpoint keeps every line on the
        Latin tower (no forward here).
        """
        if self._pp is None:
            return [False] * len(crops), [None] * len(crops), [None] * len(crops)
        from models.compact.line.grain import paper_grain
        from models.compact.line.towers import page_routes

        lines = self.prepare_lines(crops)
        n_frames = [normalised_width(c.width, c.height) // (WIDTH_MULTIPLE // 2) for c in crops]
        cjk, tokens, doubts, reads = self._pp.read_lines(lines, n_frames)
        routes = page_routes(cjk)
        if doubts is not None and self._pp.bars is not None:
            from models.compact.line.doubt import doubt_routes

            doubtful, share, alone, faint, scan, scan_doubt, grain_above = self._pp.bars
            routes = doubt_routes(routes, doubts, doubtful, share, alone,
                                  [prepare.ink_contrast(c) for c in crops] if faint > 0 or scan > 0 else (), faint,
                                  scan, scan_doubt, lambda: paper_grain(page) if page is not None else 0.0,
                                  grain_above)
        # a hairline double quote reads as an apostrophe on the Latin tower, right on the PP tower
        routes = [r or hairline_quotes(c) > 0 for r, c in zip(routes, crops, strict=True)]
        return routes, list(tokens), reads

    def number_routes(self, pieces: list[Piece]) -> list[Piece]:
        """:func:`models.compact.line.number_reads.number_routes` of a page's pieces on this half's PP tower
        (issue 37); unchanged without a PP tower or with :attr:`numbers_to_pp` off.
        """
        if self._pp is None or not self.numbers_to_pp:
            return pieces
        from models.compact.line.number_reads import number_routes

        return number_routes(pieces, self._pp.read_lines, self.prepare_lines)

    def preprocess(self, image: Image.Image, mode: str) -> PreparedPage:
        """Page -> PreparedPage with, per piece ``i``, ``tensors["line_<i>"]`` [1, 32, W] float16 (a Latin
        piece), ``tensors["pp_<i>"]`` (a PP-tower piece, :meth:`models.compact.line.towers.PPTower.prepare`)
        or ``tensors["tokens_<i>"]`` [n_tokens, hidden] float32 (a whole Latin line of a bilingual
        checkpoint: its vision tokens already, from the routing forward, :meth:`route`; [1, hidden] zeros for a
        piece the detector read by its shape, not read here: :func:`with_marks`) and ``meta`` holding
        ``n_tokens`` (list[int]), ``boxes`` (page pixels), ``joins`` (how each piece goes on from the
        previous one, :func:`models.compact.line.split.split_line`), ``pre_read`` ((text, confidence) of a piece
        read by its shape, else None, each piece), ``rotation`` and ``unread_ink``
        (text-like ink outside every detected line per ink inside, on the upright page:
        :func:`models.compact.page.unread_ink.unread_ink`). Raises InvalidInput
        for an unknown mode or a page smaller than 8 x 8 pixels.
        """
        if mode not in MODES:
            raise InvalidInput(f"unknown mode {mode!r}; known modes: {', '.join(MODES)}")
        if image.width < MIN_PAGE_PX or image.height < MIN_PAGE_PX:
            raise InvalidInput(f"page of {image.width}x{image.height} px is too small "
                               f"(min {MIN_PAGE_PX}x{MIN_PAGE_PX})")
        upright, lines, rotation = self._detector.detect(prepare.positive(image))  # light-on-dark inverted
        detected = [ln.box for ln in lines]  # show-through dropped below is not text the detector missed
        place = {id(ln): i for i, ln in enumerate(lines)}  # reading order, for the marks put back below
        marks = [(i, ln) for i, ln in enumerate(lines) if ln.shape_text]  # read by shape (nil_marks.py): not recognised
        lines = [ln for ln in lines if not ln.shape_text]
        lines = prepare.inked_lines(lines, lambda ln: crop_line(upright, ln),  # faint bleed-through is no text
                                    self._reads_forward if self._pp is not None else None)
        tight = [prepare.tighten(crop_line(upright, ln), ln.box) for ln in lines]  # display type trimmed
        tight = [(prepare.flat_paper(prepare.dark_on_light(c)), b) for c, b in tight]  # band edges are no ink
        unread = unread_ink(np.asarray(upright.convert("L")), [*detected, *(b for _, b in tight)])
        tight = [(close_tracking(c), b) for c, b in tight]  # letter-spaced display type closed up, then routed
        framed = [dash_at_frame(c) for c, _ in tight]  # a leading minus at the phase it is read at (issue 37)
        leads = [f.width - c.width for f, (c, _) in zip(framed, tight, strict=True)]  # paper added, not on the page
        tight = [(f, b) for f, (_, b) in zip(framed, tight, strict=True)]
        cjk, latin, reads = self.route([c for c, _ in tight], image)  # grain: on the page as given
        pieces: list[Piece] = []
        at: list[int] = []
        for ln, (crop, box), lead, pp, tokens, text in zip(lines, tight, leads, cjk, latin, reads, strict=True):
            # Read without a form's box edges and underlines; routed with them (line/rules.py: its doubt
            # is the page's sign of a scan), so a line they were erased from is encoded again.
            read = erase_rules(crop)
            parts = split_line(read, box, self._pp.split_px if pp and self._pp else SPLIT_PX, tabs=not pp, lead=lead)
            whole = tokens if len(parts) == 1 and read is crop else None  # a Latin line read whole: routing encoded it
            pieces += [Piece(parts[0][0], parts[0][1], ln.join, pp, whole, text if whole is not None else None),
                       *(Piece(*part, pp, None, None) for part in parts[1:])]
            at += [place[id(ln)]] * len(parts)
        # a Latin piece led by a minus: the minus put at the phase the tower reads it at (issue 37)
        pieces = [p if p.pp or (c := dash_at_frame(p.crop)) is p.crop else p._replace(crop=c, tokens=None, read=None)
                  for p in pieces]
        pieces = self.number_routes(pieces)  # a number cell the read head reads: to the PP tower (issue 37)
        pieces, pre_read = with_marks(pieces, at, marks, upright)
        features = self.hidden_size - (self._pp.copy_width if self._pp is not None else 0)
        tensors: dict[str, Any] = {}
        n_tokens, towers = [], []
        for i, piece in enumerate(pieces):
            n = normalised_width(piece.crop.width, piece.crop.height) // WIDTH_MULTIPLE
            if pre_read[i] is not None:  # not read: one placeholder token, through the Latin tower's path
                tensors[f"tokens_{i}"], n = np.zeros((1, features), np.float32), 1
            elif piece.pp and self._pp is not None:
                tensors[f"pp_{i}"], n = self._pp.prepare(prepare.dark_on_light(piece.crop))
            elif piece.tokens is not None:
                tensors[f"tokens_{i}"] = np.ascontiguousarray(piece.tokens[:n])
            else:
                tensors[f"line_{i}"] = self.prepare_lines([piece.crop])[0]
            n_tokens.append(n)
            towers.append("pp" if piece.pp else "latin")
        boxes = [unrotate_box(p.box, rotation, image.width, image.height) for p in pieces]
        return PreparedPage(batch_key="compact-lines", tensors=tensors, width=image.width, height=image.height,
                            meta={"n_tokens": n_tokens, "boxes": boxes, "joins": [p.join for p in pieces],
                                  "towers": towers, "rotation": rotation, "unread_ink": unread,
                                  "pre_read": pre_read})

    def encode_lines(self, lines: list[np.ndarray], n_tokens: list[int]) -> list[np.ndarray]:
        """Bucketed lines [1, 32, W] -> vision tokens [n_tokens[i], hidden] float32, same order; lines
        of one width share a forward of at most :data:`MAX_LINES_PER_FORWARD` lines.
        """
        out: list[np.ndarray | None] = [None] * len(lines)
        for chunk in width_batches(lines, MAX_LINES_PER_FORWARD):
            tokens = self._runner(np.stack([np.asarray(lines[i], dtype=np.float32) for i in chunk]))
            for j, i in enumerate(chunk):
                out[i] = np.ascontiguousarray(tokens[j, : n_tokens[i]])
        done = [t for t in out if t is not None]
        assert len(done) == len(out)  # every line is in exactly one width group
        return done

    def encode_batch(self, pages: list[PreparedPage]) -> list[EncodedPage]:
        """Encode all lines of ``pages`` (grouped by width across pages); one EncodedPage per page, each
        segment marked with the tower that read it (``SegmentTokens.tower``: "latin" or "pp"), and the
        page's ``unread_ink`` measured by :meth:`preprocess`; a segment :meth:`preprocess` read by its shape
        keeps its text (``SegmentTokens.pre_read``, tower "shape") beside a placeholder token.
        """
        flat, ntok, owner, kinds = [], [], [], []
        for p, page in enumerate(pages):
            n = page.meta["n_tokens"]
            towers = page.meta.get("towers") or ["latin"] * len(n)
            for i in range(len(n)):
                key = f"pp_{i}" if towers[i] == "pp" else f"tokens_{i}" if f"tokens_{i}" in page.tensors \
                    else f"line_{i}"
                flat.append(page.tensors[key])
                ntok.append(n[i])
                owner.append(p)
                kinds.append(key.partition("_")[0])
        tokens = self._encode_routed(flat, ntok, kinds) if flat else []
        result = [EncodedPage(segments=[], width=pg.width, height=pg.height,
                              unread_ink=float(pg.meta.get("unread_ink", 0.0))) for pg in pages]
        per_page_index = [0] * len(pages)
        for t, p, kind in zip(tokens, owner, kinds, strict=True):
            i = per_page_index[p]
            box, join = pages[p].meta["boxes"][i], pages[p].meta["joins"][i]
            tower = "pp" if kind == "pp" else "latin"  # "line" / "tokens": through the Latin tower
            per_page_index[p] += 1
            x0, y0, x1, y1 = (float(v) for v in box)
            turn = int(round(float(pages[p].meta.get("rotation", 0)) / 90.0)) % 4 * 90
            shape = (pages[p].meta.get("pre_read") or [None] * len(pages[p].meta["boxes"]))[i]
            if shape is not None:  # read by its shape (nil_marks.py): the decoder is not run on it
                result[p].segments.append(SegmentTokens(vision_tokens=t, box=(x0, y0, x1, y1), join=join,
                                                        rotation=turn, tower=SHAPE_TOWER, pre_read=shape[0],
                                                        pre_read_confidence=shape[1]))
                continue
            result[p].segments.append(SegmentTokens(vision_tokens=t, box=(x0, y0, x1, y1), join=join, rotation=turn,
                                                    tower=tower))
        return result

    def _encode_routed(self, flat: list[Any], ntok: list[int], kinds: list[str]) -> list[Any]:
        """Vision tokens of every piece, in the given order: ``kinds[i]`` "line" (through the Latin
        tower), "pp" (the PP tower) or "tokens" (already encoded by the routing forward).
        """
        latin = [i for i, k in enumerate(kinds) if k == "line"]
        pp_idx = [i for i, k in enumerate(kinds) if k == "pp"]
        out: list[Any] = [None] * len(flat)
        extra = self._pp.copy_width if self._pp is not None else 0  # Latin tokens carry no copy classes
        encoded = zip(latin, self.encode_lines([flat[i] for i in latin], [ntok[i] for i in latin]), strict=True) \
            if latin else iter(())
        for i, t in [*encoded, *((i, flat[i]) for i, k in enumerate(kinds) if k == "tokens")]:
            out[i] = np.pad(t, ((0, 0), (0, extra))) if extra else t
        if pp_idx:
            if self._pp is None:
                raise InvalidInput("page prepared for the PP tower, but this checkpoint has none")
            for i, t in zip(pp_idx, self._pp.encode([flat[i] for i in pp_idx], [ntok[i] for i in pp_idx]),
                            strict=True):
                out[i] = t if isinstance(t, np.ndarray) else t.to(self.dtype)
        return out

    def loaded_tensor_names(self) -> set[str]:
        """Checkpoint names of the ``encoder.*`` tensors read at load time."""
        return set(self._loaded)

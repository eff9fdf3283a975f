"""The second vision tower of a bilingual compact checkpoint, as the encoder half runs it.

A checkpoint whose config.json has a ``"pp_tower"`` entry reads Chinese as well as Latin print: each
detected line is routed by the script head (:mod:`models.compact.line.script`, on the Latin tower's
features of the whole line) either to the Latin tower (the timm trunk, as before) or to the PP-OCRv6
tower (:mod:`models.compact.line.pptower`: frozen trunk + the checkpoint's compressor). Both give vision
tokens of the decoder's width, so the decoder reads either.

A PP line is cut only where it is wider than the PP tower was trained on (:data:`PP_SPLIT_PX`, in
pixels at the Latin tower's 32 px height: aspect 32, about 32 hanzi) or than the decoder takes vision
tokens (:attr:`PPTower.split_px`: 160 tokens of 8 px at 48 px height is aspect 26.7), at the blank
column nearest the ideal cut (:mod:`models.compact.line.split`; between hanzi there is always some
paper); the gateway joins pieces of a Chinese line without a space (:func:`inkstream.segments.piece_separator`).
On a Chinese page every line goes to the PP tower, number cells and Latin words too (:func:`page_routes`).
The routing forward of the Latin tower also gives the tokens of the lines that stay there
(:meth:`PPTower.script_lines`) and, for a checkpoint with a read head, each line's doubt: a page the
Latin tower reads doubtfully (a scan, a fax, a faded receipt) or a doubtful line goes to the PP tower
too (:mod:`models.compact.line.doubt`, :attr:`PPTower.bars`); its read head's greedy reading of each line
(:meth:`PPTower.read_lines`) sends a piece that is one number there as well
(:mod:`models.compact.line.number_reads`).

Two runtimes, the same tokens: :meth:`PPTower.load` (torch: the compressor
:class:`models.compact.line.pptower.PPTokens` and the script head :class:`models.compact.line.script.ScriptHead`
on the torch Latin encoder's features) and :meth:`PPTower.open_onnx` (onnxruntime, when the
checkpoint's ``encoder.onnx`` has the script head's ``script_logits`` output and its
``pp_tokens.onnx`` is current: :mod:`models.compact.export.line_onnx`, :mod:`models.compact.export.pp_onnx`). This
module imports no torch; only the torch runtime does, when loaded.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image, ImageOps

from models.compact import checkpoint as ckpt
from models.compact.line.doubt import line_doubt
from models.compact.line.image import LINE_HEIGHT, MAX_TOKENS, gray_percentiles, width_batches
from models.compact.line.inkcolumns import column_ink
from models.compact.line.pptrunk import PP_BUCKET_PX, PP_FRAME_PX, PP_LINE_HEIGHT, PPTrunk, normalise_line_pp, pp_tokens

if TYPE_CHECKING:
    import torch

    from models.compact.line.encoder import LineEncoder
    from models.compact.line.onnx_runtime import OnnxLineEncoder

#: Paper added above and below a PP line crop, as a fraction of its height: detector boxes are tight
#: (a 36 px hanzi line gives a 39 px box) while the training crops carry 0-35 % of the line height above
#: and below; on rendered pages in three fonts (two held out) 0.15 gave CER 0.39 against 0.48 unpadded,
#: 0.30 gave 0.44 (step-3000 checkpoint).
PP_CROP_PAD = 0.15
PP_SPLIT_PX = 1024  # at 32 px height: PP-tower training lines hold at most 60 characters (~32-60 em)
MAX_LINES_PER_FORWARD = 32
#: Frames per call of the compressor: a posterior compressor's softmax over 18,710 classes holds
#: 75 KB of float32 per frame (a few such buffers at once), so 1,024 frames keep it near 75 MB a
#: buffer; lines are independent in the compressor, so the grouping does not change their tokens.
MAX_POSTERIOR_FRAMES = 1024
#: Frames whose mean logit decides a line's script: :data:`models.compact.line.script.TOP_K`, repeated here
#: because that module imports torch (tests/unit/test_pp_onnx.py checks that they agree).
TOP_K = 3


def script_decisions(logits: np.ndarray, n_frames: np.ndarray) -> np.ndarray:
    """:meth:`models.compact.line.script.ScriptHead.forward`'s line decision in numpy: frame logits [N, T]
    float (the script head's linear layer on the Latin tower's stride-8 features), ``n_frames`` [N]
    int (real frames of each line; later ones are ignored) -> bool [N], True where the mean of the
    line's :data:`TOP_K` highest logits (a missing frame counts -20) is above 0 (CJK script).
    """
    x = np.asarray(logits, dtype=np.float32)
    x = np.where(np.arange(x.shape[1])[None, :] >= np.asarray(n_frames)[:, None], -np.inf, x)
    top = -np.sort(-x, axis=1)[:, : min(TOP_K, x.shape[1])]
    top = np.where(np.isinf(top), np.float32(-20.0), top)
    return np.asarray(top.mean(1) > 0)


def _row(tokens: Any, j: int, n: int) -> Any:
    """Line ``j``'s first ``n`` tokens of a batch (numpy array or torch tensor), contiguous."""
    return np.ascontiguousarray(tokens[j, :n]) if isinstance(tokens, np.ndarray) else tokens[j, :n].contiguous()


#: A page is read as a Chinese page when at least this many of its lines, and at least
#: :data:`CJK_PAGE_SHARE` of them, hold CJK script (:func:`page_routes`).
CJK_PAGE_MIN_LINES = 3
CJK_PAGE_SHARE = 0.2


def page_routes(cjk_lines: list[bool]) -> list[bool]:
    """The script head's per-line decisions (True: CJK) -> the tower of each line of the page (True:
    PP tower). On a Chinese page every line goes to the PP tower: the number cells, codes and Latin
    words of a Chinese report are what the PP-OCRv6 recogniser was trained on too, and it reads them
    better than the Latin tower through the decoder shared with Chinese (rendered report pages,
    ``bench/zh_pages.py``, 4 pages: 2.35/5.41/3.50/8.39 % -> 2.02/4.94/2.27/6.70 % CER; the shared
    report page 2.09 -> 1.43 %; checkpoint zh-step500). A page is Chinese when at least
    :data:`CJK_PAGE_MIN_LINES` lines and :data:`CJK_PAGE_SHARE` of its lines are: the head sends 0-2
    lines of an English page to the PP tower (0-8 % of the lines of the 44 English eval pages), and a
    statement page of an item name and up to four number cells per row still has 20 % CJK lines. Any
    other page keeps the head's decisions line by line.
    """
    n = sum(cjk_lines)
    if n >= CJK_PAGE_MIN_LINES and n >= CJK_PAGE_SHARE * len(cjk_lines):
        return [True] * len(cjk_lines)
    return list(cjk_lines)


def _bars(cfg: dict) -> tuple[float, float, float, float, float, float, float]:
    """(doubtful, page share, alone, faint, scan contrast, scan doubt, scan grain) bars of config.json
    ``read_head`` (:func:`models.compact.line.doubt.doubt_routes`; a missing or null bar routes nothing,
    except the scan bars ``scan_median_below`` / ``scan_doubt_median_above`` / ``scan_grain_above``, which
    default to :data:`models.compact.line.doubt.SCAN_CONTRAST_BELOW` /
    :data:`~models.compact.line.doubt.SCAN_DOUBT_ABOVE` / :data:`models.compact.line.grain.GRAIN_ABOVE`).
    """
    from models.compact.line.doubt import SCAN_CONTRAST_BELOW, SCAN_DOUBT_ABOVE
    from models.compact.line.grain import GRAIN_ABOVE

    bars = cfg.get("read_head") or {}
    inf = float("inf")
    return (float(bars.get("doubtful_above") or inf), float(bars.get("page_doubt_share") or inf),
            float(bars.get("alone_above") or inf), float(bars.get("faint_median_below") or 0.0),
            float(bars.get("scan_median_below", SCAN_CONTRAST_BELOW) or 0.0),
            float(bars.get("scan_doubt_median_above", SCAN_DOUBT_ABOVE) or inf),
            float(bars.get("scan_grain_above", GRAIN_ABOVE) or inf))


class PPTower:
    """Script routing + the PP-OCRv6 tower of one bilingual checkpoint (CPU), on one runtime
    (``runtime``: "torch" from :meth:`load`, "onnxruntime" from :meth:`open_onnx`).

    ``trunk``: the frozen trunk; ``tokens``: trunk frames [B, T, 120] float32 and the lines' ink
    columns [B, T, 16] float32 (numpy; :func:`models.compact.decode.spacing.column_ink`) -> vision tokens
    [B, ceil(T/stride), hidden + ``copy_width``] (torch: a tensor in the checkpoint's dtype;
    onnxruntime: float32 numpy); ``read_latin``: normalised Latin lines [N, 1, 32, W] float32 (numpy, W
    a multiple of 16) and their real stride-8 frames [N] int64 -> (bool [N], the script head's
    decision; the Latin tower's vision tokens [N, W/16, hidden] float32, numpy; the read head's
    ``read_top`` [N, W/8, 3] float32 ([N, W/8, 2] from an older ``encoder.onnx``) or None without a
    read head) from one forward of the
    Latin tower; ``loaded``: checkpoint names of the tensors behind them; ``stride``: trunk frames per
    token (1 or 2); ``copy_width``: columns of copy classes after the ``hidden`` features
    (:func:`models.compact.decode.copy_head.pack`; 0 without); ``bars``: (doubtful, page share, alone,
    faint, scan contrast, scan doubt, scan grain) bars of :func:`models.compact.line.doubt.doubt_routes` from
    config.json ``read_head`` (:func:`_bars`), None without a read head.
    """

    def __init__(self, trunk: PPTrunk, tokens: Callable[[np.ndarray, np.ndarray], Any],
                 read_latin: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray | None]],
                 loaded: set[str], stride: int, copy_width: int, runtime: str,
                 bars: tuple[float, float, float, float, float, float, float] | None = None) -> None:
        self.trunk, self.tokens, self.read_latin, self.loaded = trunk, tokens, read_latin, loaded
        self.copy_width, self.runtime, self.bars = copy_width, runtime, bars
        self.token_px = PP_FRAME_PX * stride
        #: widest PP piece, in pixels at the Latin tower's 32 px line height (what split_line is given)
        self.split_px = min(PP_SPLIT_PX, MAX_TOKENS * self.token_px * LINE_HEIGHT // PP_LINE_HEIGHT)

    @classmethod
    def load(cls, checkpoint_dir: str | pathlib.Path, cfg: dict, hidden: int, encoder: LineEncoder, threads: int,
             dtype: torch.dtype) -> PPTower:
        """The torch runtime: from ``cfg["pp_tower"]`` and the ``pp_tower.*`` / ``script_head.*``
        tensors; routing runs the script head on ``encoder``'s (the loaded Latin tower's) features.
        Raises InvalidInput when the tensors are missing, FileNotFoundError / ValueError as
        :class:`models.compact.line.pptrunk.PPTrunk`.
        """
        import torch

        from inkstream.errors import InvalidInput
        from models.compact.line.pptower import PPTokens
        from models.compact.line.script import ScriptHead

        module, loaded = PPTokens.load(checkpoint_dir, cfg, hidden)
        module = module.to(dtype).eval()
        try:
            head_state, head_names = ckpt.load_prefixed(checkpoint_dir, ckpt.SCRIPT_PREFIX)
        except InvalidInput as e:
            raise InvalidInput(f"{checkpoint_dir}: bilingual checkpoint without its script head "
                               "(run training.compact.script_head)") from e
        head = ScriptHead(encoder.cfg.compressor_channels)
        head.load_state_dict({k: v.float() for k, v in head_state.items()}, strict=True)
        head.eval()
        trunk = PPTrunk(threads=threads, expected_sha256=cfg["pp_tower"].get("trunk_sha256"))
        from models.compact.line.doubt import load_read_head, read_top

        read = load_read_head(checkpoint_dir)
        if read is not None:
            head_names |= ckpt.tensor_names(checkpoint_dir, ckpt.READ_PREFIX)

        def tokens(frames: np.ndarray, columns: np.ndarray) -> torch.Tensor:
            with torch.no_grad():
                return module(torch.from_numpy(frames).to(dtype), torch.from_numpy(columns).to(dtype))

        def read_latin(lines: np.ndarray, n_frames: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
            with torch.no_grad():
                param = next(encoder.parameters())
                latin, feats = encoder(torch.from_numpy(lines).to(param.device, param.dtype))
                cjk = head(feats.float().cpu(), torch.from_numpy(n_frames)) > 0
                top = read_top(read, feats.float().cpu()).numpy() if read is not None else None
                return cjk.numpy(), latin.float().cpu().numpy(), top

        return cls(trunk, tokens, read_latin, loaded | head_names, module.compressor.stride, module.copy_width,
                   "torch", _bars(cfg) if read is not None else None)

    @classmethod
    def open_onnx(cls, checkpoint_dir: str | pathlib.Path, cfg: dict, latin: OnnxLineEncoder, threads: int = 1,
                  revision: str = "") -> PPTower | None:
        """The onnxruntime runtime, without torch: the checkpoint's ``pp_tokens.onnx``
        (:class:`models.compact.line.onnx_runtime.OnnxPPTokens`) and the script logits of ``latin`` (its current
        ``encoder.onnx``). None when ``latin`` has no script output or ``pp_tokens.onnx`` is missing or
        was exported from other weights (``revision``: the checkpoint's, else computed). Raises
        FileNotFoundError / ValueError as :class:`models.compact.line.pptrunk.PPTrunk`.
        """
        from models.compact.line.onnx_runtime import OnnxPPTokens

        runner = OnnxPPTokens.open(checkpoint_dir, threads, revision) if latin.has_script else None
        if runner is None:
            return None
        loaded = set().union(*(ckpt.tensor_names(checkpoint_dir, prefix) for prefix in
                               (ckpt.PP_TOWER_PREFIX, ckpt.SCRIPT_PREFIX, ckpt.SPACING_PREFIX)))
        if latin.has_read:
            loaded |= ckpt.tensor_names(checkpoint_dir, ckpt.READ_PREFIX)
        elif ckpt.tensor_names(checkpoint_dir, ckpt.READ_PREFIX):
            return None  # an encoder.onnx exported before the read head: the torch runtime routes by doubt
        trunk = PPTrunk(threads=threads, expected_sha256=cfg["pp_tower"].get("trunk_sha256"))

        def read_latin(lines: np.ndarray, n_frames: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
            tokens, logits, top = latin.read_all(lines)
            return script_decisions(logits, n_frames), tokens, top

        return cls(trunk, runner, read_latin, loaded, runner.stride, runner.copy_width, "onnxruntime",
                   _bars(cfg) if latin.has_read else None)

    def script_lines(self, lines: list[np.ndarray],
                     n_frames: list[int]) -> tuple[list[bool], list[np.ndarray], list[float] | None]:
        """The first three of :meth:`read_lines`."""
        cjk, tokens, doubts, _ = self.read_lines(lines, n_frames)
        return cjk, tokens, doubts

    def read_lines(self, lines: list[np.ndarray], n_frames: list[int]
                   ) -> tuple[list[bool], list[np.ndarray], list[float] | None, list[str | None]]:
        """Normalised Latin-tower lines ([1, 32, W] arrays, any float dtype, W a multiple of 16: the
        encoder half's bucketed lines, :meth:`models.compact.encoder_half.CompactEncoderHalf.prepare_lines`)
        and each line's real stride-8 frames (its width before the paper padding / 8) -> (the script
        head's decision for each line, True where it holds CJK script; its Latin-tower vision tokens
        [W/16, hidden] float32). One forward of the Latin tower gives both, so a line that stays on the
        Latin tower is not encoded twice; lines of equal width share a forward (the script head ignores
        the padded frames: on the 891 detected lines of ../shared/eval's English and Chinese pages it
        decided alike at the bucket width and at each line's own width, as it was trained); third, each
        line's doubt (:func:`models.compact.line.doubt.line_doubt`), None without a read head; fourth,
        each line's read-head reading (:func:`models.compact.line.number_reads.read_text`), None where
        the runtime gives no class ids.
        """
        from models.compact.line.number_reads import read_text

        out: list[bool] = [False] * len(lines)
        tokens: list[np.ndarray | None] = [None] * len(lines)
        doubts: list[float] = [0.0] * len(lines)
        reads: list[str | None] = [None] * len(lines)
        has_read = True
        for chunk in width_batches(lines, MAX_LINES_PER_FORWARD):
            x = np.stack([np.asarray(lines[i], dtype=np.float32) for i in chunk])
            cjk, latin, top = self.read_latin(x, np.asarray([n_frames[i] for i in chunk], dtype=np.int64))
            has_read = has_read and top is not None
            for j, i in enumerate(chunk):
                out[i], tokens[i] = bool(cjk[j]), latin[j]
                doubts[i] = line_doubt(top[j], n_frames[i]) if top is not None else 0.0
                reads[i] = read_text(top[j], n_frames[i]) if top is not None else None
        return out, [t for t in tokens if t is not None], doubts if has_read and lines else None, reads

    def prepare(self, crop: Image.Image) -> tuple[np.ndarray, int]:
        """A PP line: (float16 [48, W_bucket] in [-1, 1], paper +1, one channel of
        :func:`normalise_line_pp`; its vision tokens). The crop first gets :data:`PP_CROP_PAD` of its
        height of paper above and below (half that left and right).
        """
        gray = crop.convert("L")
        pad = int(round(gray.height * PP_CROP_PAD))
        paper = int(gray_percentiles(np.asarray(gray), (95.0,))[0])
        crop = ImageOps.expand(gray, border=(pad // 2, pad, pad // 2, pad), fill=paper)
        x = normalise_line_pp(crop)[0]
        n = min(MAX_TOKENS, pp_tokens(crop.width, crop.height, self.token_px))
        return x.astype(np.float16), n

    def encode(self, grays: list[Any], n_tokens: list[int]) -> list[Any]:
        """PP lines ([48, W] float16 arrays from :meth:`prepare`, W a multiple of 64) -> vision tokens
        [n_tokens[i], hidden + :attr:`copy_width`] (the runtime's kind, see the class docstring), same
        order. Lines of one width share a trunk forward (the padding of each is its own bucket's), and
        compressor calls of at most :data:`MAX_POSTERIOR_FRAMES` frames. Raises ValueError for a
        width that is not a multiple of 64.
        """
        out: list[Any] = [None] * len(grays)
        for g in grays:
            if g.shape[-1] % PP_BUCKET_PX:
                raise ValueError(f"PP line width {g.shape[-1]} is not a multiple of {PP_BUCKET_PX}")
        for chunk in width_batches(grays, MAX_LINES_PER_FORWARD):
            x = np.stack([np.asarray(grays[i], dtype=np.float32) for i in chunk])[:, None]
            frames = self.trunk.features(np.broadcast_to(x, (x.shape[0], 3, *x.shape[2:])))
            columns = np.stack([column_ink(x[j, 0], PP_FRAME_PX) for j in range(len(chunk))])
            rows = max(1, MAX_POSTERIOR_FRAMES // max(1, frames.shape[1]))
            for r in range(0, len(chunk), rows):
                tokens = self.tokens(frames[r: r + rows], columns[r: r + rows])
                for j, i in enumerate(chunk[r: r + rows]):
                    out[i] = _row(tokens, j, n_tokens[i])
        return [t for t in out if t is not None]

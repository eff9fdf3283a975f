"""The second vision tower of a bilingual compact checkpoint, as the encoder half runs it.

A checkpoint whose config.json has a ``"pp_tower"`` entry reads Chinese as well as Latin print: each
detected line is routed by the script head (:mod:`models.compact.script`, on the Latin tower's
features of the whole line) either to the Latin tower (the timm trunk, as before) or to the PP-OCRv6
tower (:mod:`models.compact.pptower`: frozen trunk + the checkpoint's compressor). Both give vision
tokens of the decoder's width, so the decoder reads either.

A PP line is cut only where it is wider than the PP tower was trained on (:data:`PP_SPLIT_PX`, in
pixels at the Latin tower's 32 px height: aspect 32, about 32 hanzi) or than the decoder takes vision
tokens (:attr:`PPTower.split_px`: 160 tokens of 8 px at 48 px height is aspect 26.7), at the blank
column nearest the ideal cut (:mod:`models.compact.linesplit`; between hanzi there is always some
paper); the gateway joins pieces of a Chinese line without a space (:func:`inkstream.segments.piece_separator`).
"""

from __future__ import annotations

import pathlib

import numpy as np
import torch
from PIL import Image, ImageOps
from tokenizers import Tokenizer

from inkstream.errors import InvalidInput
from models.compact import checkpoint as ckpt
from models.compact.copy_head import copy_width, pack, peak_classes
from models.compact.line_encoder import LineEncoder
from models.compact.lineimage import LINE_HEIGHT, MAX_TOKENS, WIDTH_MULTIPLE, normalise_line
from models.compact.pptower import (
    PP_BUCKET_PX,
    PP_FRAME_PX,
    PP_LINE_HEIGHT,
    PPCompressor,
    PPTrunk,
    attach_recogniser_head,
    normalise_line_pp,
    pp_tokens,
)
from models.compact.script import ScriptHead

#: Paper added above and below a PP line crop, as a fraction of its height: detector boxes are tight
#: (a 36 px hanzi line gives a 39 px box) while the training crops carry 0-35 % of the line height above
#: and below; on rendered pages in three fonts (two held out) 0.15 gave CER 0.39 against 0.48 unpadded,
#: 0.30 gave 0.44 (step-3000 checkpoint).
PP_CROP_PAD = 0.15
PP_SPLIT_PX = 1024  # at 32 px height: PP-tower training lines hold at most 60 characters (~32-60 em)
MAX_LINES_PER_FORWARD = 32


class PPTower:
    """Script routing + the PP-OCRv6 tower of one bilingual checkpoint (CPU; ``dtype`` tokens)."""

    def __init__(self, trunk: PPTrunk, compressor: PPCompressor, head: ScriptHead, loaded: set[str],
                 dtype: torch.dtype, copy_classes: bool = False) -> None:
        self.trunk, self.compressor, self.head, self.loaded, self.dtype = trunk, compressor, head, loaded, dtype
        #: tokens carry the frame's top classes for the decoder's pointer-generator (models/compact/copy_head.py)
        self.copy_classes = copy_classes
        self.copy_width = copy_width(compressor.posterior_topk) if copy_classes else 0
        self.token_px = PP_FRAME_PX * compressor.stride
        #: widest PP piece, in pixels at the Latin tower's 32 px line height (what split_line is given)
        self.split_px = min(PP_SPLIT_PX, MAX_TOKENS * self.token_px * LINE_HEIGHT // PP_LINE_HEIGHT)

    @classmethod
    def load(cls, checkpoint_dir: str | pathlib.Path, cfg: dict, hidden: int, channels_latin: int,
             threads: int, dtype: torch.dtype) -> PPTower:
        """Build from ``cfg["pp_tower"]`` and the ``pp_tower.*`` / ``script_head.*`` tensors. Raises
        InvalidInput when they are missing, FileNotFoundError / ValueError as :class:`PPTrunk`.
        """
        spec = cfg["pp_tower"]
        comp_state, loaded = ckpt.load_prefixed(checkpoint_dir, ckpt.PP_TOWER_PREFIX)
        topk = int(spec.get("posterior_topk", 0))
        vocab = Tokenizer.from_file(str(pathlib.Path(checkpoint_dir) / "tokenizer.json")).get_vocab() if topk else {}
        compressor = PPCompressor(hidden, int(spec["channels"]), int(spec.get("tokens_stride_px", 16)) // PP_FRAME_PX,
                                  topk, len(vocab))
        compressor.load_state_dict({k: v.float() for k, v in comp_state.items()}, strict=True)
        if topk:
            attach_recogniser_head(compressor, vocab)
        try:
            head_state, head_names = ckpt.load_prefixed(checkpoint_dir, ckpt.SCRIPT_PREFIX)
        except InvalidInput as e:
            raise InvalidInput(f"{checkpoint_dir}: bilingual checkpoint without its script head "
                               "(run training.compact.script_head)") from e
        head = ScriptHead(channels_latin)
        head.load_state_dict({k: v.float() for k, v in head_state.items()}, strict=True)
        trunk = PPTrunk(threads=threads, expected_sha256=spec.get("trunk_sha256"))
        if "copy" in cfg and int(cfg["copy"]["topk"]) != topk:
            raise InvalidInput(f"{checkpoint_dir}: copy classes ({cfg['copy']['topk']}) must be the "
                               f"posterior's ({topk})")
        return cls(trunk, compressor.to(dtype).eval(), head.eval(), loaded | head_names, dtype, "copy" in cfg)

    def route(self, encoder: LineEncoder, crops: list[Image.Image]) -> list[bool]:
        """True for each line crop (dark on light) that holds CJK script and goes to the PP tower."""
        out = []
        with torch.no_grad():
            for crop in crops:
                x = normalise_line(crop)[None]
                _, feats = encoder(x.to(next(encoder.parameters()).dtype))
                n = torch.tensor([x.shape[-1] // (WIDTH_MULTIPLE // 2)])
                out.append(bool(self.head(feats.float(), n)[0] > 0))
        return out

    def prepare(self, crop: Image.Image) -> tuple[torch.Tensor, int]:
        """A PP line: (float16 [48, W_bucket] in [-1, 1], paper +1, one channel of
        :func:`normalise_line_pp`; its vision tokens). The crop first gets :data:`PP_CROP_PAD` of its
        height of paper above and below (half that left and right).
        """
        gray = crop.convert("L")
        pad = int(round(gray.height * PP_CROP_PAD))
        paper = int(np.percentile(np.asarray(gray), 95))
        crop = ImageOps.expand(gray, border=(pad // 2, pad, pad // 2, pad), fill=paper)
        x = normalise_line_pp(crop)[0]
        n = min(MAX_TOKENS, pp_tokens(crop.width, crop.height, self.token_px))
        return torch.from_numpy(x.astype(np.float16)), n

    def encode(self, grays: list[torch.Tensor], n_tokens: list[int]) -> list[torch.Tensor]:
        """PP lines (float16 [48, W], W a multiple of 64) -> vision tokens [n_tokens[i], hidden] (plus
        :attr:`copy_width` columns of copy classes, :func:`models.compact.copy_head.pack`), same order.
        Lines of one width share a trunk forward (the padding of each is its own bucket's).
        """
        out: list[torch.Tensor | None] = [None] * len(grays)
        by_width: dict[int, list[int]] = {}
        for i, g in enumerate(grays):
            if g.shape[-1] % PP_BUCKET_PX:
                raise ValueError(f"PP line width {g.shape[-1]} is not a multiple of {PP_BUCKET_PX}")
            by_width.setdefault(int(g.shape[-1]), []).append(i)
        with torch.no_grad():
            for idx in by_width.values():
                for s in range(0, len(idx), MAX_LINES_PER_FORWARD):
                    chunk = idx[s: s + MAX_LINES_PER_FORWARD]
                    x = torch.stack([grays[i] for i in chunk]).float()
                    frames = self.trunk.features(x[:, None].expand(-1, 3, -1, -1).numpy())
                    f = torch.from_numpy(frames).to(self.dtype)
                    top = self.compressor.top_classes(f) if self.compressor.posterior_topk else None
                    tokens = self.compressor(f, top)
                    if self.copy_classes and top is not None:
                        tokens = torch.cat([tokens, pack(peak_classes(*top), top[1]).to(tokens.dtype)], -1)
                    for j, i in enumerate(chunk):
                        out[i] = tokens[j, : n_tokens[i]].contiguous()
        return [t for t in out if t is not None]

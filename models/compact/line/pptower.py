"""The trained half of the bilingual compact checkpoint's PP tower (torch): :class:`PPCompressor`
turns the frozen PP-OCRv6 trunk's frames [B, W/8, 120] (:mod:`models.compact.line.pptrunk`, which this
module re-exports) into vision tokens [B, W/8 or W/16, hidden] (its ``stride``, in the checkpoint's
config as ``tokens_stride_px`` 8 or 16); :class:`PPTokens` adds the copy classes of a copy
checkpoint, giving the tokens the encoder half sends. The encoder service runs that exported to
ONNX when it can (:mod:`models.compact.export.pp_onnx`).
"""

from __future__ import annotations

import pathlib

import numpy as np
import torch
from tokenizers import Tokenizer
from torch import nn

from inkstream.errors import InvalidInput
from models.compact import checkpoint as ckpt
from models.compact.line.columns import copy_weights, copy_width, pack, peak_classes
from models.compact.line.inkcolumns import SPACING_WIDTH
from models.compact.line.pptrunk import (
    FEATURE_OUTPUT,
    PP_BUCKET_PX,
    PP_FEATURE_DIM,
    PP_FRAME_PX,
    PP_LINE_HEIGHT,
    PP_MAX_WIDTH,
    PP_TOKEN_PX,
    REC_MODEL_FILE,
    REC_MODEL_SHA256,
    PPTrunk,
    class_ids,
    file_sha256,
    normalise_line_pp,
    pp_classifier,
    pp_tokens,
    pp_width,
    rec_model_path,
)
from models.compact.line.spacing_head import SpacingHead, head_inputs, script_classes

__all__ = [
    "FEATURE_OUTPUT", "PP_BUCKET_PX", "PP_FEATURE_DIM", "PP_FRAME_PX", "PP_LINE_HEIGHT", "PP_MAX_WIDTH", "PP_TOKEN_PX",
    "REC_MODEL_FILE", "REC_MODEL_SHA256", "PPCompressor", "PPTokens", "PPTrunk", "attach_recogniser_head", "class_ids",
    "file_sha256", "normalise_line_pp", "pp_classifier", "pp_tokens", "pp_width", "rec_model_path",
]


class PPCompressor(nn.Module):
    """Trunk frames [B, T, 120] float -> vision tokens [B, ceil(T/stride), hidden]: a 1-D convolution
    of ``stride`` 1 (one token per frame, 8 pixel columns) or 2 (16 columns), a second convolution, a
    linear projection to the decoder's width and LayerNorm (the same shape as the Latin tower's
    compressor). Why stride 1 in the current checkpoint: the trunk's frames are peaky (a character
    lives in one frame, its neighbours are near blank); read by the recogniser's own classifier,
    held-out lines give 5.1 % CER at one frame per token and 60 % with frame pairs averaged (12.9 %
    with the less blank frame of each pair kept), so two frames per token cost most of the reading.

    ``posterior_topk`` > 0 (stride 1 only) adds to each token, before the LayerNorm, the recogniser's
    own reading of its frame: the frame's CTC posterior over PaddleOCR's 18,710 classes (the trunk's
    frozen head, :func:`pp_classifier`, given by :meth:`attach_classifier`), its ``posterior_topk``
    most likely classes mapped to the checkpoint's ids (:func:`class_ids`) and embedded,
    ``sum_k p_k E[id_k]`` with ``E`` = ``char_embed`` [vocab_size, hidden], learned. A softmax
    posterior survives the decoder's soft attention over neighbouring frames (a spike next to a blank
    averages to half a spike of the same class), where a linear read-out of averaged features does not
    (see above); the decoder then learns to fetch and order characters, not 7,400 classes from a few
    rendered examples each — a form of distillation from the pretrained recogniser (its outputs, per
    frame, are the student's inputs).
    """

    def __init__(self, hidden: int, channels: int = 256, stride: int = 2, posterior_topk: int = 0,
                 vocab_size: int = 0) -> None:
        super().__init__()
        if stride not in (1, 2):
            raise ValueError(f"compressor stride must be 1 or 2 frames, not {stride}")
        if posterior_topk and (stride != 1 or vocab_size < 1):
            raise ValueError("posterior tokens need stride 1 and the vocabulary size")
        self.stride, self.posterior_topk = stride, posterior_topk
        self.compress = nn.Sequential(
            nn.Conv1d(PP_FEATURE_DIM, channels, kernel_size=3, stride=stride, padding=1), nn.GELU(),
            nn.Conv1d(channels, channels, kernel_size=3, padding=1), nn.GELU(),
        )
        self.proj = nn.Sequential(nn.Linear(channels, hidden), nn.LayerNorm(hidden))
        if posterior_topk:
            self.char_embed = nn.Embedding(vocab_size, hidden)
            # The frozen head, not saved with the checkpoint (it is the pinned rapidocr file's).
            self.register_buffer("head_w", torch.zeros(PP_FEATURE_DIM, 0), persistent=False)
            self.register_buffer("head_b", torch.zeros(0), persistent=False)
            self.register_buffer("head_ids", torch.zeros(0, dtype=torch.long), persistent=False)

    def attach_classifier(self, w: np.ndarray, b: np.ndarray, ids: np.ndarray) -> None:
        """Give a posterior compressor the recogniser's head (W [120, C], bias [C], token id per class [C])."""
        if ids.shape != b.shape or w.shape != (PP_FEATURE_DIM, b.shape[0]):
            raise ValueError(f"classifier shapes {w.shape}, {b.shape}, {ids.shape} do not match")
        self.head_w = torch.from_numpy(w).float()
        self.head_b = torch.from_numpy(b).float()
        self.head_ids = torch.from_numpy(ids).long()

    def top_classes(self, frames: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """[..., T, 120] -> (posterior float32 [..., T, k], token id int64 [..., T, k]) of each frame's
        ``posterior_topk`` most likely PP classes (no gradient: the head is frozen).
        """
        if self.head_ids.numel() == 0:
            raise RuntimeError("posterior compressor without its classifier (attach_classifier)")
        with torch.no_grad():
            p = torch.softmax(frames.float() @ self.head_w.float() + self.head_b.float(), dim=-1)
            top = p.topk(self.posterior_topk, dim=-1)
            return top.values, self.head_ids[top.indices]

    def posterior_embedding(self, top: tuple[torch.Tensor, torch.Tensor],
                            table: torch.Tensor | None = None) -> torch.Tensor:
        """(posterior [B, T, k], ids [B, T, k]) -> [B, T, hidden]: ``sum_k p_k E[id_k]``, ``E`` the
        ``char_embed`` table or ``table`` [vocab, hidden] (training derives it from the decoder).
        """
        p, ids = top
        emb = nn.functional.embedding(ids.long(), self.char_embed.weight if table is None else table)
        return (p.to(emb.dtype)[..., None] * emb).sum(-2)

    def forward(self, frames: torch.Tensor, top: tuple[torch.Tensor, torch.Tensor] | None = None,
                table: torch.Tensor | None = None) -> torch.Tensor:
        """[B, T, 120] -> [B, ceil(T/stride), hidden] (dtype of the module). ``top``: the frames'
        :meth:`top_classes` if already known (training caches them per line), else computed here;
        ``table``: see :meth:`posterior_embedding`.
        """
        x = self.proj[0](self.compress(frames.transpose(1, 2)).transpose(1, 2))
        if self.posterior_topk:
            x = x + self.posterior_embedding(top if top is not None else self.top_classes(frames), table)
        return self.proj[1](x)


def attach_recogniser_head(compressor: PPCompressor, vocab: dict[str, int]) -> None:
    """Give a posterior ``compressor`` the pinned recogniser's CTC head, classes mapped to ``vocab``
    (token -> id of the checkpoint's tokenizer; blank -> ``<pad>``, unknown -> ``<unk>``). Raises
    FileNotFoundError as :func:`pp_classifier`.
    """
    from models.compact.vocab import PAD_ID, UNK_ID

    w, b, labels = pp_classifier()
    compressor.attach_classifier(w, b, class_ids(vocab, labels, PAD_ID, UNK_ID))


class PPTokens(nn.Module):
    """The PP tower's vision tokens as the encoder half sends them: trunk frames [B, T, 120] float ->
    [B, ceil(T/stride), hidden + :attr:`copy_width`] (dtype of the compressor): the compressor's
    tokens (posterior tokens with the frames' :meth:`PPCompressor.top_classes`), followed, for a copy
    checkpoint (``copy_classes``), by the frames' copy classes
    (:func:`models.compact.decode.copy_head.pack` of :func:`models.compact.decode.copy_head.peak_classes`), and for
    a checkpoint with a spacing head (config ``spacing``) by its two probabilities per frame (a space
    after this frame's character, the character full-width; :mod:`models.compact.decode.spacing`), which
    :attr:`copy_width` counts.
    """

    def __init__(self, compressor: PPCompressor, copy_classes: bool = False, spacing: SpacingHead | None = None,
                 vocab: dict[str, int] | None = None) -> None:
        super().__init__()
        self.compressor = compressor
        #: :func:`models.compact.decode.copy_head.peak_classes`; the ONNX export puts a traceable twin here
        self.peak = peak_classes
        self.copy_classes = bool(copy_classes and compressor.posterior_topk)
        self.spacing = spacing if self.copy_classes else None
        if self.spacing is not None:
            vocab = vocab or {}
            self.scripts: torch.Tensor
            self.register_buffer("scripts", script_classes(vocab), persistent=False)
            self.space_id = vocab[" "]
        self.copy_width = ((copy_width(compressor.posterior_topk) if self.copy_classes else 0)
                           + (SPACING_WIDTH if self.spacing is not None else 0))

    @classmethod
    def load(cls, checkpoint_dir: str | pathlib.Path, cfg: dict, hidden: int) -> tuple[PPTokens, set[str]]:
        """From ``cfg["pp_tower"]``, the ``pp_tower.*`` tensors (as float32; eval mode) and, for a
        posterior compressor, the checkpoint's tokenizer and the pinned recogniser's head. Returns
        (module, checkpoint names of the tensors read). Raises InvalidInput when the tensors are
        missing or a copy checkpoint's classes are not its posterior's, FileNotFoundError as
        :func:`models.compact.line.pptrunk.pp_classifier`.
        """
        spec = cfg["pp_tower"]
        topk = int(spec.get("posterior_topk", 0))
        if "copy" in cfg and int(cfg["copy"]["topk"]) != topk:
            raise InvalidInput(f"{checkpoint_dir}: copy classes ({cfg['copy']['topk']}) must be the "
                               f"posterior's ({topk})")
        comp_state, loaded = ckpt.load_prefixed(checkpoint_dir, ckpt.PP_TOWER_PREFIX)
        vocab = Tokenizer.from_file(str(pathlib.Path(checkpoint_dir) / "tokenizer.json")).get_vocab() if topk else {}
        compressor = PPCompressor(hidden, int(spec["channels"]), int(spec.get("tokens_stride_px", 16)) // PP_FRAME_PX,
                                  topk, len(vocab))
        compressor.load_state_dict({k: v.float() for k, v in comp_state.items()}, strict=True)
        if topk:
            attach_recogniser_head(compressor, vocab)
        spacing = None
        if "spacing" in cfg and "copy" in cfg:
            state, names = ckpt.load_prefixed(checkpoint_dir, ckpt.SPACING_PREFIX)
            spacing = SpacingHead(hidden=int(cfg["spacing"]["hidden"]),
                                  dilations=tuple(cfg["spacing"].get("dilations", (2, 4, 8))))
            spacing.load_state_dict({k: v.float() for k, v in state.items()}, strict=True)
            loaded = loaded | names
        return cls(compressor, "copy" in cfg, spacing, vocab).eval(), loaded

    def forward(self, frames: torch.Tensor, columns: torch.Tensor | None = None) -> torch.Tensor:
        """See the class docstring. ``columns`` [B, T, 16]: the lines'
        :func:`models.compact.line.inkcolumns.column_ink`, required by a checkpoint with a spacing head
        (ValueError without it: the head's probabilities are meaningless without the pixels).
        """
        top = self.compressor.top_classes(frames) if self.compressor.posterior_topk else None
        tokens = self.compressor(frames, top)
        if self.copy_classes and top is not None:
            peak = self.peak(*top)
            tokens = torch.cat([tokens, pack(peak, top[1]).to(tokens.dtype)], -1)
            if self.spacing is not None:
                if columns is None:
                    raise ValueError("this checkpoint's spacing head needs the lines' ink columns")
                q = copy_weights(peak, top[1])
                x = head_inputs(frames, columns, q, top[1], self.scripts, self.space_id)
                tokens = torch.cat([tokens, torch.sigmoid(self.spacing(x)).to(tokens.dtype)], -1)
        return tokens

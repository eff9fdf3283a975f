"""Interfaces of a model family's two halves. Services depend only on these, never on a family.

Shapes use ``H`` = hidden size (vision-token width, elements), ``B`` = batch, ``T`` = new positions,
``S`` = past + new positions, ``V`` = vocabulary size. Both halves load from one Hugging Face-layout
checkpoint directory and must materialise only their own tensors (checked by tests through
:meth:`EncoderHalf.loaded_tensor_names` / :meth:`DecoderHalf.loaded_tensor_names`).
"""

from __future__ import annotations

import abc
import pathlib
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from PIL import Image

from inkstream.errors import InvalidInput

if TYPE_CHECKING:  # torch only for the annotations: an encoder half may run without it (compact, ONNX)
    import numpy as np
    import torch


@dataclass(frozen=True)
class ModeSpec:
    """A resolution mode. ``page_long_side_px``: long side (pixels) the gateway rasterises pages at."""

    name: str
    page_long_side_px: int
    base_size: int = 0
    image_size: int = 0
    crop: bool = False
    max_vision_tokens: int = 0


@dataclass
class PreparedPage:
    """Result of :meth:`EncoderHalf.preprocess` for one page (CPU arrays: torch tensors or numpy
    arrays, family-specific).

    ``batch_key``: pages with equal keys can be stacked into one forward pass (e.g. tensor shapes).
    ``width``/``height``: the received page image size in pixels.
    """

    batch_key: Hashable
    tensors: dict[str, torch.Tensor | np.ndarray]
    width: int
    height: int
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class SegmentTokens:
    """Vision tokens of one segment: ``vision_tokens`` [n_tokens, H] in the model dtype on CPU (a
    torch tensor, or a float32 numpy array from a half that runs without torch);
    ``box`` (x0, y0, x1, y1) in page pixels; ``join``: how its text goes on from the previous
    segment's (:data:`inkstream.segments.JOINS`: a line of its own, or the next piece of a line
    that was cut in pieces, at a word gap or inside a word); ``rotation``: the quarter turn (0, 90,
    180 or 270 degrees counter-clockwise) that makes the segment's text upright (a page read sideways
    or upside down; its ``box`` stays in the received page's pixels); ``tower``: which of the family's
    line encoders read it (the compact family: "latin" or "pp"; "" for a family with one), so the
    gateway can calibrate each tower's confidence on its own (:mod:`gateway.output.signal`);
    ``pre_read``: the segment's text when the encoder half read it without the decoder (by its shape: a
    table's nil dash ``-``, :mod:`models.compact.page.nil_marks`), with ``pre_read_confidence`` in [0, 1]:
    the decoder is not run on it (its ``vision_tokens`` are a placeholder) and every reader of the page
    takes this text instead (:func:`models.inprocess.segment_texts`, the gateway's decode stage); ""
    for a segment to decode.
    """

    vision_tokens: torch.Tensor | np.ndarray
    box: tuple[float, float, float, float]
    join: str = "line"
    rotation: int = 0
    tower: str = ""
    pre_read: str = ""
    pre_read_confidence: float = 0.0


@dataclass
class EncodedPage:
    """Encoder output for one page: segments in reading order, page size in pixels, tile grid, and
    ``unread_ink``: text-like ink outside every segment per ink inside (about the characters the
    segments miss per character they hold; :mod:`models.compact.page.unread_ink`; 0.0 when the
    family does not measure it).
    """

    segments: list[SegmentTokens]
    width: int
    height: int
    tile_rows: int = 0
    tile_cols: int = 0
    unread_ink: float = 0.0

    @property
    def n_vision_tokens(self) -> int:
        """Total vision tokens over all segments."""
        return sum(int(s.vision_tokens.shape[0]) for s in self.segments)


@dataclass(frozen=True)
class TokenColumns:
    """A run of ``count`` columns that every vision token carries after its model features (inputs
    the decoder reads beside the embeddings, e.g. the compact family's copy classes): ``name`` (a
    stable identifier), ``unit`` of each value (e.g. "probability", "integer") and ``description``
    for a person. A half lists its runs in column order in ``extra_columns``.
    """

    name: str
    count: int
    unit: str
    description: str


def feature_columns(hidden_size: int, extra: tuple[TokenColumns, ...]) -> int:
    """Columns of a ``hidden_size``-wide vision token that are model features (the first ones)."""
    return hidden_size - sum(c.count for c in extra)


class EncoderHalf(abc.ABC):
    """Preprocessing + vision tower + projector of a family.

    Attributes set by :meth:`load`: ``model_id`` (str), ``revision`` (str), ``family`` (str),
    ``hidden_size`` (int, H: the whole width of a vision token), ``device`` (torch.device), ``dtype``
    (torch.dtype of the weights and of the returned vision tokens; a half without torch reports
    ``"float32"``), ``default_mode`` (str); ``extra_columns``: the runs of non-feature columns at the
    end of every token (:class:`TokenColumns`; () when all H columns are features).
    """

    family: str
    model_id: str
    revision: str
    hidden_size: int
    device: Any
    dtype: Any
    default_mode: str
    extra_columns: tuple[TokenColumns, ...] = ()
    #: Threads that usefully preprocess pages at once (the encoder's default ``preprocess_threads``):
    #: a family whose preprocessing holds the GIL says 1, since a second thread only makes each
    #: page take twice as long.
    preprocess_threads: int = 2

    @classmethod
    @abc.abstractmethod
    def load(cls, checkpoint_dir: str | pathlib.Path, device: str = "cpu",
             dtype: torch.dtype | str = "float32", threads: int | None = None) -> EncoderHalf:
        """Load only the encoder-side tensors of ``checkpoint_dir``; ``dtype`` a torch dtype or its
        name (:data:`inkstream.wire.DTYPE_NAMES`); ``threads``: CPU threads of one forward pass
        (intra-op), None for the half's default. Raises InvalidInput for a bad dir.
        """

    @abc.abstractmethod
    def modes(self) -> list[ModeSpec]:
        """Supported resolution modes."""

    @abc.abstractmethod
    def preprocess(self, image: Image.Image, mode: str) -> PreparedPage:
        """RGB page image -> PreparedPage (CPU). Raises InvalidInput for an unknown mode or a
        page it cannot use (e.g. too small).
        """

    @abc.abstractmethod
    def encode_batch(self, pages: list[PreparedPage]) -> list[EncodedPage]:
        """Forward a batch of pages that share one ``batch_key``; one EncodedPage per input, same order."""

    @abc.abstractmethod
    def loaded_tensor_names(self) -> set[str]:
        """Checkpoint tensor names (as in the safetensors files) this half materialised."""


def left_pad(prompts: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Batch prompt embeddings ([L_i, H] each, same dtype / device) with left padding, the layout
    :meth:`DecoderHalf.forward` takes (Hugging Face ``generate``'s padding side "left"). Returns
    ``inputs_embeds`` [B, L, H] (zeros on pads), ``attention_mask`` [B, L] int64 (1 = real) and
    ``position_ids`` [B, L] int64 (``cumsum(mask) - 1``, 0 on pads).
    """
    import torch  # the decoder side always has it

    b, L = len(prompts), max(int(p.shape[0]) for p in prompts)
    x = prompts[0].new_zeros(b, L, prompts[0].shape[-1])
    mask = torch.zeros(b, L, dtype=torch.long, device=prompts[0].device)
    for j, p in enumerate(prompts):
        x[j, L - p.shape[0]:] = p
        mask[j, L - p.shape[0]:] = 1
    return x, mask, (mask.cumsum(1) - 1).clamp(min=0)


class DecoderHalf(abc.ABC):
    """Tokenizer + prompt template + causal (MoE) language model reading ``inputs_embeds``.

    Attributes set by :meth:`load`: ``model_id``, ``revision``, ``family``, ``hidden_size`` (H),
    ``vocab_size`` (V), ``device``, ``dtype``, ``eos_token_ids`` (set[int]), ``max_vision_tokens``
    (per segment), ``max_positions`` (context length, tokens), ``tasks`` (list[str]),
    ``default_task`` (str); ``extra_columns``: the non-feature columns it reads at the end of every
    vision token (:class:`TokenColumns`, as its encoder half declares them).
    """

    family: str
    model_id: str
    revision: str
    hidden_size: int
    vocab_size: int
    device: torch.device
    dtype: torch.dtype
    eos_token_ids: set[int]
    max_vision_tokens: int
    max_positions: int
    tasks: list[str]
    default_task: str
    extra_columns: tuple[TokenColumns, ...] = ()

    @classmethod
    @abc.abstractmethod
    def load(cls, checkpoint_dir: str | pathlib.Path, device: str = "cpu",
             dtype: Any = None) -> DecoderHalf:
        """Load only the decoder-side tensors of ``checkpoint_dir``; ``dtype`` a torch dtype (each half
        has its default, float32).
        """

    @abc.abstractmethod
    def embed_prompt(self, vision_tokens: torch.Tensor, task: str, prompt: str | None = None) -> torch.Tensor:
        """Prompt embeddings [L, H] (model dtype, on ``device``): the task template with
        ``n_tokens`` image placeholders whose embeddings are replaced by ``vision_tokens`` [n_tokens, H].
        Raises InvalidInput for an unknown task.
        """

    @abc.abstractmethod
    def embed_tokens(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Token embeddings: LongTensor [B, T] -> [B, T, H]."""

    @abc.abstractmethod
    def new_cache(self) -> Any:
        """An empty KV cache (a transformers ``Cache``) for :meth:`forward`."""

    @abc.abstractmethod
    def forward(
        self,
        inputs_embeds: torch.Tensor,
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor,
        past_key_values: Any,
    ) -> torch.Tensor:
        """One model step: ``inputs_embeds`` [B, T, H], ``attention_mask`` [B, S] (1 = attend,
        0 = padding), ``position_ids`` [B, T]; updates ``past_key_values`` in place and returns
        the last position's logits [B, V] as float32.
        """

    def check_step_inputs(self, inputs_embeds: torch.Tensor, attention_mask: torch.Tensor,
                          position_ids: torch.Tensor, past_key_values: Any) -> None:
        """Boundary check of :meth:`forward`'s arguments: ``inputs_embeds`` [B, T, H],
        ``attention_mask`` [B, cached + T], ``position_ids`` [B, T], a cache from :meth:`new_cache`,
        and cached + T <= ``max_positions``. Raises InvalidInput naming the expected shape.
        """
        if past_key_values is None:
            raise InvalidInput("past_key_values is required (use new_cache())")
        if inputs_embeds.ndim != 3 or inputs_embeds.shape[-1] != self.hidden_size:
            raise InvalidInput(f"inputs_embeds must be [B, T, {self.hidden_size}], got {list(inputs_embeds.shape)}")
        b, t, _ = inputs_embeds.shape
        s = past_key_values.get_seq_length() + t
        if tuple(attention_mask.shape) != (b, s):
            raise InvalidInput(f"attention_mask must be [{b}, {s}], got {list(attention_mask.shape)}")
        if tuple(position_ids.shape) != (b, t):
            raise InvalidInput(f"position_ids must be [{b}, {t}], got {list(position_ids.shape)}")
        if s > self.max_positions:
            raise InvalidInput(f"sequence of {s} positions exceeds the model's {self.max_positions}")

    def prefill_packed(self, embeds: list[torch.Tensor]) -> tuple[torch.Tensor, Any, torch.Tensor] | None:
        """Prefill of several prompts ([L_i, H] each, model dtype and device) in the half's own
        efficient way, or None (the default) when it has none and the caller runs one left-padded
        :meth:`forward`. When not None: (last-position logits [b, V] float32, a cache from
        :meth:`new_cache` whose layers hold keys / values [b, heads, L_max, d] with each prompt
        right-aligned after zeros, attention mask [b, L_max] int64), the layout of a left-padded
        prefill. Raises InvalidInput for a prompt longer than ``max_positions``.
        """
        return None

    @abc.abstractmethod
    def decode_text(self, token_ids: list[int]) -> str:
        """Token ids -> text (special tokens skipped)."""

    def finish_state(self, prompt_embeds: torch.Tensor) -> Any:
        """What :meth:`finish_tokens` needs of a sequence's prompt (``prompt_embeds`` [L, H] as
        :meth:`embed_prompt` made it), kept after prefill in place of the embeddings; None (the
        default): nothing to do at the finish.
        """
        return None

    def finish_tokens(self, state: Any, token_ids: list[int]) -> list[int]:
        """A finished sequence's generated ids (EOS last when it ended the sequence) as delivered in
        one piece, given its :meth:`finish_state`; the default returns them unchanged. Only a sequence
        delivered whole can be corrected at its end: streamed tokens are final when sent.
        """
        return token_ids

    @abc.abstractmethod
    def loaded_tensor_names(self) -> set[str]:
        """Checkpoint tensor names (as in the safetensors files) this half materialised."""

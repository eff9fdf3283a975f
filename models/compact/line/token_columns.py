"""The extra columns of a compact vision token, declared (torch-free: the encoder half on
onnxruntime reads it): after the ``hidden`` model features, a PP-tower token of a copy checkpoint
carries its frame's ``k`` copy classes (:func:`models.compact.line.columns.pack`: ``k`` columns of
``id // 128``, ``k`` of ``id % 128``, ``k`` probabilities) and, with a spacing head, two more
probabilities (:mod:`models.compact.decode.spacing`). A Latin line's tokens carry zeros there
(probability 0: no class to copy). Served through the encoder's ``Info`` (``extra_columns``).
"""

from __future__ import annotations

from models.base import TokenColumns
from models.compact.line.inkcolumns import SPACING_WIDTH


def token_columns(topk: int, spacing: bool) -> tuple[TokenColumns, ...]:
    """The runs of extra columns for ``topk`` copy classes (0: none) and a spacing head (``spacing``)."""
    if topk <= 0:
        return ()
    runs: tuple[TokenColumns, ...] = (
        TokenColumns("copy_class_id_high", topk, "integer",
                     "id // 128 of each of the recogniser's top copy classes of this frame, best first"),
        TokenColumns("copy_class_id_low", topk, "integer", "id % 128 of the same classes"),
        TokenColumns("copy_class_probability", topk, "probability",
                     "the recogniser's posterior of each class in [0, 1]; 0 except at the class's spike "
                     "and for special ids"),
    )
    if spacing:
        runs += (TokenColumns("spacing_probability", SPACING_WIDTH, "probability",
                              "P(a space follows this frame's character), P(the character is full-width)"),)
    return runs


def columns_of_width(width: int) -> tuple[TokenColumns, ...]:
    """The runs of a token carrying ``width`` extra columns (3 per copy class, plus the spacing head's
    :data:`SPACING_WIDTH` when ``width % 3`` says so). ValueError for a width no checkpoint makes.
    """
    spacing = width % 3 == SPACING_WIDTH % 3 and width > SPACING_WIDTH
    topk, rest = divmod(width - (SPACING_WIDTH if spacing else 0), 3)
    if rest or width < 0:
        raise ValueError(f"{width} extra token columns are not 3 per copy class (+ {SPACING_WIDTH} for spacing)")
    return token_columns(topk, spacing)

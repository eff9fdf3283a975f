"""Faint print or show-through? Read the faint lines both ways round and see which way they read.

Ink from the back of a sheet shows through mirrored; faint print on a faded receipt is the right way
round. Their contrast does not tell them apart: the faded Chinese and thermal receipts of
``bench/receipts.py`` (``training/compact/scan_degrade.py`` ``thermal``: ink lifted to 70-190 on
225-250 paper, times a fade and blotches of 0.5-1) hold lines of 27-60 gray levels, and a page of
show-through at 88 % white measures 30 (``tests/system/test_reading_range.py``). The recogniser
does: PP-OCRv6 (the PP tower's trunk and CTC head, :func:`models.compact.line.pptrunk.pp_classifier`)
reads print with confident character spikes the right way round and mirrored text as garbage, or
as nothing but spaces.

:func:`reads_forward` reads each line crop and its mirror image and says, per line, whether the
crop reads at least one character and its character spikes are at least as confident (mean
log-probability of the top class over the frames whose top class is neither the blank nor the
space) as the mirror's. One line does not decide (``金``, ``0.80`` and ``8`` read alike both ways),
a page's share does (:func:`forward_page`): on the tune documents (seeds 30,000-30,035) the lines
in the faint band of the four faded receipts read forwards in 29/35, 37/41, 43/45 and 29/30 cases;
the show-through page at 88 % white in 1/30 (its crops read as spaces), the mirrored monospace
receipt of ``tests/unit/test_show_through.py`` at 45 levels (200 on 245) in 16/28 (its prices read
alike both ways). The bar, :data:`FORWARD_SHARE`, is the middle of the gap between 0.57 and 0.83.

Cost: one trunk forward of each line and of its mirror, plus the 120 x 18,710 head per frame; run on
the faint band only (:func:`models.compact.page.prepare.inked_lines`), which a page of black print
does not have.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image, ImageOps

from models.compact.line.image import width_batches
from models.compact.line.pptrunk import pp_classifier

if TYPE_CHECKING:
    from models.compact.line.towers import PPTower

#: Share of a page's faint-band lines that must read forwards for the band to be print (see the
#: module docstring: faded receipts 0.83-0.97, show-through 0.03-0.57).
FORWARD_SHARE = 0.7
#: Lines per trunk forward.
MAX_LINES_PER_FORWARD = 16


def spike_confidence(frames: np.ndarray, n_frames: int) -> float:
    """Mean log-probability (nats, <= 0) of the top class over a line's character frames: ``frames``
    [T, 120] float32 trunk features (frames past ``n_frames`` are padding), the CTC head of
    :func:`pp_classifier` applied; character frames are those whose top class is neither the blank
    (class 0) nor a space. ``-inf`` for a line without one (it reads nothing).
    """
    w, b, labels = pp_classifier()
    z = frames[: max(0, n_frames)].astype(np.float32) @ w + b
    z -= z.max(axis=-1, keepdims=True)
    logp = -np.log(np.exp(z).sum(axis=-1))  # log-probability of each frame's top class
    top = z.argmax(axis=-1)
    chars = (top != 0) & ~np.isin(top, _space_classes(labels))
    return float(logp[chars].mean()) if chars.any() else float("-inf")


def _space_classes(labels: tuple[str, ...]) -> np.ndarray:
    return np.array([i for i, c in enumerate(labels) if c == " "], dtype=np.int64)


def reads_forward(pp: PPTower, crops: Sequence[Image.Image]) -> list[bool]:
    """Per dark-on-light line crop: True when it reads at least one character and its
    :func:`spike_confidence` is at least its mirror image's (one trunk forward of both, batched by
    width; ``pp``: the checkpoint's PP tower, :meth:`models.compact.line.towers.PPTower.prepare` and
    its ``trunk``). Raises FileNotFoundError as :func:`pp_classifier`.
    """
    images = [im for c in crops for im in (c, ImageOps.mirror(c))]
    prepared = [pp.prepare(im)[0] for im in images]
    conf = [float("-inf")] * len(images)
    for chunk in width_batches(prepared, MAX_LINES_PER_FORWARD):
        x = np.stack([np.asarray(prepared[i], dtype=np.float32) for i in chunk])[:, None]
        frames = pp.trunk.features(np.broadcast_to(x, (x.shape[0], 3, *x.shape[2:])))
        for j, i in enumerate(chunk):  # the paper padding reads blank: every frame is looked at
            conf[i] = spike_confidence(frames[j], frames.shape[1])
    return [f > float("-inf") and f >= m for f, m in zip(conf[0::2], conf[1::2], strict=True)]


def forward_page(votes: Sequence[bool]) -> bool:
    """True when more than :data:`FORWARD_SHARE` of ``votes`` (:func:`reads_forward`) are True: the
    faint lines of the page are print; False for no votes.
    """
    return bool(votes) and sum(votes) > FORWARD_SHARE * len(votes)
